"""Numbers of the collection dashboard: how far collection has got and whether assignment is balanced.

Every figure is one grouped query, so the dashboard's query count does not
grow with the number of conversations.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Q, QuerySet

from annotation.models import BinaryJudgement, MoodTag, PairwiseComparison
from collection.models import (
    IDENTITY_MASKED,
    IDENTITY_REGENERATED,
    IDENTITY_UNSCREENED,
    Conversation,
    OriginalModel,
    Participant,
    Study,
    Turn,
    not_test_data,
)


@dataclass
class CollectionStats:
    total: int
    by_status: list[tuple[str, str, int]]
    by_category: list[tuple[str, int, int]]
    by_model: list[dict[str, Any]]
    turns_total: int
    turns_annotated: int
    median_annotation_seconds: float | None
    annotation_timings: int
    participants: int
    withdrawn_participants: int
    withdrawn_conversations: int
    # The identity screen (collection.identity_guard): screened replies, and those that named a model,
    # provider or product and were asked again (regenerated) or shown masked.
    identity_screened: int = 0
    identity_regenerated: int = 0
    identity_masked: int = 0

    @property
    def identity_leaks(self) -> int:
        return self.identity_regenerated + self.identity_masked


def reply_source(model: OriginalModel, collected: int) -> str:
    """Where this model's replies to participants come from, so demo data is never mistaken for real."""
    if not collected:
        return "imported conversations only"
    if not model.litellm_model:
        return "offline scripted model (demo)"
    if not settings.ATTUNE_ALLOW_LIVE_MODELS:
        return "offline scripted model (demo: live models are switched off)"
    return f"live: {model.litellm_model}"


def collection_stats() -> CollectionStats:
    """Counts by status, topic category and original model, annotation progress and withdrawals."""
    conversations = Conversation.objects.real()  # researchers' previews are never counted
    turns = Turn.objects.filter(not_test_data("conversation__participant"))
    status_counts = dict(conversations.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    by_status = [(value, label, status_counts.get(value, 0)) for value, label in Conversation.Status.choices]

    category_rows = (
        conversations.values("topic__category")
        .annotate(n=Count("id"), complete=Count("id", filter=Q(status=Conversation.Status.COMPLETE)))
        .order_by("-n", "topic__category")
    )
    by_category = [(r["topic__category"], r["n"], r["complete"]) for r in category_rows]

    real = not_test_data("conversations__participant")
    model_rows = (
        OriginalModel.objects.annotate(
            n=Count("conversations", filter=real),
            complete=Count("conversations", filter=real & Q(conversations__status=Conversation.Status.COMPLETE)),
            collected=Count("conversations", filter=real & Q(conversations__source=Conversation.Source.COLLECTED)),
        )
        .filter(n__gt=0)
        .order_by("-n", "alias")
    )
    by_model = [
        {
            "alias": m.alias,
            "identity": m.name or "(redacted)",
            "provider": m.provider,
            "active": m.active,
            "conversations": m.n,
            "complete": m.complete,
            "replies": reply_source(m, m.collected),
        }
        for m in model_rows
    ]

    turns_total = turns.count()
    annotated = turns.filter(
        Q(annotation_completed_at__isnull=False)
        | Q(pk__in=MoodTag.objects.values("turn_id"))
        | Q(pk__in=BinaryJudgement.objects.values("turn_id"))
        | Q(pk__in=PairwiseComparison.objects.values("turn_id"))
    ).count()
    durations = [
        d.total_seconds()
        for d in turns.filter(annotation_started_at__isnull=False, annotation_completed_at__isnull=False)
        .annotate(took=F("annotation_completed_at") - F("annotation_started_at"))
        .values_list("took", flat=True)
        if d is not None and d.total_seconds() >= 0
    ]
    screens = dict(
        turns.exclude(identity_screen=IDENTITY_UNSCREENED)
        .values_list("identity_screen")
        .annotate(n=Count("id"))
        .values_list("identity_screen", "n")
    )
    return CollectionStats(
        identity_screened=sum(screens.values()),
        identity_regenerated=screens.get(IDENTITY_REGENERATED, 0),
        identity_masked=screens.get(IDENTITY_MASKED, 0),
        total=sum(status_counts.values()),
        by_status=by_status,
        by_category=by_category,
        by_model=by_model,
        turns_total=turns_total,
        turns_annotated=annotated,
        median_annotation_seconds=statistics.median(durations) if durations else None,
        annotation_timings=len(durations),
        participants=Participant.objects.real().count(),
        withdrawn_participants=Participant.objects.real().filter(withdrawn_at__isnull=False).count(),
        withdrawn_conversations=status_counts.get(Conversation.Status.WITHDRAWN, 0),
    )


def study_limits(limit: int = 50) -> QuerySet[Study]:
    """The newest active studies with their participant counts, for the limits table (cap, live-model budget).

    One query; the admin lists every study.
    """
    real = Q(participants__is_test=False)
    return (
        Study.objects.open().annotate(n_participants=Count("participants", filter=real)).order_by("-created_at")[:limit]
    )


def recent_conversations(
    status: str | None = None, category: str | None = None, limit: int = 50
) -> QuerySet[Conversation]:
    """The newest conversations for the dashboard list, optionally filtered; a withdrawn participant's are
    left out (the counts above the list still include them)."""
    queryset = (
        Conversation.objects.real()
        .exclude(status=Conversation.Status.WITHDRAWN)
        .select_related("topic", "original_model", "participant")
        .annotate(n_turns=Count("turns"))
    )
    if status:
        queryset = queryset.filter(status=status)
    if category:
        queryset = queryset.filter(topic__category=category)
    return queryset.order_by("-started_at")[:limit]


def conversation_transcript(conversation: Conversation) -> list[dict[str, Any]]:
    """Turns with every annotation beside them, for the per-conversation viewer."""
    turns = (
        conversation.turns.order_by("turn_number")
        .select_related("alternates")
        .prefetch_related("mood_tags", "binary_judgements", "pairwise_comparisons")
    )
    out = []
    for turn in turns:
        alternates = getattr(turn, "alternates", None)
        out.append(
            {
                "turn": turn,
                "tags": list(turn.mood_tags.all()),
                "judgements": list(turn.binary_judgements.all()),
                "comparisons": [
                    {
                        "c": c,
                        "winner_label": (
                            c.response_a if c.winner == "A" else c.response_b if c.winner == "B" else None
                        ),
                    }
                    for c in turn.pairwise_comparisons.all()
                ],
                "alternates": alternates,
                "annotation_seconds": (
                    (turn.annotation_completed_at - turn.annotation_started_at).total_seconds()
                    if turn.annotation_started_at and turn.annotation_completed_at
                    else None
                ),
            }
        )
    return out
