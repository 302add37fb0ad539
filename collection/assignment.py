"""Which original model a new conversation is assigned to.

Without a study pool: among the active original models, pick the one
with the fewest conversations so far in the chosen topic's category; ties are
broken at random so no model is systematically favoured by its database order.

With a study pool (``StudyModel``): only the pool's active models, in
proportion to their weights, balanced within the cell of the new conversation
(the study, its topic and the participant's group). The model with the lowest
``conversations in the cell / weight`` is chosen; ties go to the lowest
``conversations in the study / weight`` (so many small cells still balance
overall), then to the heavier weight, then to the alias. Deterministic, so the
rule can be tested exactly.

Withdrawn conversations and researchers' previews do not count: they never reach the dataset.
"""

from __future__ import annotations

import random
from fractions import Fraction

from django.db.models import Count, Q

from collection.models import Conversation, OriginalModel, Study, StudyModel, Topic, not_test_data

_tie_breaker = random.SystemRandom()


class NoModelAvailable(Exception):
    """The active pool is empty: a researcher has to activate at least one original model."""


def conversation_counts(category: str) -> dict[int, int]:
    """Active model id -> conversations so far in ``category`` (withdrawn and preview ones excluded)."""
    counted = (
        Q(conversations__topic__category=category)
        & ~Q(conversations__status=Conversation.Status.WITHDRAWN)
        & not_test_data("conversations__participant")
    )
    rows = OriginalModel.objects.filter(active=True).annotate(n=Count("conversations", filter=counted))
    return {row.pk: row.n for row in rows}


def pool_counts(study: Study, topic: Topic, group: str) -> list[tuple[StudyModel, int, int]]:
    """(pool entry, conversations in the cell, conversations in the study) for the study's active pool."""
    in_study = (
        Q(original_model__conversations__participant__study=study)
        & ~Q(original_model__conversations__status=Conversation.Status.WITHDRAWN)
        & Q(original_model__conversations__participant__is_test=False)
    )
    in_cell = (
        in_study
        & Q(original_model__conversations__topic=topic)
        & Q(original_model__conversations__participant__group=group)
    )
    rows = (
        StudyModel.objects.filter(study=study, original_model__active=True)
        .select_related("original_model")
        .annotate(
            cell=Count("original_model__conversations", filter=in_cell),
            total=Count("original_model__conversations", filter=in_study),
        )
    )
    return [(row, row.cell, row.total) for row in rows]


def choose_from_pool(entries: list[tuple[StudyModel, int, int]]) -> OriginalModel:
    """The weighted, balanced choice among pool entries (see the module docstring)."""
    if not entries:
        raise NoModelAvailable("the study's model pool has no active original model")
    best = min(
        entries,
        key=lambda e: (
            Fraction(e[1], e[0].weight),
            Fraction(e[2], e[0].weight),
            -e[0].weight,
            e[0].original_model.alias,
        ),
    )
    return best[0].original_model


def choose_original_model(topic: Topic, study: Study | None = None, group: str = "") -> OriginalModel:
    """The model for the next conversation on ``topic``: from the study's pool if it has one, else the least used."""
    if study is not None and StudyModel.objects.filter(study=study).exists():
        return choose_from_pool(pool_counts(study, topic, group))
    counts = conversation_counts(topic.category)
    if not counts:
        raise NoModelAvailable("no active original model in the pool")
    fewest = min(counts.values())
    candidates = sorted(pk for pk, n in counts.items() if n == fewest)
    return OriginalModel.objects.get(pk=_tie_breaker.choice(candidates))
