"""``GET /api/studies/<slug>/safety-events/``: the study's safety log (``research.studies.safety_log``) as JSON."""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from collection.models import SafetyEvent, Study
from research.api.views import DENIED, NOT_FOUND, ResearcherAPIMixin
from research.studies.safety_log import safety_log


class SafetyEventSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="When the signal was seen.")
    level = serializers.ChoiceField(choices=SafetyEvent.Level.choices)
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field named like Field.source
        choices=SafetyEvent.Source.choices, help_text="What was screened."
    )
    signals = serializers.ListField(child=serializers.CharField(), help_text="The screen's rules that fired.")
    shown = serializers.ChoiceField(choices=SafetyEvent.Shown.choices, help_text="What the participant was shown.")
    choice = serializers.CharField(help_text="pause, stop or continue on an urgent panel; empty: not chosen yet.")
    chosen_at = serializers.DateTimeField(allow_null=True)
    participant = serializers.CharField(help_text="The participant's pseudonym, as exports show it.")
    conversation_id = serializers.CharField(allow_null=True)
    turn_number = serializers.IntegerField(allow_null=True)
    notified_at = serializers.DateTimeField(allow_null=True, help_text="When the safety contact was emailed.")
    notify_error = serializers.CharField(help_text="Why the email could not be sent; empty otherwise.")


class SafetyEventsView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="A study's safety log: when a participant may have been at risk, what they saw and chose",
        description="Research-study safety net, not a clinical assessment; holds no words participants wrote. "
        "Withdrawn participants are left out. Newest first.",
        parameters=[OpenApiParameter("slug", str, OpenApiParameter.PATH, description="The study's address name.")],
        responses={200: SafetyEventSerializer(many=True), **DENIED, **NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        return Response(SafetyEventSerializer([asdict(row) for row in safety_log(study)], many=True).data)
