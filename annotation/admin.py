"""Django admin for per-turn annotations: searchable by conversation, filterable by answer."""

from __future__ import annotations

from django.contrib import admin

from annotation import models as m
from collection.admin_withdrawal import HidesWithdrawnAdmin


@admin.register(m.MoodTag)
class MoodTagAdmin(HidesWithdrawnAdmin):
    list_display = ("turn", "position", "emotion", "intensity")
    list_filter = ("emotion", "intensity")
    search_fields = ("turn__conversation__conversation_id", "emotion")
    list_select_related = ("turn__conversation",)


@admin.register(m.BinaryJudgement)
class BinaryJudgementAdmin(HidesWithdrawnAdmin):
    list_display = ("turn", "question_id", "observed", "preferred", "llm_value")
    list_filter = ("question_id", "observed", "preferred")
    search_fields = ("turn__conversation__conversation_id", "question_id")
    list_select_related = ("turn__conversation",)


@admin.register(m.AlternateResponses)
class AlternateResponsesAdmin(HidesWithdrawnAdmin):
    list_display = ("turn", "improved_generated_at")
    search_fields = ("turn__conversation__conversation_id", "llm_improved", "human_edited")
    readonly_fields = ("improved_generated_at",)
    list_select_related = ("turn__conversation",)


@admin.register(m.PairwiseComparison)
class PairwiseComparisonAdmin(HidesWithdrawnAdmin):
    list_display = ("turn", "position", "question_id", "response_a", "response_b", "winner")
    list_filter = ("question_id", "winner", "response_a", "response_b")
    search_fields = ("turn__conversation__conversation_id", "question_id")
    list_select_related = ("turn__conversation",)


@admin.register(m.PageTime)
class PageTimeAdmin(HidesWithdrawnAdmin):
    """Seconds each annotation page was open before it was sent (quality control's too-fast check)."""

    list_display = ("turn", "page", "seconds", "recorded_at")
    list_filter = ("page",)
    search_fields = ("turn__conversation__conversation_id",)
    list_select_related = ("turn",)

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
