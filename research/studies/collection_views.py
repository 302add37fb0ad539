"""The collection dashboard and the conversation viewer. Views parse and authorise; services do the work."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from attunebench import catalogue as cat
from collection.models import Conversation
from datasets.exchange import exportable_conversations
from research.access.checks import researcher_required
from research.studies import collection_stats, monitoring
from scoring.models import RunConversation

# ---------------------------------------------------------------------------
# Collection dashboard
# ---------------------------------------------------------------------------


@researcher_required
@require_GET
def collection_dashboard(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status") or None
    category = request.GET.get("category") or None
    monitored, monitor = monitoring.dashboard_study(request.GET.get("study") or None)
    return render(
        request,
        "research/collection.html",
        {
            "monitored": monitored,
            "monitor": monitor,
            "stats": collection_stats.collection_stats(),
            "studies": collection_stats.study_limits(),
            "conversations": collection_stats.recent_conversations(status, category),
            "status": status,
            "category": category,
            "statuses": [c for c in Conversation.Status.choices if c[0] != Conversation.Status.WITHDRAWN],
            "categories": cat.TOPIC_CATEGORIES,
        },
    )


@researcher_required
@require_GET
def conversation_viewer(request: HttpRequest, conversation_id: str) -> HttpResponse:
    # A withdrawn participant's conversation is gone from the research pages as from exports.
    conversation = get_object_or_404(
        exportable_conversations().select_related("topic", "original_model", "participant", "wide_answers"),
        conversation_id=conversation_id,
    )
    surveys = {s.kind: s for s in conversation.panas_surveys.prefetch_related("item_responses")}
    return render(
        request,
        "research/conversation.html",
        {
            "conversation": conversation,
            "turns": collection_stats.conversation_transcript(conversation),
            "pre": surveys.get("pre"),
            "post": surveys.get("post"),
            "wide": getattr(conversation, "wide_answers", None),
            "branches": conversation.four_branch_ratings.all(),
            "runs": RunConversation.objects.filter(conversation=conversation, status=RunConversation.Status.DONE)
            .select_related("run__evaluated_model")
            .order_by("run__evaluated_model__name"),
        },
    )
