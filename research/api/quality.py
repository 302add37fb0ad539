"""The quality-control API: a study's per-participant summaries, one participant's, and recording a decision.

The same service as the pages (``annotation.quality``); researcher-only like every API view.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import quality as q
from collection.models import Participant, QualityDecision, Study
from datasets.pseudonyms import export_pseudonym, find_participant
from research.api.views import DENIED, NOT_FOUND, ResearcherAPIMixin


class FlagSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=list(q.FLAG_KINDS))
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, not Field.label
    summary = serializers.CharField()
    evidence = serializers.ListField(child=serializers.DictField(), help_text="The rows that raised the flag.")


class ChecksSerializer(serializers.Serializer):
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()


class ParticipantQualitySerializer(serializers.Serializer):
    pseudonym = serializers.CharField(
        help_text="The participant's pseudonym as exports and /api/conversations/ write it (pp-…)."
    )
    flag_count = serializers.IntegerField()
    flags = FlagSerializer(many=True)
    attention_checks = ChecksSerializer()
    excluded = serializers.BooleanField()
    excluded_at = serializers.DateTimeField(allow_null=True)
    exclusion_reason = serializers.CharField(allow_null=True)


class StudyQualitySerializer(serializers.Serializer):
    study = serializers.CharField()
    checks = serializers.DictField(child=serializers.CharField(), help_text="Flag kind: what the check means.")
    flag_counts = serializers.DictField(child=serializers.IntegerField())
    participants = ParticipantQualitySerializer(many=True)


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=QualityDecision.Decision.values)
    reason = serializers.ChoiceField(choices=list(q.EXCLUSION_REASONS), required=False, default="")
    note = serializers.CharField(required=False, default="", allow_blank=True, max_length=4000)


class DecisionRecordSerializer(serializers.ModelSerializer):
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)

    class Meta:
        model = QualityDecision
        fields = ["decision", "reason", "note", "decided_by", "decided_at"]


class QualityStudyView(ResearcherAPIMixin, APIView):
    @extend_schema(
        operation_id="quality_study",
        summary="Quality summary of every participant of a study (most flags first)",
        responses={200: StudyQualitySerializer, **DENIED, **NOT_FOUND},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = get_object_or_404(Study, slug=slug)
        summaries = q.study_quality(study)
        return Response(
            {
                "study": study.slug,
                "checks": {kind: text for kind, (_, text) in q.FLAG_KINDS.items()},
                "flag_counts": q.flag_counts(summaries),
                "participants": [s.as_dict(export_pseudonym(s.participant.pseudonym)) for s in summaries],
            }
        )


class QualityParticipantView(ResearcherAPIMixin, APIView):
    """One participant, named by the pseudonym exports show (as the study summary lists it) or the stored one."""

    def _participant(self, slug: str, pseudonym: str) -> tuple[Study, Participant]:
        study = get_object_or_404(Study, slug=slug)
        participant = find_participant(Participant.objects.filter(study=study), pseudonym)
        if participant is None:
            raise Http404("No such participant in this study.")
        return study, participant

    def _body(self, study: Study, participant: Participant) -> dict[str, Any]:
        data = q.participant_quality(participant, study).as_dict(export_pseudonym(participant.pseudonym))
        data["history"] = DecisionRecordSerializer(q.decision_history(participant), many=True).data
        return data

    @extend_schema(
        operation_id="quality_participant",
        summary="One participant's quality summary with evidence and decision history",
        responses={200: OpenApiTypes.OBJECT, **DENIED, **NOT_FOUND},
    )
    def get(self, request: Request, slug: str, pseudonym: str) -> Response:
        return Response(self._body(*self._participant(slug, pseudonym)))

    @extend_schema(
        operation_id="quality_decide",
        summary="Record an include/exclude decision (reversible; logged with who and when)",
        request=DecisionSerializer,
        responses={
            201: OpenApiTypes.OBJECT,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid decision: errors by field name."),
            **DENIED,
            **NOT_FOUND,
        },
    )
    def post(self, request: Request, slug: str, pseudonym: str) -> Response:
        study, participant = self._participant(slug, pseudonym)
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            q.decide(participant, user=request.user, **body.validated_data)
        except q.QualityError as exc:
            raise ValidationError({"decision": [str(exc)]}) from None
        return Response(self._body(study, participant), status=status.HTTP_201_CREATED)
