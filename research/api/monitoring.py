"""``GET /api/studies/<slug>/monitoring/``: the study's monitoring figures as JSON.

The same numbers as the collection dashboard's monitoring panel
(``research.monitoring.study_monitoring``); researchers only, like the rest of the API.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collection.models import Study
from research.api.views import DENIED, NOT_FOUND, ResearcherAPIMixin
from research.studies.monitoring import study_monitoring


class DayProgressSerializer(serializers.Serializer):
    day = serializers.DateField(help_text="UTC calendar day.")
    joined = serializers.IntegerField(help_text="Participants who joined that day (not withdrawn).")
    started = serializers.IntegerField(help_text="Conversations started (topic chosen).")
    completed = serializers.IntegerField(help_text="Conversations completed.")
    completed_total = serializers.IntegerField(help_text="Conversations completed up to and including that day.")


class FunnelStepSerializer(serializers.Serializer):
    step = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.label
    finished = serializers.IntegerField(help_text="Participants (not withdrawn) who finished this step.")
    stopped_here = serializers.IntegerField(help_text="Finished the step before but not this one.")
    rate = serializers.FloatField(allow_null=True, help_text="finished / participants not withdrawn.")


class StepTimeSerializer(serializers.Serializer):
    step = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.label
    median_seconds = serializers.FloatField(allow_null=True)
    n = serializers.IntegerField(help_text="Timed participants (turns, for one turn's annotation).")


class QuotaRowSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["topic", "group"])
    target = serializers.CharField(help_text="The topic ('category: subtopic') or the group name.")
    cap = serializers.IntegerField()
    filled = serializers.IntegerField(help_text="Conversations (topic) or participants (group), not withdrawn.")
    full = serializers.BooleanField()


class QualityFlagSerializer(serializers.Serializer):
    kind = serializers.CharField(
        help_text="A quality check (see /api/quality/{slug}/ for each participant's evidence)."
    )
    label = serializers.CharField()  # type: ignore[assignment]
    participants = serializers.IntegerField(help_text="Participants (not withdrawn) this check flags.")


class QualityFlagsSerializer(serializers.Serializer):
    participants_reviewed = serializers.IntegerField(help_text="Participants not withdrawn (previews never).")
    participants_flagged = serializers.IntegerField(help_text="Of those, flagged by at least one check.")
    excluded = serializers.IntegerField(help_text="Of those, excluded by a researcher's current decision.")
    by_kind = QualityFlagSerializer(many=True)


class SpendSerializer(serializers.Serializer):
    live_calls_used = serializers.IntegerField()
    live_call_budget = serializers.IntegerField(allow_null=True, help_text="Null: no limit.")
    remaining = serializers.IntegerField(allow_null=True)
    percent_used = serializers.FloatField(allow_null=True)
    cost_usd = serializers.FloatField(help_text="litellm's prices of the live calls so far, in US dollars.")
    cost_budget_usd = serializers.FloatField(allow_null=True, help_text="The study's dollar budget; null: no limit.")
    calls_unpriced = serializers.IntegerField(help_text="Live calls to models litellm has no price for.")


class SafetyFlagsSerializer(serializers.Serializer):
    urgent = serializers.IntegerField(help_text="Safety events at the urgent level (participants not withdrawn).")
    concern = serializers.IntegerField(help_text="Safety events at the concern level.")
    participants = serializers.IntegerField(help_text="Participants with at least one safety event.")


class StudyMonitoringSerializer(serializers.Serializer):
    """research.monitoring.StudyMonitoring. Researchers' previews are never counted."""

    study = serializers.SlugField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=Study.Status.choices)
    participants = serializers.IntegerField(help_text="Participants, withdrawn ones included (previews never).")
    withdrawn = serializers.IntegerField()
    completed = serializers.IntegerField(help_text="Participants who finished the study.")
    completion_rate = serializers.FloatField(allow_null=True, help_text="completed / participants not withdrawn.")
    by_day = DayProgressSerializer(many=True)
    funnel = FunnelStepSerializer(many=True)
    step_times = StepTimeSerializer(many=True)
    quotas = QuotaRowSerializer(many=True)
    quality = QualityFlagsSerializer()
    spend = SpendSerializer()
    safety = SafetyFlagsSerializer(help_text="Flags only: see /api/studies/{slug}/safety-events/ for the log.")


class StudyMonitoringView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="How a study is going: progress per day, funnel, time per step, quotas, quality flags, spend",
        parameters=[OpenApiParameter("slug", str, OpenApiParameter.PATH, description="The study's address name.")],
        responses={200: StudyMonitoringSerializer, **DENIED, **NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        return Response(StudyMonitoringSerializer(study_monitoring(study).as_dict()).data)
