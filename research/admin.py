"""Django admin for research bookkeeping (human-baseline assignments).

The models of collection, annotation and scoring are registered by their own
apps' admin modules (collection/admin.py, annotation/admin.py,
scoring/admin.py, datasets/admin.py), which Django's admin autodiscovery imports.
"""

from __future__ import annotations

from django.contrib import admin

from research.models import HumanAssignment


@admin.register(HumanAssignment)
class HumanAssignmentAdmin(admin.ModelAdmin):
    list_display = ("rater", "conversation", "turns_done", "assigned_by", "assigned_at", "completed_at")
    list_filter = (("completed_at", admin.EmptyFieldListFilter), "rater")
    search_fields = ("rater__username", "conversation__conversation_id")
    readonly_fields = ("run_conversation", "turns_done", "completed_at", "assigned_at")
    list_select_related = ("rater", "conversation", "assigned_by")
