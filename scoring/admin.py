"""Django admin for the evaluation side: registry, runs and their derived scores.

Scores and outputs are produced by the replay and scoring engines; they are
read-only here so a hand edit can never make a leaderboard disagree with its data.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.http import HttpRequest

from attunebench.replay.llm import scrub_params
from collection.admin_withdrawal import HidesWithdrawnAdmin, HidesWithdrawnRows
from scoring import models as m


@admin.register(m.EvaluatedModel)
class EvaluatedModelAdmin(HidesWithdrawnAdmin):
    list_display = (
        "name",
        "kind",
        "litellm_model",
        "max_concurrency",
        "input_cost_per_million",
        "output_cost_per_million",
        "active",
    )
    list_filter = ("kind", "active")
    search_fields = ("name", "litellm_model", "notes")
    readonly_fields = ("created_at",)

    # Where a model is called and with which key variable are the admin's decision only: a
    # researcher who could point a model at a host of their choice could collect a key there.
    def get_readonly_fields(self, request: HttpRequest, obj: m.EvaluatedModel | None = None) -> tuple[str, ...]:
        if request.user.is_superuser:
            return tuple(self.readonly_fields)
        return (*self.readonly_fields, "api_base", "params_shown")

    def get_fields(self, request: HttpRequest, obj: m.EvaluatedModel | None = None) -> tuple[str, ...]:
        fields = [str(f) for f in super().get_fields(request, obj) if f != "params_shown"]
        if request.user.is_superuser:
            return tuple(fields)
        return tuple("params_shown" if f == "params" else f for f in fields)

    @admin.display(description="params")
    def params_shown(self, obj: m.EvaluatedModel) -> str:
        """The params with anything that looks like a stored secret hidden."""
        return json.dumps(scrub_params(obj.params or {}), sort_keys=True)


class RunConversationInline(HidesWithdrawnRows, admin.TabularInline):
    model = m.RunConversation
    extra = 0
    fields = ("conversation", "status", "calls_made", "calls_cached", "calls_failed", "cost_usd", "error")
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(m.EvaluationRun)
class EvaluationRunAdmin(HidesWithdrawnAdmin):
    list_display = (
        "id",
        "evaluated_model",
        "mode",
        "panas_strategy",
        "judge_model",
        "dataset_version",
        "status",
        "progress",
        "calls_made",
        "calls_cached",
        "calls_failed",
        "cost_usd",
        "created_at",
    )
    list_filter = ("status", "mode", "panas_strategy", "evaluated_model__kind", "evaluated_model")
    search_fields = ("evaluated_model__name", "error", "prompt_version")
    readonly_fields = (
        "conversations_total",
        "conversations_done",
        "conversations_failed",
        "calls_made",
        "calls_cached",
        "calls_failed",
        "cost_usd",
        "started_at",
        "finished_at",
        "created_at",
        "created_by",
        "progress",
    )
    list_select_related = ("evaluated_model", "judge_model", "dataset_version")
    date_hierarchy = "created_at"

    @admin.display(description="progress")
    def progress(self, obj: m.EvaluationRun) -> str:
        return f"{obj.progress_percent}%"


@admin.register(m.RunConversation)
class RunConversationAdmin(HidesWithdrawnAdmin):
    list_display = (
        "run",
        "conversation",
        "status",
        "calls_made",
        "calls_cached",
        "calls_failed",
        "cost_usd",
        "updated_at",
    )
    list_filter = ("status", "run__evaluated_model", "run__mode")
    search_fields = ("conversation__conversation_id", "run__evaluated_model__name", "error")
    readonly_fields = ("calls_made", "calls_cached", "calls_failed", "cost_usd", "updated_at")
    list_select_related = ("run__evaluated_model", "conversation")


@admin.register(m.ConversationScore)
class ConversationScoreAdmin(HidesWithdrawnAdmin):
    list_display = ("run", "conversation", "composite_score", "coverage")
    list_filter = ("run__evaluated_model", "run__mode", "conversation__topic__category")
    search_fields = ("conversation__conversation_id", "run__evaluated_model__name")
    readonly_fields = ("run", "conversation", "composite_score", "coverage", "metrics")
    list_select_related = ("run__evaluated_model", "conversation")


@admin.register(m.RunScore)
class RunScoreAdmin(HidesWithdrawnAdmin):
    list_display = ("run", "composite_score", "scored_at")
    list_filter = ("run__evaluated_model", "run__mode")
    search_fields = ("run__evaluated_model__name",)
    readonly_fields = ("run", "composite_score", "metrics", "scored_at")
    list_select_related = ("run__evaluated_model",)


@admin.register(m.ModelCallCache)
class ModelCallCacheAdmin(HidesWithdrawnAdmin):
    list_display = ("key", "model", "prompt_version", "cost_usd", "created_at")
    list_filter = ("model", "prompt_version")
    search_fields = ("key", "model")
    readonly_fields = ("key", "model", "prompt_version", "response", "usage", "cost_usd", "created_at")


@admin.register(m.CallTranscript)
class CallTranscriptAdmin(HidesWithdrawnAdmin):
    """Every model call of a replay, read-only (researchers read them on the run's transcript page)."""

    list_display = ("run_conversation", "sequence", "call_type", "turn_number", "model", "attempt", "cached")
    list_filter = ("role", "cached")
    search_fields = ("model",)
    list_select_related = ("run_conversation",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: m.CallTranscript | None = None) -> bool:
        return False
