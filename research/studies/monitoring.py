"""How a study is going: progress per day, the funnel, time per step, quotas, quality, spend.

One function, :func:`study_monitoring`, feeds the collection dashboard's
partial and ``GET /api/studies/<slug>/monitoring/``, so both show the same
numbers. Researchers' previews (``Participant.is_test``) are never counted
(``collection.models.not_test_data``). Days are UTC calendar days.

The funnel counts, for the study's participants who have not withdrawn, how
many have *finished* each step of the participant flow (the steps of
``collection.study_flow.PROGRESS_STEPS``), and how many stopped there: they
finished the step before but not this one (still there, or gone). Withdrawals
are counted apart.

Time per step is measured only where the stored timestamps bound a step
exactly; "about you, feelings, topic" is one span because the profile's
timestamp moves when the topic is chosen.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Min, Q

from annotation.quality import FLAG_KINDS, flag_counts, study_quality
from collection.live_spend import study_spend
from collection.models import (
    Consent,
    Conversation,
    PanasSurvey,
    Participant,
    ParticipantProfile,
    SafetyEvent,
    Study,
    Turn,
)
from collection.quotas import quota_fill

#: Conversation statuses that are data (withdrawn ones are not).
_COUNTED_STATUSES = ("in_progress", "annotating", "complete")


@dataclass(frozen=True)
class DayProgress:
    day: str  # ISO date, UTC
    joined: int
    started: int  # conversations started (topic chosen)
    completed: int  # conversations completed
    completed_total: int  # completed up to and including this day


@dataclass(frozen=True)
class FunnelStep:
    step: str
    label: str
    finished: int  # participants who finished this step
    stopped_here: int  # finished the step before, not this one
    rate: float | None  # finished / joined


@dataclass(frozen=True)
class StepTime:
    step: str
    label: str
    median_seconds: float | None
    n: int


@dataclass(frozen=True)
class QuotaRow:
    kind: str
    target: str
    cap: int
    filled: int
    full: bool


@dataclass(frozen=True)
class QualityFlag:
    kind: str  # annotation.quality.FLAG_KINDS
    label: str
    participants: int


@dataclass(frozen=True)
class QualityFlags:
    """The quality-control summary (``annotation.quality``) of the participants not withdrawn."""

    participants_reviewed: int
    participants_flagged: int
    excluded: int  # by a researcher's current decision
    by_kind: list[QualityFlag]


@dataclass(frozen=True)
class Spend:
    live_calls_used: int
    live_call_budget: int | None
    remaining: int | None
    percent_used: float | None
    cost_usd: float  # litellm's prices of the live calls so far
    cost_budget_usd: float | None
    calls_unpriced: int  # live calls to models litellm has no price for (not in cost_usd)


@dataclass(frozen=True)
class SafetyFlags:
    """Safety events of participants not withdrawn (``collection.safety``); flags, never exclusions."""

    urgent: int
    concern: int
    participants: int  # participants with at least one event


@dataclass(frozen=True)
class StudyMonitoring:
    study: str
    title: str
    status: str
    participants: int
    withdrawn: int
    completed: int
    completion_rate: float | None
    by_day: list[DayProgress]
    funnel: list[FunnelStep]
    step_times: list[StepTime]
    quotas: list[QuotaRow]
    quality: QualityFlags
    spend: Spend
    safety: SafetyFlags

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: (step, label) of the funnel, in flow order (collection.study_flow's steps, finished rather than reached).
FUNNEL_STEPS: tuple[tuple[str, str], ...] = (
    ("consent", "About the study (consent)"),
    ("profile", "About you"),
    ("pre_panas", "How you feel"),
    ("topic", "Choose a topic"),
    ("chat", "Chat (and its annotation)"),
    ("post_panas", "How you feel now"),
    ("survey", "Your view (finished)"),
)

TIMED_STEPS: tuple[tuple[str, str], ...] = (
    ("consent", "Join to consent"),
    ("before_chat", "About you, feelings, topic"),
    ("chat", "Chat and annotation"),
    ("turn_annotation", "Annotating one turn"),
    ("post_panas", "How you feel now"),
    ("survey", "Your view"),
)


def _day(moment: datetime | None) -> str | None:
    return moment.date().isoformat() if moment is not None else None


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    took = (end - start).total_seconds()
    return took if took >= 0 else None


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def by_day(participants: Sequence[Mapping[str, Any]], conversations: Sequence[Mapping[str, Any]]) -> list[DayProgress]:
    """Joins, starts and completions per UTC day, from the first day with any to the last (gaps as zeros)."""
    joined = Counter(_day(p["created_at"]) for p in participants)
    started = Counter(_day(c["started_at"]) for c in conversations)
    completed = Counter(_day(c["completed_at"]) for c in conversations if c["status"] == "complete")
    days = sorted(d for d in set(joined) | set(started) | set(completed) if d is not None)
    if not days:
        return []
    first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
    out, total = [], 0
    for ordinal in range(first.toordinal(), last.toordinal() + 1):
        day = date.fromordinal(ordinal).isoformat()
        total += completed.get(day, 0)
        out.append(DayProgress(day, joined.get(day, 0), started.get(day, 0), completed.get(day, 0), total))
    return out


def funnel(finished: dict[str, int], joined: int) -> list[FunnelStep]:
    """The funnel rows from how many finished each step (``finished``) out of ``joined``."""
    rows, before = [], joined
    for step, label in FUNNEL_STEPS:
        n = finished.get(step, 0)
        rows.append(FunnelStep(step, label, n, max(before - n, 0), round(n / joined, 4) if joined else None))
        before = n
    return rows


def quality_flags(study: Study) -> QualityFlags:
    """Participants flagged per quality check, and how many a researcher has excluded (withdrawn ones aside)."""
    summaries = [s for s in study_quality(study) if s.participant.withdrawn_at is None]
    per_kind = flag_counts(summaries)
    return QualityFlags(
        participants_reviewed=len(summaries),
        participants_flagged=sum(1 for s in summaries if s.flags),
        excluded=sum(1 for s in summaries if s.excluded),
        by_kind=[QualityFlag(kind, FLAG_KINDS[kind][0], per_kind[kind]) for kind in FLAG_KINDS],
    )


def spend(study: Study) -> Spend:
    """Live-model calls used against the call budget, and their dollar cost against the dollar budget."""
    budget = study.live_call_budget
    used = study.live_calls_used
    dollars = study_spend(study)
    cost_budget = float(dollars.budget) if dollars.budget is not None else None
    remaining = percent = None
    if budget is not None:
        remaining = max(budget - used, 0)
        percent = round(100 * used / budget, 1) if budget else 100.0
    return Spend(used, budget, remaining, percent, float(dollars.cost_usd), cost_budget, dollars.calls_unpriced)


def study_monitoring(study: Study) -> StudyMonitoring:
    """Every monitoring figure of ``study`` (a fixed number of queries, whatever its size)."""
    real = Participant.objects.filter(study=study, is_test=False)
    participants = list(real.values("pk", "created_at", "withdrawn_at", "pending_pre_panas"))
    active_pks = {p["pk"] for p in participants if p["withdrawn_at"] is None}
    # Relational filters, not lists of ids: one query each however large the study.
    in_study = {"participant__study": study, "participant__is_test": False, "participant__withdrawn_at__isnull": True}
    counted = Conversation.objects.filter(**in_study).exclude(status=Conversation.Status.WITHDRAWN)
    conversations = list(counted.values("pk", "participant_id", "status", "started_at", "completed_at"))
    by_participant = {c["participant_id"]: c for c in sorted(conversations, key=lambda c: c["started_at"])}
    of_counted = {f"conversation__{k}": v for k, v in in_study.items()}
    of_counted_turns = {**of_counted, "conversation__status__in": list(_COUNTED_STATUSES)}

    consented = dict(
        Consent.objects.filter(**in_study)
        .values_list("participant_id")
        .annotate(first=Min("consented_at"))
        .values_list("participant_id", "first")
    )
    profiled = set(ParticipantProfile.objects.filter(**in_study).values_list("participant_id", flat=True))
    post = dict(
        PanasSurvey.objects.filter(kind=PanasSurvey.Kind.POST, **of_counted)
        .exclude(conversation__status=Conversation.Status.WITHDRAWN)
        .values_list("conversation_id", "completed_at")
    )
    turn_rows = list(
        Turn.objects.filter(**of_counted_turns).values_list(
            "conversation_id", "annotation_started_at", "annotation_completed_at"
        )
    )
    last_annotation: dict[int, datetime] = {}
    annotation_times = []
    for conversation_pk, began, ended in turn_rows:
        if ended is not None and (conversation_pk not in last_annotation or ended > last_annotation[conversation_pk]):
            last_annotation[conversation_pk] = ended
        took = _seconds(began, ended)
        if took is not None:
            annotation_times.append(took)

    finished: dict[str, int] = defaultdict(int)
    times: dict[str, list[float]] = defaultdict(list)
    for p in participants:
        pk = p["pk"]
        if pk not in active_pks:
            continue
        conversation = by_participant.get(pk)
        done = {
            "consent": pk in consented,
            "profile": pk in profiled,
            "pre_panas": conversation is not None or bool(p["pending_pre_panas"]),
            "topic": conversation is not None,
            "chat": conversation is not None and conversation["status"] in ("annotating", "complete"),
            "post_panas": conversation is not None and conversation["pk"] in post,
            "survey": conversation is not None and conversation["status"] == "complete",
        }
        for step, _ in FUNNEL_STEPS:
            if not done[step]:
                break  # the flow is in order: a later step cannot be finished before an earlier one
            finished[step] += 1
        spans = {"consent": _seconds(p["created_at"], consented.get(pk))}
        if conversation is not None:
            chat_end = last_annotation.get(conversation["pk"]) if done["chat"] else None
            spans["before_chat"] = _seconds(consented.get(pk), conversation["started_at"])
            spans["chat"] = _seconds(conversation["started_at"], chat_end)
            spans["post_panas"] = _seconds(chat_end, post.get(conversation["pk"]))
            spans["survey"] = (
                _seconds(post.get(conversation["pk"]), conversation["completed_at"]) if done["survey"] else None
            )
        for step, took in spans.items():
            if took is not None:
                times[step].append(took)
    times["turn_annotation"] = annotation_times

    joined = len(active_pks)
    completed = finished.get("survey", 0)
    return StudyMonitoring(
        study=study.slug,
        title=study.title,
        status=study.status,
        participants=len(participants),
        withdrawn=len(participants) - joined,
        completed=completed,
        completion_rate=round(completed / joined, 4) if joined else None,
        by_day=by_day([p for p in participants if p["pk"] in active_pks], conversations),
        funnel=funnel(finished, joined),
        step_times=[StepTime(step, label, _median(times[step]), len(times[step])) for step, label in TIMED_STEPS],
        quotas=[QuotaRow(q.kind, q.target, q.cap, q.filled, q.full) for q in quota_fill(study)],
        quality=quality_flags(study),
        spend=spend(study),
        safety=safety_flags(study),
    )


def safety_flags(study: Study) -> SafetyFlags:
    """One query: the study's safety events by level, and how many participants they concern."""
    rows = list(
        SafetyEvent.objects.filter(
            study=study, participant__is_test=False, participant__withdrawn_at__isnull=True
        ).values_list("level", "participant_id")
    )
    return SafetyFlags(
        urgent=sum(1 for level, _ in rows if level == SafetyEvent.Level.URGENT),
        concern=sum(1 for level, _ in rows if level == SafetyEvent.Level.CONCERN),
        participants=len({pk for _, pk in rows}),
    )


def dashboard_study(slug: str | None = None, limit: int = 50) -> tuple[list[Study], StudyMonitoring | None]:
    """The studies the dashboard's monitoring panel can show (newest first, drafts left out) and the
    monitoring of the one asked for by ``slug``, else of the newest open one (else the newest at all).

    One study at a time, so the dashboard's query count does not grow with the number of studies.
    """
    studies = list(
        Study.objects.filter(Q(status=Study.Status.OPEN) | Q(status=Study.Status.CLOSED))
        .only(
            "pk",
            "slug",
            "title",
            "status",
            "live_calls_used",
            "live_call_budget",
            "live_spend_budget_usd",
            "created_at",
            "attention_checks",
            "quality_min_page_seconds",
            "quality_min_edit_ratio",
            "quality_min_message_chars",
            "quality_max_failed_checks",
        )
        .order_by("-created_at")[:limit]
    )
    chosen = next((s for s in studies if s.slug == slug), None) if slug else None
    if chosen is None:
        chosen = next((s for s in studies if s.status == Study.Status.OPEN), studies[0] if studies else None)
    return studies, study_monitoring(chosen) if chosen is not None else None
