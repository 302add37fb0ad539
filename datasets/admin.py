"""Django admin for dataset versions and export jobs; both are immutable records once made."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from collection.admin_withdrawal import HidesWithdrawnAdmin
from datasets.models import DatasetVersion, ExportJob


@admin.register(DatasetVersion)
class DatasetVersionAdmin(HidesWithdrawnAdmin):
    list_display = ("name", "conversation_count", "frozen", "content_hash", "created_at", "created_by")
    list_filter = ("frozen", "created_at")
    search_fields = ("name", "description", "content_hash")
    readonly_fields = (
        "content_hash",
        "content_hash_with_model_identity",
        "conversation_count",
        "created_at",
        "created_by",
        "frozen",
    )
    filter_horizontal = ("conversations",)
    list_select_related = ("created_by",)  # nullable, so the admin would not join it by itself

    def get_readonly_fields(self, request: HttpRequest, obj: DatasetVersion | None = None) -> list[str]:
        # A frozen version is immutable (SPEC: named immutable selection), including its members.
        fields = [str(f) for f in super().get_readonly_fields(request, obj)]
        if obj is not None and obj.frozen:
            fields += ["name", "conversations"]
        return fields

    def get_fields(self, request: HttpRequest, obj: DatasetVersion | None = None) -> Any:
        # A saved version's members are shown to superusers only: the list would name withdrawn participants'
        # conversations (the research pages list a version's usable members).
        fields = list(super().get_fields(request, obj))
        if obj is not None and not getattr(request.user, "is_superuser", False):
            fields = [field for field in fields if field != "conversations"]
        return fields


@admin.register(ExportJob)
class ExportJobAdmin(HidesWithdrawnAdmin):
    list_display = (
        "id",
        "dataset_version",
        "fmt",
        "status",
        "progress_percent",
        "file_size",
        "created_by",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "fmt")
    search_fields = ("dataset_version__name", "file_path", "error")
    readonly_fields = (
        "status",
        "progress_done",
        "progress_total",
        "file_path",
        "file_size",
        "file_sha256",
        "error",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
    )
    list_select_related = ("dataset_version", "created_by")
