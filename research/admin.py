"""Django admin for research bookkeeping (human-baseline assignments).

The models of collection, annotation and scoring are registered by their own
apps' admin modules (collection/admin.py, annotation/admin.py,
scoring/admin.py, datasets/admin.py), which Django's admin autodiscovery imports.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from collection.admin import ParticipantAdmin
from collection.admin_withdrawal import HidesWithdrawnAdmin
from collection.models import Participant
from research.access.roles import may_erase
from research.models import ErasureRecord, HumanAssignment, ResultSnapshot
from research.privacy.erasure import do_erase_participant


@admin.register(HumanAssignment)
class HumanAssignmentAdmin(HidesWithdrawnAdmin):
    list_display = ("rater", "conversation", "turns_done", "assigned_by", "assigned_at", "completed_at")
    list_filter = (("completed_at", admin.EmptyFieldListFilter), "rater")
    search_fields = ("rater__username", "conversation__conversation_id")
    readonly_fields = ("run_conversation", "turns_done", "completed_at", "assigned_at")
    list_select_related = ("rater", "conversation", "assigned_by")


@admin.register(ResultSnapshot)
class ResultSnapshotAdmin(HidesWithdrawnAdmin):
    """Frozen result snapshots, read-only: a snapshot is made on the research pages and never changed."""

    list_display = ("pk", "name", "created_at", "created_by", "content_sha256")
    list_select_related = ("created_by",)
    search_fields = ("name",)
    readonly_fields = ("name", "description", "created_at", "created_by", "content_sha256", "manifest")
    exclude = ("leaderboard", "table", "analysis")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ResultSnapshot | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ResultSnapshot | None = None) -> bool:
        return False


# ---------------------------------------------------------------------------
# Erasure: an action on the participant list (collection cannot import research, so it is added here)
# ---------------------------------------------------------------------------


@admin.action(description="Erase the selected participants and all their data (cannot be undone)")
def erase_participants(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Participant]) -> None:
    if not may_erase(request.user):
        raise PermissionDenied("Only an administrator may erase participants.")
    records = [do_erase_participant(p, erased_by=request.user, via="admin") for p in queryset]
    modeladmin.message_user(
        request,
        f"Erased {len(records)} participant(s); audit record(s) "
        + ", ".join(f"#{r.pk}" for r in records)
        + ". Affected runs are re-scored and export files holding them withdrawn.",
        messages.SUCCESS,
    )


class ErasingParticipantAdmin(ParticipantAdmin):
    actions = [*(ParticipantAdmin.actions or []), erase_participants]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not may_erase(request.user):
            actions.pop("erase_participants", None)
        return actions


admin.site.unregister(Participant)
admin.site.register(Participant, ErasingParticipantAdmin)


@admin.register(ErasureRecord)
class ErasureRecordAdmin(HidesWithdrawnAdmin):
    """The audit trail of erasures: read-only, nothing in it identifies a participant."""

    list_display = ("pk", "erased_at", "erased_by", "via")
    list_select_related = ("erased_by",)  # nullable, so the admin would not join it by itself
    readonly_fields = ("erased_at", "erased_by", "via", "rows_deleted", "runs_rescored", "exports_withdrawn")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ErasureRecord | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ErasureRecord | None = None) -> bool:
        return False
