"""Which conversations an evaluation run or a dataset version covers.

Withdrawal wins over everything: withdrawn conversations are never replayed,
scored or exported, even when a frozen dataset version names them.
"""

from __future__ import annotations

from django.db.models import QuerySet

from collection.models import Conversation
from datasets.exchange import export_selection, exportable_conversations
from datasets.models import DatasetVersion


def complete_conversations() -> QuerySet[Conversation]:
    """Every conversation that may enter a dataset version by default: complete and not withdrawn."""
    return export_selection(include_unfinished=False)


def selection_queryset(
    topic_categories: list[str] | None = None,
    dataset_version: DatasetVersion | None = None,
    include_unfinished: bool = False,
) -> QuerySet[Conversation]:
    """The conversations a selection names: a saved version, or all complete ones (with
    ``include_unfinished`` every non-withdrawn one), optionally by topic.

    Conversations of a version whose participant withdrew since are dropped here
    too: withdrawal wins over immutability (SPEC: exports and scoring skip withdrawn data).
    """
    if dataset_version is not None:
        queryset = exportable_conversations().filter(dataset_versions=dataset_version)
    else:
        queryset = export_selection(include_unfinished)
    if topic_categories:
        queryset = queryset.filter(topic__category__in=topic_categories)
    return queryset.order_by("conversation_id")
