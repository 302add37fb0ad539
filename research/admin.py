"""Django admin for research bookkeeping.

The models of collection, annotation and scoring are registered by their own
apps' admin modules (collection/admin.py, annotation/admin.py,
scoring/admin.py), which Django's admin autodiscovery imports.
"""

from __future__ import annotations

from django.contrib import admin

from research.models import ExportJob, HumanAssignment


@admin.register(ExportJob)
class ExportJobAdmin(admin.ModelAdmin):
    list_display = ("id", "dataset_version", "fmt", "status", "progress_percent", "file_size", "created_by", "created_at", "finished_at")
    list_filter = ("status", "fmt")
    search_fields = ("dataset_version__name", "file_path", "error")
    readonly_fields = ("status", "progress_done", "progress_total", "file_path", "file_size", "file_sha256",
                       "error", "created_by", "created_at", "started_at", "finished_at")
    list_select_related = ("dataset_version", "created_by")


@admin.register(HumanAssignment)
class HumanAssignmentAdmin(admin.ModelAdmin):
    list_display = ("rater", "conversation", "turns_done", "assigned_by", "assigned_at", "completed_at")
    list_filter = (("completed_at", admin.EmptyFieldListFilter), "rater")
    search_fields = ("rater__username", "conversation__conversation_id")
    readonly_fields = ("run_conversation", "turns_done", "completed_at", "assigned_at")
    list_select_related = ("rater", "conversation", "assigned_by")
