"""The research REST API: thin DRF views over the same services as the researcher pages.

Every endpoint requires a researcher (staff) account, by session or token.
Lists are paginated (limit/offset) and filter by query parameters documented
in the schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from django.db.models import Count, QuerySet
from django.http import FileResponse, Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.views.static import serve
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attunebench.catalogue import RESEARCH_ONLY_STATEMENT, TOPIC_CATEGORIES
from attunebench.metrics.results import to_json
from collection.models import Conversation
from datasets.exchange import conversation_to_dict, with_export_relations
from datasets.models import DatasetVersion, ExportJob
from datasets.tasks import do_request_export
from datasets.versions import DatasetError, access_export_file, do_freeze_dataset_version
from research import launcher
from research.access import IsResearcher
from research.evaluation import evaluation_data, leaderboard_rows
from research.serializers import (
    AnalysesSerializer,
    CanonicalConversationSerializer,
    ConversationScoreSerializer,
    ConversationSummarySerializer,
    DatasetVersionCreateSerializer,
    DatasetVersionSerializer,
    ErrorSerializer,
    EstimateSerializer,
    EvaluatedModelSerializer,
    ExportJobSerializer,
    ExportRequestSerializer,
    LeaderboardSerializer,
    RunCreateSerializer,
    RunSerializer,
)
from scoring.models import EvaluatedModel, EvaluationRun

if TYPE_CHECKING:
    from rest_framework.permissions import _PermissionClass  # the stubs' name for what APIView accepts

DENIED = {
    401: OpenApiResponse(ErrorSerializer, description="Not logged in."),
    403: OpenApiResponse(ErrorSerializer, description="Not a researcher."),
}
NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="Not found.")}
INVALID = OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid request: errors by field name.")
CONFLICT = OpenApiResponse(
    ErrorSerializer,
    description="Valid request that the current data cannot honour (name taken, nothing matches, wrong run state).",
)


MAX_ID = 2**63 - 1


def id_param(value: str | None) -> int | None:
    """A query-parameter id: None when absent or malformed, -1 (matches nothing) when beyond any database id."""
    if not value or not value.isdigit():
        return None
    number = int(value)
    return number if number <= MAX_ID else -1


def _param(name: str, description: str, enum: list[str] | None = None, type_: type = str) -> OpenApiParameter:
    return OpenApiParameter(name, type_, OpenApiParameter.QUERY, required=False, description=description, enum=enum)


class ResearcherAPIMixin:
    """Researcher-only, and JSON request bodies only: form encoding cannot express the nulls the bodies use."""

    permission_classes: Sequence[_PermissionClass] = [IsResearcher]
    parser_classes: Sequence[type[BaseParser]] = [JSONParser]


@extend_schema_view(
    list=extend_schema(
        summary="List conversations",
        parameters=[
            _param("status", "Filter by status.", [c for c, _ in Conversation.Status.choices]),
            _param("category", "Filter by topic category.", list(TOPIC_CATEGORIES)),
            _param("original_model", "Filter by original-model alias."),
            _param("dataset_version", "Only conversations in this dataset version.", type_=int),
        ],
        responses={200: ConversationSummarySerializer(many=True), **DENIED},
    ),
    retrieve=extend_schema(
        summary="A conversation in the canonical SPEC 3.1 shape",
        responses={200: CanonicalConversationSerializer, **DENIED, **NOT_FOUND},
    ),
)
class ConversationViewSet(ResearcherAPIMixin, viewsets.ReadOnlyModelViewSet):
    lookup_field = "conversation_id"
    lookup_value_regex = "[^/]+"
    serializer_class = ConversationSummarySerializer

    def get_queryset(self) -> QuerySet[Conversation]:
        queryset = (
            Conversation.objects.select_related("topic", "original_model", "participant")
            .annotate(n_turns=Count("turns"))
            .order_by("conversation_id")
        )
        params = self.request.query_params
        if params.get("status"):
            queryset = queryset.filter(status=params["status"])
        if params.get("category"):
            queryset = queryset.filter(topic__category=params["category"])
        if params.get("original_model"):
            queryset = queryset.filter(original_model__alias=params["original_model"])
        if (version := id_param(params.get("dataset_version"))) is not None:
            queryset = queryset.filter(dataset_versions=version)
        return queryset

    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        conversation = get_object_or_404(
            with_export_relations(Conversation.objects.all()), conversation_id=kwargs["conversation_id"]
        )
        return Response(conversation_to_dict(conversation, include_model_identity=True))


@extend_schema_view(
    list=extend_schema(
        summary="Evaluated-model registry",
        parameters=[_param("kind", "Filter by kind.", [k for k, _ in EvaluatedModel.Kind.choices])],
        responses={200: EvaluatedModelSerializer(many=True), **DENIED},
    ),
    retrieve=extend_schema(
        summary="One evaluated model", responses={200: EvaluatedModelSerializer, **DENIED, **NOT_FOUND}
    ),
)
class EvaluatedModelViewSet(ResearcherAPIMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = EvaluatedModelSerializer

    def get_queryset(self) -> QuerySet[EvaluatedModel]:
        queryset = EvaluatedModel.objects.order_by("name")
        if self.request.query_params.get("kind"):
            queryset = queryset.filter(kind=self.request.query_params["kind"])
        return queryset


@extend_schema_view(
    list=extend_schema(summary="Dataset versions", responses={200: DatasetVersionSerializer(many=True), **DENIED}),
    retrieve=extend_schema(
        summary="One dataset version", responses={200: DatasetVersionSerializer, **DENIED, **NOT_FOUND}
    ),
)
class DatasetVersionViewSet(ResearcherAPIMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = DatasetVersionSerializer
    queryset = DatasetVersion.objects.select_related("created_by").order_by("-created_at", "-pk")

    @extend_schema(
        summary="Freeze a new dataset version",
        request=DatasetVersionCreateSerializer,
        responses={201: DatasetVersionSerializer, 400: INVALID, 409: CONFLICT, **DENIED},
    )
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = DatasetVersionCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        d = payload.validated_data
        try:
            version = do_freeze_dataset_version(d["name"], d["description"], d["topic_categories"], request.user)
        except DatasetError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(DatasetVersionSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Export a dataset version (background job)",
        request=ExportRequestSerializer,
        responses={202: ExportJobSerializer, 400: INVALID, 409: CONFLICT, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["post"], url_path="exports")
    def export(self, request: Request, pk: str | None = None) -> Response:
        version = self.get_object()
        payload = ExportRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            job = do_request_export(
                version, payload.validated_data["fmt"], request.user, payload.validated_data["include_model_identity"]
            )
        except DatasetError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(ExportJobSerializer(job, context={"request": request}).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(
    list=extend_schema(
        summary="Export jobs",
        parameters=[
            _param("status", "Filter by status.", [s for s, _ in ExportJob.Status.choices]),
            _param("dataset_version", "Filter by dataset version id.", type_=int),
        ],
        responses={200: ExportJobSerializer(many=True), **DENIED},
    ),
    retrieve=extend_schema(summary="Export job status", responses={200: ExportJobSerializer, **DENIED, **NOT_FOUND}),
)
class ExportJobViewSet(ResearcherAPIMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ExportJobSerializer

    def get_queryset(self) -> QuerySet[ExportJob]:
        queryset = ExportJob.objects.select_related("dataset_version").order_by("-created_at", "-pk")
        params = self.request.query_params
        if params.get("status"):
            queryset = queryset.filter(status=params["status"])
        if (version := id_param(params.get("dataset_version"))) is not None:
            queryset = queryset.filter(dataset_version_id=version)
        return queryset

    @extend_schema(
        summary="Download a finished export (zip)",
        responses={(200, "application/zip"): OpenApiTypes.BINARY, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["get"], url_path="download", url_name="download")
    def download(self, request: Request, pk: str | None = None, format: str | None = None) -> FileResponse:
        job = self.get_object()
        try:
            path = access_export_file(job)
        except DatasetError as exc:
            raise Http404(str(exc)) from None
        return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type="application/zip")


@extend_schema_view(
    list=extend_schema(
        summary="Evaluation runs",
        parameters=[
            _param("status", "Filter by status.", [s for s, _ in EvaluationRun.Status.choices]),
            _param("model", "Filter by evaluated-model name."),
            _param("mode", "Filter by mode.", ["default", "verbose", "omniscient", "verbose_omniscient"]),
        ],
        responses={200: RunSerializer(many=True), **DENIED},
    ),
    retrieve=extend_schema(summary="Run status and progress", responses={200: RunSerializer, **DENIED, **NOT_FOUND}),
)
class RunViewSet(ResearcherAPIMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[EvaluationRun]:
        queryset = EvaluationRun.objects.select_related("evaluated_model", "judge_model", "score").order_by(
            "-created_at", "-pk"
        )
        params = self.request.query_params
        if params.get("status"):
            queryset = queryset.filter(status=params["status"])
        if params.get("model"):
            queryset = queryset.filter(evaluated_model__name=params["model"])
        if params.get("mode"):
            queryset = queryset.filter(mode=params["mode"])
        return queryset

    @extend_schema(
        summary="Launch runs (one per model and mode), or estimate them with dry_run",
        request=RunCreateSerializer,
        responses={
            201: RunSerializer(many=True),
            200: EstimateSerializer,
            400: INVALID,
            409: CONFLICT,
            **DENIED,
            **NOT_FOUND,
        },
    )
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = RunCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        d = payload.validated_data
        launch = launcher.LaunchRequest(
            models=d["models"],
            modes=d["modes"],
            panas_strategy=d["panas_strategy"],
            judge=d["judge"],
            dataset_version=d["dataset_version"],
            topic_categories=d["topic_categories"],
        )
        try:
            launcher.check_launch(launch)
            if d["dry_run"]:
                return Response(asdict(launcher.estimate(launch)))
            runs = launcher.do_launch_runs(launch, request.user)
        except launcher.LauncherError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(RunSerializer(runs, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Cancel a queued or running run",
        request=None,
        responses={200: RunSerializer, 409: CONFLICT, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return self._relay(launcher.do_cancel_run, self.get_object())

    @extend_schema(
        summary="Resume a cancelled or failed run",
        request=None,
        responses={200: RunSerializer, 409: CONFLICT, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        return self._relay(launcher.do_resume_run, self.get_object())

    def _relay(self, operation: object, run: EvaluationRun) -> Response:
        try:
            run = operation(run)  # type: ignore[operator]
        except launcher.LauncherError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(RunSerializer(run).data)

    @extend_schema(
        summary="Per-conversation scores of a run",
        parameters=[
            OpenApiParameter("limit", int, OpenApiParameter.QUERY, required=False),
            OpenApiParameter("offset", int, OpenApiParameter.QUERY, required=False),
        ],
        responses={200: ConversationScoreSerializer(many=True), **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["get"])
    def scores(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        run = self.get_object()
        queryset = run.conversation_scores.select_related("conversation").order_by("conversation__conversation_id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ConversationScoreSerializer(page, many=True).data)


class LeaderboardView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="Leaderboard per (model, mode) with 95% CIs and capability scores",
        parameters=[
            _param("weighting", "SPEC composite or equal-weight composite.", ["spec", "equal"]),
            _param("dataset_version", "Only runs on this dataset version.", type_=int),
        ],
        responses={200: LeaderboardSerializer, **DENIED},
    )
    def get(self, request: Request) -> Response:
        weighting = "equal" if request.query_params.get("weighting") == "equal" else "spec"
        data = evaluation_data(id_param(request.query_params.get("dataset_version")))
        rows = leaderboard_rows(data, weighting=weighting)
        # The rows are the dashboard's own models, serialised like every result (LeaderboardSerializer documents them).
        return Response(
            {
                "weighting": weighting,
                "research_only_statement": RESEARCH_ONLY_STATEMENT,
                "rows": [to_json(row) for row in rows],
            }
        )


class AnalysesView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="SPEC 6 analyses over the leaderboard runs",
        parameters=[_param("dataset_version", "Only runs on this dataset version.", type_=int)],
        responses={200: AnalysesSerializer, **DENIED},
    )
    def get(self, request: Request) -> Response:
        data = evaluation_data(id_param(request.query_params.get("dataset_version")))
        return Response(
            {
                "research_only_statement": RESEARCH_ONLY_STATEMENT,
                "runs": [r.pk for r in data.runs],
                "analysis": to_json(data.analysis) if data.analysis else None,
            }
        )


# ---------------------------------------------------------------------------
# Schema and offline docs
# ---------------------------------------------------------------------------


class SchemaView(SpectacularAPIView):
    permission_classes = [IsResearcher]


def _sidecar_root() -> Path:
    import drf_spectacular_sidecar

    return Path(drf_spectacular_sidecar.__file__).parent / "static" / "drf_spectacular_sidecar"


class DocsView(SpectacularSwaggerView):
    """Swagger UI from the drf-spectacular-sidecar package, served by this app: no CDN needed."""

    permission_classes = [IsResearcher]
    url_name = "api:schema"

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        from django.urls import reverse

        return reverse("api:docs-asset", args=[f"swagger-ui-dist/{filename}"])

    @staticmethod
    def _swagger_ui_favicon() -> str:
        from django.urls import reverse

        return reverse("api:docs-asset", args=["swagger-ui-dist/favicon-32x32.png"])


def docs_asset(request: HttpRequest, path: str) -> HttpResponseBase:
    """The sidecar's Swagger UI files (public static assets, no data)."""
    return serve(request, path, document_root=str(_sidecar_root()))
