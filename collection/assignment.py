"""Which original model a new conversation is assigned to.

Balancing rule (issue 5): among the active original models, pick the one with
the fewest conversations so far in the chosen topic's category; ties are broken
at random so no model is systematically favoured by its database order.
Withdrawn conversations do not count: they never reach the dataset.
"""

from __future__ import annotations

import random

from django.db.models import Count, Q

from collection.models import Conversation, OriginalModel, Topic

_tie_breaker = random.SystemRandom()


class NoModelAvailable(Exception):
    """The active pool is empty: a researcher has to activate at least one original model."""


def conversation_counts(category: str) -> dict[int, int]:
    """Active model id -> conversations so far in ``category`` (withdrawn ones excluded)."""
    counted = Q(conversations__topic__category=category) & ~Q(conversations__status=Conversation.Status.WITHDRAWN)
    rows = OriginalModel.objects.filter(active=True).annotate(n=Count("conversations", filter=counted))
    return {row.pk: row.n for row in rows}


def choose_original_model(topic: Topic) -> OriginalModel:
    """The model the next conversation on ``topic`` should use, by the balancing rule."""
    counts = conversation_counts(topic.category)
    if not counts:
        raise NoModelAvailable("no active original model in the pool")
    fewest = min(counts.values())
    candidates = sorted(pk for pk, n in counts.items() if n == fewest)
    return OriginalModel.objects.get(pk=_tie_breaker.choice(candidates))
