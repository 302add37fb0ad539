"""How long taking part takes, for the consent page: measured from the page times Attune records.

The answers, rewrite and compare pages of every turn record how long they were open (``PageTime``, written
by the annotation pages). A turn's questions take the sum of its three pages; the study's estimate is the
middle half of that (lower to upper quartile) over its recent finished turns, times the minimum number of
turns, plus a stated allowance for everything else (consent, the questions about the participant, the two
mood surveys, the closing questions, and writing and reading each message), which no page time measures.
With too few measured turns the consent page says the default range instead.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from django.core.cache import cache
from django.db.models import Count, Sum

from collection.models import Study, Turn

#: Below this many fully timed turns the estimate is the default range (a handful of people is no measure).
MIN_TIMED_TURNS = 10
#: The most recent timed turns the estimate reads (the instrument and the study change over time).
RECENT_TURNS = 500
#: Everything outside the per-turn questions: consent, about you, the mood before and after, the closing
#: questions (about eight minutes), and writing and reading each message (about two minutes a turn).
OUTSIDE_TURNS_SECONDS = 8 * 60
CHAT_SECONDS_PER_TURN = 2 * 60
#: What the consent page says until there is enough to measure.
DEFAULT_MINUTES = (20, 40)
CACHE_SECONDS = 600
_PAGES_PER_TURN = 3


@dataclass(frozen=True)
class TimeEstimate:
    low_minutes: int
    high_minutes: int
    measured_turns: int  # 0: the default range

    @property
    def measured(self) -> bool:
        return self.measured_turns > 0


def timed_turn_seconds(study: Study) -> list[float]:
    """Seconds spent on the three question pages of each of the study's recent fully timed turns."""
    turns = (
        Turn.objects.filter(
            conversation__participant__study=study,
            conversation__participant__is_test=False,
            annotation_completed_at__isnull=False,
        )
        .annotate(pages=Count("page_times"), seconds=Sum("page_times__seconds"))
        .filter(pages=_PAGES_PER_TURN)
        .order_by("-pk")
        .values_list("seconds", flat=True)[:RECENT_TURNS]
    )
    return [float(s) for s in turns if s is not None]


def estimate(study: Study, per_turn_seconds: list[float]) -> TimeEstimate:
    """The range to announce for ``study`` given the measured per-turn seconds (pure: no database)."""
    if len(per_turn_seconds) < MIN_TIMED_TURNS:
        return TimeEstimate(*DEFAULT_MINUTES, measured_turns=0)
    lower, _, upper = statistics.quantiles(per_turn_seconds, n=4)
    turns = max(1, study.min_turns)

    def minutes(per_turn: float) -> float:
        return (OUTSIDE_TURNS_SECONDS + turns * (per_turn + CHAT_SECONDS_PER_TURN)) / 60

    low = max(5, 5 * math.floor(minutes(lower) / 5))
    high = max(low + 5, 5 * math.ceil(minutes(upper) / 5))
    return TimeEstimate(low, high, measured_turns=len(per_turn_seconds))


def study_time_estimate(study: Study) -> TimeEstimate:
    """The consent page's estimate for ``study``, recomputed at most every ten minutes."""
    key = f"attune:time-estimate:{study.pk}:{study.min_turns}"
    cached = cache.get(key)
    if isinstance(cached, TimeEstimate):
        return cached
    result = estimate(study, timed_turn_seconds(study))
    cache.set(key, result, CACHE_SECONDS)
    return result
