"""Django admin for collected data.

Collected data is evidence: researchers (the research group) get view access
only, and admins edit through here only to fix mistakes. Derived values
(counts, identities) are read-only so nobody can mistype them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse

from collection import attention
from collection import models as m
from collection import study_flow as flow
from collection.admin_withdrawal import HidesWithdrawnAdmin, HidesWithdrawnRows


class TurnInline(HidesWithdrawnRows, admin.TabularInline):
    model = m.Turn
    extra = 0
    fields = ("turn_number", "user_message", "llm_response", "annotation_started_at", "annotation_completed_at")
    readonly_fields = fields
    show_change_link = True
    can_delete = False


class StudyModelInline(HidesWithdrawnRows, admin.TabularInline):
    """The study's original-model pool and weights (also set on the research pages)."""

    model = m.StudyModel
    extra = 0


class StudyQuotaInline(HidesWithdrawnRows, admin.TabularInline):
    """The study's quotas per topic or participant group (also set on the research pages)."""

    model = m.StudyQuota
    extra = 0


@admin.register(m.Study)
class StudyAdmin(HidesWithdrawnAdmin):
    inlines = (StudyModelInline, StudyQuotaInline)
    filter_horizontal = ("topics",)
    list_display = (
        "title",
        "slug",
        "consent_version",
        "open_enrolment",
        "min_turns",
        "max_turns",
        "status",
        "participant_count",
        "max_participants",
        "live_calls_used",
        "live_call_budget",
    )
    list_filter = ("status", "open_enrolment", "consent_version")
    search_fields = ("title", "slug")
    prepopulated_fields = {"slug": ("title",)}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(_participants=Count("participants"))

    def save_model(self, request: HttpRequest, obj: m.Study, form: Any, change: bool) -> None:
        """Saved as asked, then warned of settings that would not do what they say (as the study setup
        page warns): attention checks some participants can never meet."""
        super().save_model(request, obj, form, change)
        warning = attention.placement_warning(obj)
        if warning:
            self.message_user(request, warning, messages.WARNING)

    @admin.display(description="participants", ordering="_participants")
    def participant_count(self, obj: m.Study) -> int:
        return int(getattr(obj, "_participants", 0))  # annotated by get_queryset


class ConsentInline(HidesWithdrawnRows, admin.TabularInline):
    model = m.Consent
    extra = 0
    readonly_fields = ("version", "consented_at", "sensitive_data_consent")
    can_delete = False


@admin.register(m.Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ("pseudonym", "study", "created_at", "withdrawn_at", "conversation_count")
    list_filter = ("study", ("withdrawn_at", admin.EmptyFieldListFilter), "created_at")
    search_fields = ("pseudonym",)
    readonly_fields = ("pseudonym", "created_at", "completion_code", "link_issued_at", "link_revoked_at")
    # The study-link token is the participant's credential: only its hash is stored, and the admin shows
    # neither (the invite command, and "Issue new study links" here, print each link once).
    exclude = ("token_hash",)
    inlines = [ConsentInline]
    date_hierarchy = "created_at"
    actions = ["revoke_links", "issue_links"]

    @admin.action(description="Revoke the selected participants' study links", permissions=["change"])
    def revoke_links(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = flow.do_revoke_links(queryset)
        self.message_user(request, f"Revoked {count} study link(s); they no longer open the study.", messages.SUCCESS)

    @admin.action(description="Issue new study links (shown once, here)", permissions=["change"])
    def issue_links(self, request: HttpRequest, queryset: QuerySet) -> None:
        base = request.build_absolute_uri("/").rstrip("/")
        for participant in queryset:
            token = flow.do_issue_link(participant)
            link = base + reverse("collection:resume", kwargs={"token": token})
            self.message_user(request, f"{participant.pseudonym}: {link}", messages.WARNING)
        self.message_user(request, "Copy these links now: they are not stored and cannot be shown again.")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("study").annotate(_conversations=Count("conversations"))

    @admin.display(description="conversations", ordering="_conversations")
    def conversation_count(self, obj: m.Participant) -> int:
        return int(getattr(obj, "_conversations", 0))  # annotated by get_queryset


@admin.register(m.Consent)
class ConsentAdmin(HidesWithdrawnAdmin):
    list_display = ("participant", "version", "consented_at", "sensitive_data_consent")
    list_filter = ("version", "sensitive_data_consent")
    search_fields = ("participant__pseudonym",)
    readonly_fields = ("consented_at",)


@admin.register(m.ParticipantProfile)
class ParticipantProfileAdmin(HidesWithdrawnAdmin):
    list_display = ("participant", "age_band", "topic_attitude", "updated_at")
    list_filter = ("age_band", "topic_attitude")
    search_fields = ("participant__pseudonym",)
    readonly_fields = ("updated_at",)


@admin.register(m.SensitiveProfile)
class SensitiveProfileAdmin(HidesWithdrawnAdmin):
    list_display = ("participant", "diagnoses", "updated_at")
    search_fields = ("participant__pseudonym",)
    readonly_fields = ("updated_at",)


@admin.register(m.OriginalModel)
class OriginalModelAdmin(HidesWithdrawnAdmin):
    list_display = ("alias", "name", "provider", "litellm_model", "active", "conversation_count")
    list_filter = ("active", "provider")
    search_fields = ("alias", "name", "provider", "litellm_model")
    readonly_fields = ("alias",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(_conversations=Count("conversations"))

    @admin.display(description="conversations", ordering="_conversations")
    def conversation_count(self, obj: m.OriginalModel) -> int:
        return int(getattr(obj, "_conversations", 0))  # annotated by get_queryset


@admin.register(m.Topic)
class TopicAdmin(HidesWithdrawnAdmin):
    list_display = ("category", "subtopic", "order", "in_catalogue")
    list_filter = ("category", "in_catalogue")
    search_fields = ("category", "subtopic")


@admin.register(m.Conversation)
class ConversationAdmin(HidesWithdrawnAdmin):
    list_display = (
        "conversation_id",
        "status",
        "source",
        "topic",
        "original_model",
        "participant",
        "started_at",
        "completed_at",
        "completeness",
        "turn_count",
    )
    list_filter = ("status", "completeness", "source", "topic__category", "original_model", "started_at")
    search_fields = (
        "conversation_id",
        "participant__pseudonym",
        "topic__subtopic",
        "original_model__alias",
        "original_model__name",
    )
    # Completeness follows the collected rows (collection.completeness); editing it by hand would let it lie.
    readonly_fields = ("conversation_id", "source", "started_at", "completeness", "turn_count")
    list_select_related = ("topic", "original_model", "participant")
    date_hierarchy = "started_at"
    inlines = [TurnInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(_turns=Count("turns"))

    @admin.display(description="turns", ordering="_turns")
    def turn_count(self, obj: m.Conversation) -> int:
        return int(getattr(obj, "_turns", 0))  # annotated by get_queryset


@admin.register(m.Turn)
class TurnAdmin(HidesWithdrawnAdmin):
    list_display = (
        "conversation",
        "turn_number",
        "created_at",
        "annotation_started_at",
        "annotation_completed_at",
        "completeness",
        "identity_screen",
    )
    list_filter = (
        "conversation__topic__category",
        ("annotation_completed_at", admin.EmptyFieldListFilter),
        "completeness",
        "identity_screen",
    )
    search_fields = ("conversation__conversation_id", "user_message", "llm_response")
    readonly_fields = (
        "created_at",
        "responded_at",
        "annotation_started_at",
        "annotation_completed_at",
        "completeness",
        "mood_answered",
        "identity_screen",
        "identity_leaks",
    )
    list_select_related = ("conversation",)


class PanasItemInline(HidesWithdrawnRows, admin.TabularInline):
    model = m.PanasItemResponse
    extra = 0


@admin.register(m.PanasSurvey)
class PanasSurveyAdmin(HidesWithdrawnAdmin):
    list_display = ("conversation", "kind", "total_positive", "total_negative", "completed_at")
    list_filter = ("kind",)
    search_fields = ("conversation__conversation_id",)
    list_select_related = ("conversation",)
    inlines = [PanasItemInline]


@admin.register(m.PanasItemResponse)
class PanasItemResponseAdmin(HidesWithdrawnAdmin):
    list_display = ("survey", "item", "rating")
    list_filter = ("item", "survey__kind")
    search_fields = ("survey__conversation__conversation_id",)


@admin.register(m.ConversationWideAnswers)
class ConversationWideAnswersAdmin(HidesWithdrawnAdmin):
    list_display = ("conversation", "emotion_clarity", "model_fit", "completed_at")
    list_filter = ("emotion_clarity", "model_fit")
    search_fields = ("conversation__conversation_id",)


@admin.register(m.FourBranchRating)
class FourBranchRatingAdmin(HidesWithdrawnAdmin):
    list_display = ("conversation", "branch", "rating")
    list_filter = ("branch", "rating")
    search_fields = ("conversation__conversation_id",)


# --- Study set-up: pools and quotas also have lists of their own, across studies ---


@admin.register(m.StudyModel)
class StudyModelAdmin(HidesWithdrawnAdmin):
    list_display = ("study", "original_model", "weight")
    list_filter = ("study",)
    list_select_related = ("study", "original_model")
    search_fields = ("study__slug", "original_model__alias", "original_model__name")


@admin.register(m.StudyQuota)
class StudyQuotaAdmin(HidesWithdrawnAdmin):
    list_display = ("study", "kind", "topic", "group", "cap")
    list_filter = ("study", "kind")
    list_select_related = ("study", "topic")
    search_fields = ("study__slug", "group", "topic__subtopic")


class _RecordedOnlyAdmin(HidesWithdrawnAdmin):
    """Rows the study writes itself (calls, checks, decisions): nobody adds or edits them here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(m.SafetyEvent)
class SafetyEventAdmin(_RecordedOnlyAdmin):
    """The safety log (also on the study's safety page): which rules fired, what was shown, the choice."""

    list_display = ("created_at", "study", "level", "source", "shown", "choice", "notified_at")
    list_filter = ("level", "source", "choice", "study")
    list_select_related = ("study",)
    search_fields = ("participant__pseudonym",)
    readonly_fields = ("study", "participant", "turn", "level", "source", "signals", "shown", "choice", "chosen_at")


@admin.register(m.LiveCall)
class LiveCallAdmin(_RecordedOnlyAdmin):
    """Live original-model calls and their litellm prices: the study's dollar spend (collection.live_spend)."""

    list_display = ("study", "litellm_model", "succeeded", "cost_usd", "created_at")
    list_filter = ("study", "succeeded")
    search_fields = ("litellm_model",)
    list_select_related = ("study",)


@admin.register(m.PendingTask)
class PendingTaskAdmin(admin.ModelAdmin):
    """Tasks kept while the broker was unreachable (collection.task_queue), until a worker's sweeper sends
    them: administrators only. Read-only; deleting one drops that piece of work for good."""

    list_display = ("task", "args", "kept_at", "error")
    list_filter = ("task",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(m.AttentionCheck)
class AttentionCheckAdmin(_RecordedOnlyAdmin):
    """Instructed-response checks and their answers; never part of the data (annotation.quality reads them)."""

    list_display = ("participant", "place", "instructed", "given", "passed", "answered_at")
    list_filter = ("place", "passed")
    search_fields = ("participant__pseudonym",)
    list_select_related = ("participant",)


@admin.register(m.QualityDecision)
class QualityDecisionAdmin(_RecordedOnlyAdmin):
    """The log of researchers' include/exclude decisions; decisions are made on the quality pages."""

    list_display = ("participant", "decision", "reason", "decided_by", "decided_at")
    list_filter = ("decision", "reason")
    search_fields = ("participant__pseudonym",)
    list_select_related = ("participant", "decided_by")
