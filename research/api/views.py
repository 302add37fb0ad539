"""The research REST API: thin DRF views over the same services as the researcher pages.

Every endpoint requires a researcher (staff) account, by token or session:
no credentials is 401 (with a ``WWW-Authenticate: Token`` challenge), a
signed-in account without researcher rights is 403. Lists are paginated
(limit/offset, at most 500 rows a page) and filter by query parameters documented in the schema; a
filter value outside its documented choices is a 400 naming the parameter and
the choices, never an empty page. Every error under /api/ is JSON.

A researcher gets a token for scripts on the research pages (/research/token/:
create with the days it works, shown once; see its date, expiry and lookup
prefix; revoke) or from ``POST /api/token/`` (posting again rotates it,
``DELETE /api/token/`` revokes it). Only a digest of each key is stored
(``research.access.api_tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from django.contrib.auth.models import User
from django.db.models import Count, QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.views.static import serve
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.decorators import action
from rest_framework.exceptions import NotAuthenticated, NotFound, ValidationError
from rest_framework.parsers import BaseParser, FormParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import research.api.schema  # noqa: F401  (its extensions register on import: before any schema is built)
from attunebench.catalogue import (
    CONVERSATION_COMPLETE,
    CONVERSATION_COMPLETENESS,
    MODES,
    RESEARCH_ONLY_STATEMENT,
    TOPIC_CATEGORIES,
)
from attunebench.metrics.agreement import RaterAgreement
from attunebench.metrics.comparison import DEFAULT_SEED, MIN_CONVERSATIONS_FOR_CI
from attunebench.metrics.results import to_json
from collection.models import Conversation
from datasets.exchange import (
    conversation_to_dict,
    exportable_conversations,
    usable_conversations,
    with_export_relations,
    withdrawn_conversations,
)
from datasets.models import DatasetVersion, ExportJob
from datasets.tasks import do_request_export
from datasets.versions import DatasetError, access_export_file, do_freeze_dataset_version
from research.access.api_tokens import DigestTokenAuthentication, do_issue_token, do_revoke_token
from research.access.checks import IsResearcher
from research.api.parsers import DepthLimitedJSONParser
from research.api.responses import Analyses, ComparisonSet, Leaderboard
from research.api.serializers import (
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
    RequeueSerializer,
    RunConversationStateSerializer,
    RunCreateSerializer,
    RunLaunchSerializer,
    RunSerializer,
    SnapshotCreateSerializer,
    SnapshotSerializer,
    SnapshotSummarySerializer,
    TokenRequestSerializer,
    TokenSerializer,
    TranscriptSerializer,
)
from research.exports.downloads import export_file_response
from research.models import ResultSnapshot
from research.params import id_param
from research.raters.human_baseline import rater_agreement
from research.results.evaluation import (
    N_BOOTSTRAP,
    EvaluationData,
    PoolError,
    SelectionError,
    apart_rows,
    evaluation_data,
    leaderboard_rows,
)
from research.results.run_download import run_archive
from research.results.snapshots import SnapshotError, do_freeze_snapshot
from research.runs import launcher
from scoring import transcripts
from scoring.models import EvaluatedModel, EvaluationRun, RunConversation
from scoring.replay_service import conversation_states

if TYPE_CHECKING:
    from rest_framework.permissions import _PermissionClass  # the stubs' name for what APIView accepts

DENIED = {
    401: OpenApiResponse(ErrorSerializer, description="Not logged in."),
    403: OpenApiResponse(ErrorSerializer, description="Not a researcher."),
}
NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="Not found.")}
INVALID = OpenApiResponse(OpenApiTypes.OBJECT, description="Invalid request: errors by field name.")
BAD_FILTER = {
    400: OpenApiResponse(
        OpenApiTypes.OBJECT, description="A query parameter outside its choices or not a whole number: errors by name."
    )
}
CONFLICT = OpenApiResponse(
    ErrorSerializer,
    description="Valid request that the current data cannot honour (name taken, nothing matches, wrong run state).",
)


CONVERSATION_STATUSES = [c for c, _ in Conversation.Status.choices]
COMPLETENESS_STATES = list(CONVERSATION_COMPLETENESS)
MODEL_KINDS = [k for k, _ in EvaluatedModel.Kind.choices]
EXPORT_STATUSES = [s for s, _ in ExportJob.Status.choices]
RUN_STATUSES = [s for s, _ in EvaluationRun.Status.choices]
RUN_ORIGINS = [o for o, _ in EvaluationRun.Origin.choices if o]
WEIGHTINGS = ("spec", "equal")


def int_filter(request: Request, name: str) -> int | None:
    """An id filter: None when absent; 400 naming the parameter when it is not an integer.

    Integers that no database id can have (negative, or beyond 64 bits) are valid and match nothing.
    """
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    digits = value.removeprefix("-")
    if not digits.isascii() or not digits.isdigit():
        raise ValidationError({name: [f"must be a whole number, not {value!r}."]})
    return -1 if value.startswith("-") else id_param(digits)


def choice_filter(request: Request, name: str, choices: Sequence[str]) -> str | None:
    """An enum filter: None when absent; 400 naming the parameter and the allowed values when unknown."""
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    if value not in choices:
        raise ValidationError({name: [f"{value!r} is not one of: {', '.join(choices)}."]})
    return value


def identity_param(request: Request) -> bool:
    """``include_model_identity``: false (aliases) unless given as true; 400 naming it when not a boolean."""
    value = request.query_params.get("include_model_identity")
    if value in (None, ""):
        return False
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValidationError({"include_model_identity": [f"must be true or false, not {value!r}."]})


def _param(name: str, description: str, enum: list[str] | None = None, type_: type = str) -> OpenApiParameter:
    return OpenApiParameter(name, type_, OpenApiParameter.QUERY, required=False, description=description, enum=enum)


IDENTITY_PARAM = OpenApiParameter(
    "include_model_identity",
    bool,
    OpenApiParameter.QUERY,
    required=False,
    description="Show original models' real names; by default their aliases, as in the UI and `attune export`.",
)
WITHDRAWN_DETAIL = "The participant withdrew from the study; their conversation is no longer available."
GONE = {410: OpenApiResponse(ErrorSerializer, description="The participant withdrew.")}


# Token first: DRF answers a request without credentials with 401 and the first class's challenge
# (``WWW-Authenticate: Token``); session authentication has no challenge, so first it would make that a 403.
AUTHENTICATION: Sequence[type[BaseAuthentication]] = [DigestTokenAuthentication, SessionAuthentication]


class ResearcherAPIMixin:
    """Researcher-only, and JSON request bodies only: form encoding cannot express the nulls the bodies use."""

    authentication_classes: Sequence[type[BaseAuthentication]] = AUTHENTICATION
    permission_classes: Sequence[_PermissionClass] = [IsResearcher]
    parser_classes: Sequence[type[BaseParser]] = [DepthLimitedJSONParser]


@extend_schema_view(
    list=extend_schema(
        summary="List conversations",
        parameters=[
            _param("status", "Filter by status.", CONVERSATION_STATUSES),
            _param(
                "completeness",
                "Filter by completeness; without it only complete conversations are listed (with `dataset_version`: "
                "every conversation the version holds).",
                COMPLETENESS_STATES,
            ),
            _param(
                "include_unfinished",
                "true: list unfinished and empty conversations too. With `dataset_version` the default is what the "
                "version holds (unfinished ones too if it was frozen with them); false keeps the complete ones.",
                ["true", "false"],
            ),
            _param("category", "Filter by topic category.", list(TOPIC_CATEGORIES)),
            _param("original_model", "Filter by original-model alias."),
            _param("dataset_version", "Only conversations in this dataset version.", type_=int),
            _param(
                "include_excluded",
                "true: list conversations of participants a researcher excluded for quality too (each says so in "
                "`quality_excluded`); by default they are left out, as in exports, new dataset versions and "
                "scores. With `dataset_version` the list is that frozen version's, exclusions made since included, "
                "as its export holds it.",
                ["true", "false"],
            ),
            IDENTITY_PARAM,
        ],
        responses={200: ConversationSummarySerializer(many=True), **BAD_FILTER, **DENIED},
    ),
    retrieve=extend_schema(
        summary="A conversation in the canonical SPEC 3.1 shape, exactly as exports write it",
        parameters=[IDENTITY_PARAM],
        responses={200: CanonicalConversationSerializer, **DENIED, **NOT_FOUND, **GONE},
    ),
)
class ConversationViewSet(ResearcherAPIMixin, viewsets.ReadOnlyModelViewSet):
    """Conversations as exports show them: withdrawn ones are gone, participants are pseudonyms, and
    original models are aliases unless ``include_model_identity=true`` (as in the UI and ``attune export``).

    The list leaves out quality-excluded participants' conversations, like exports and scores, so a script
    counts what an export would hold; ``include_excluded=true`` adds them, flagged ``quality_excluded``, to
    review them. One such conversation stays readable by its id (the exclusion is reversible). A frozen
    dataset version lists what it holds, as its export does: an exclusion made later does not change it, and
    the complete-only default does not apply (a version frozen with unfinished conversations lists them).
    """

    lookup_field = "conversation_id"
    lookup_value_regex = "[^/]+"
    serializer_class = ConversationSummarySerializer

    def get_serializer_context(self) -> dict[str, object]:
        return {**super().get_serializer_context(), "include_model_identity": identity_param(self.request)}

    def get_queryset(self) -> QuerySet[Conversation]:
        excluded_too = choice_filter(self.request, "include_excluded", ["true", "false"]) == "true"
        version = int_filter(self.request, "dataset_version")
        # A frozen version keeps what it holds, exclusions since included, as its export does.
        queryset = (
            (exportable_conversations() if excluded_too or version is not None else usable_conversations())
            .select_related("topic", "original_model", "participant")
            .annotate(n_turns=Count("turns"))
            .order_by("conversation_id")
        )
        params = self.request.query_params
        # Like exports, the list holds complete conversations unless asked for more (records say which they are).
        # A frozen version already chose: frozen with unfinished ones, it lists them, as its export holds them.
        completeness = choice_filter(self.request, "completeness", COMPLETENESS_STATES)
        unfinished_too = choice_filter(self.request, "include_unfinished", ["true", "false"])
        if completeness:
            queryset = queryset.filter(completeness=completeness)
        elif unfinished_too == "false" or (unfinished_too is None and version is None):
            queryset = queryset.filter(completeness=CONVERSATION_COMPLETE)
        if status_ := choice_filter(self.request, "status", CONVERSATION_STATUSES):
            queryset = queryset.filter(status=status_)
        if category := choice_filter(self.request, "category", TOPIC_CATEGORIES):
            queryset = queryset.filter(topic__category=category)
        if params.get("original_model"):
            queryset = queryset.filter(original_model__alias=params["original_model"])
        if version is not None:
            queryset = queryset.filter(dataset_versions=version)
        return queryset

    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        include_identity = identity_param(request)
        conversation = get_object_or_404(
            with_export_relations(Conversation.objects.all()), conversation_id=kwargs["conversation_id"]
        )
        participant = conversation.participant
        if conversation.status == Conversation.Status.WITHDRAWN or (participant and participant.is_withdrawn):
            return Response({"detail": WITHDRAWN_DETAIL}, status=status.HTTP_410_GONE)
        return Response(conversation_to_dict(conversation, include_model_identity=include_identity))


@extend_schema_view(
    list=extend_schema(
        summary="Evaluated-model registry",
        parameters=[_param("kind", "Filter by kind.", MODEL_KINDS)],
        responses={200: EvaluatedModelSerializer(many=True), **BAD_FILTER, **DENIED},
    ),
    retrieve=extend_schema(
        summary="One evaluated model", responses={200: EvaluatedModelSerializer, **DENIED, **NOT_FOUND}
    ),
)
class EvaluatedModelViewSet(ResearcherAPIMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = EvaluatedModelSerializer

    def get_queryset(self) -> QuerySet[EvaluatedModel]:
        queryset = EvaluatedModel.objects.order_by("name")
        if kind := choice_filter(self.request, "kind", MODEL_KINDS):
            queryset = queryset.filter(kind=kind)
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
            version = do_freeze_dataset_version(
                d["name"], d["description"], d["topic_categories"], request.user, d["include_unfinished"]
            )
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
            _param("status", "Filter by status.", EXPORT_STATUSES),
            _param("dataset_version", "Filter by dataset version id.", type_=int),
        ],
        responses={200: ExportJobSerializer(many=True), **BAD_FILTER, **DENIED},
    ),
    retrieve=extend_schema(summary="Export job status", responses={200: ExportJobSerializer, **DENIED, **NOT_FOUND}),
)
class ExportJobViewSet(ResearcherAPIMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ExportJobSerializer

    def get_queryset(self) -> QuerySet[ExportJob]:
        queryset = ExportJob.objects.select_related("dataset_version").order_by("-created_at", "-pk")
        if status_ := choice_filter(self.request, "status", EXPORT_STATUSES):
            queryset = queryset.filter(status=status_)
        if (version := int_filter(self.request, "dataset_version")) is not None:
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
            download = access_export_file(job)
        except DatasetError as exc:
            raise Http404(str(exc)) from None
        return export_file_response(download)


@extend_schema_view(
    list=extend_schema(
        summary="Evaluation runs",
        parameters=[
            _param("status", "Filter by status.", RUN_STATUSES),
            _param("model", "Filter by evaluated-model name."),
            _param("mode", "Filter by mode.", list(MODES)),
            _param("origin", "Filter by where runs were started (launcher, api, cli).", RUN_ORIGINS),
        ],
        responses={200: RunSerializer(many=True), **BAD_FILTER, **DENIED},
    ),
    retrieve=extend_schema(summary="Run status and progress", responses={200: RunSerializer, **DENIED, **NOT_FOUND}),
)
class RunViewSet(ResearcherAPIMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = RunSerializer

    def get_queryset(self) -> QuerySet[EvaluationRun]:
        queryset = EvaluationRun.objects.select_related("evaluated_model", "judge_model", "score").order_by(
            "-created_at", "-pk"
        )
        if status_ := choice_filter(self.request, "status", RUN_STATUSES):
            queryset = queryset.filter(status=status_)
        if model := self.request.query_params.get("model"):
            queryset = queryset.filter(evaluated_model__name=model)
        if mode := choice_filter(self.request, "mode", MODES):
            queryset = queryset.filter(mode=mode)
        if origin := choice_filter(self.request, "origin", RUN_ORIGINS):
            queryset = queryset.filter(origin=origin)
        return queryset

    @extend_schema(
        summary="Launch runs (one per model and mode), or estimate them with dry_run",
        request=RunCreateSerializer,
        responses={
            201: RunLaunchSerializer,
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
            fresh_calls=d["fresh_calls"],
            repeat=d["repeat"],
        )
        try:
            launcher.check_launch(launch)
            if d["dry_run"]:
                return Response(asdict(launcher.estimate(launch)))
            if d["preflight"]:
                launcher.check_preflight(launch)
            runs = launcher.do_launch_runs(launch, request.user, origin=EvaluationRun.Origin.API)
        except launcher.LauncherError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({"runs": RunSerializer(runs, many=True).data}, status=status.HTTP_201_CREATED)

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

    @extend_schema(
        summary="Retry a finished run's failed turns: replay only them (answered calls from the cache), re-score",
        request=None,
        responses={200: RunSerializer, 409: CONFLICT, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["post"], url_path="retry-failed", url_name="retry_failed")
    def retry_failed(self, request: Request, pk: str | None = None) -> Response:
        return self._relay(launcher.do_retry_failed, self.get_object())

    @extend_schema(
        summary="Requeue a run's stalled conversations (their worker stopped renewing its lease)",
        request=None,
        responses={200: RequeueSerializer, 409: CONFLICT, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        try:
            requeued = launcher.do_requeue_stalled(run)
        except launcher.LauncherError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        ids = list(
            RunConversation.objects.filter(pk__in=requeued)
            .order_by("conversation__conversation_id")
            .values_list("conversation__conversation_id", flat=True)
        )
        return Response({"requeued": ids, "run": RunSerializer(run).data})

    @extend_schema(
        summary="Where each conversation of a run stands: status, lease, stalled, attempts, failure reason",
        parameters=[
            OpenApiParameter("limit", int, OpenApiParameter.QUERY, required=False),
            OpenApiParameter("offset", int, OpenApiParameter.QUERY, required=False),
        ],
        responses={200: RunConversationStateSerializer(many=True), **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["get"])
    def conversations(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        run = self.get_object()
        page = self.paginate_queryset(conversation_states(run.pk))
        return self.get_paginated_response(RunConversationStateSerializer(page, many=True).data)

    def _relay(self, operation: object, run: EvaluationRun) -> Response:
        try:
            run = operation(run)  # type: ignore[operator]
        except launcher.LauncherError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(RunSerializer(run).data)

    @extend_schema(
        summary="Download the run's canonical outputs and manifest (zip)",
        responses={(200, "application/zip"): OpenApiTypes.BINARY, **DENIED, **NOT_FOUND},
    )
    @action(detail=True, methods=["get"], url_path="download", url_name="download")
    def download(self, request: Request, pk: str | None = None, format: str | None = None) -> HttpResponse:
        run = self.get_object()
        response = HttpResponse(run_archive(run), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="attunebench-run-{run.pk}.zip"'
        return response

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
        queryset = (
            run.conversation_scores.exclude(conversation__in=withdrawn_conversations())
            .select_related("conversation")
            .order_by("conversation__conversation_id")
        )
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ConversationScoreSerializer(page, many=True).data)

    @extend_schema(
        summary="Every model call of one conversation in this run: prompt, raw reply, parsed answer, cost",
        responses={200: TranscriptSerializer, **DENIED, **NOT_FOUND},
    )
    @action(
        detail=True,
        methods=["get"],
        url_path=r"conversations/(?P<conversation_id>[^/]+)/transcript",
        url_name="transcript",
    )
    def transcript(
        self, request: Request, pk: str | None = None, conversation_id: str = "", format: str | None = None
    ) -> Response:
        run = self.get_object()
        conversation = exportable_conversations().filter(conversation_id=conversation_id).first()
        if conversation is None:
            raise NotFound("No such conversation, or its participant withdrew.")
        data = {
            "run": run.pk,
            "conversation_id": conversation.conversation_id,
            **transcripts.run_conversation_transcript(run.pk, conversation.pk),
        }
        return Response(TranscriptSerializer(data).data)


POOL_PARAMETER = OpenApiParameter(
    "pool",
    str,
    OpenApiParameter.QUERY,
    required=False,
    many=True,
    description="A compared row (`model [mode]`) or model whose scores the breakdowns' pooled lines average; "
    "repeat for several. By default every model row, the offline baselines apart. An unknown name is a 400.",
)
SET_PARAMETERS = [
    _param("dataset_version", "Only runs on this dataset version (its selection with most rows).", type_=int),
    _param(
        "set",
        "Comparison set key, as listed in `sets` (e.g. `v3`, `v3:Work`, `live`); overrides dataset_version. "
        "A set with no scored runs is a 404.",
    ),
    OpenApiParameter(
        "runs",
        str,
        OpenApiParameter.QUERY,
        required=False,
        pattern=r"^[0-9]{1,18}(,[0-9]{1,18})*$",
        description="Comma-separated run ids to pin, replacing the default run of their (model, mode). "
        "A run without scores is a 404.",
    ),
]


def _evaluation(request: Request) -> EvaluationData:
    """The chosen comparison; a bad set or run id is a 400 naming the parameter."""
    pinned: list[int] = []
    for part in (request.query_params.get("runs") or "").split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isascii() or not part.isdigit() or len(part) > 18:
            raise ValidationError({"runs": [f"must be comma-separated run ids, not {part!r}."]})
        pinned.append(int(part))
    pool = [name for name in request.query_params.getlist("pool") if name.strip()]
    try:
        return evaluation_data(
            int_filter(request, "dataset_version"),
            set_key=request.query_params.get("set") or None,
            pinned=pinned,
            pool=pool,
            model_identity=identity_param(request),
        )
    except PoolError as exc:
        raise ValidationError({"pool": [str(exc)]}) from None
    except SelectionError as exc:
        raise NotFound(str(exc)) from None


class LeaderboardView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="Leaderboard of the rows compared on one conversation set, with skill, 95% CIs and rows apart",
        parameters=[
            _param("weighting", "SPEC composite or equal-weight composite.", list(WEIGHTINGS)),
            *SET_PARAMETERS,
        ],
        responses={200: Leaderboard, **BAD_FILTER, **DENIED, **NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        weighting: Literal["spec", "equal"] = (
            "equal" if choice_filter(request, "weighting", WEIGHTINGS) == "equal" else "spec"
        )
        data = _evaluation(request)
        # Only the comparison's small cached summary is read here, never the analyses' larger entry.
        comparability = data.comparability
        # The rows are the dashboard's own models; the response is a model too, so the schema is built from it.
        board = Leaderboard(
            weighting=weighting,
            research_only_statement=RESEARCH_ONLY_STATEMENT,
            conversation_set=data.current_set.key if data.current_set else None,
            conversation_set_label=data.current_set.label if data.current_set else None,
            compared_set=comparability.compared_set if comparability else None,
            n_compared_conversations=comparability.n_compared_conversations if comparability else 0,
            min_conversations_for_ci=MIN_CONVERSATIONS_FOR_CI,
            n_bootstrap=data.n_resamples if data.has_analysis and data.n_resamples is not None else N_BOOTSTRAP,
            seed=data.seed if data.has_analysis and data.seed is not None else DEFAULT_SEED,
            prior_baseline=data.prior_baseline,
            sets=[ComparisonSet(key=s.key, label=s.label, n_rows=s.n_rows) for s in data.sets],
            rows=leaderboard_rows(data, weighting=weighting),
            apart=apart_rows(data, weighting=weighting),
            apart_reasons=comparability.apart if comparability else [],
            human_pairings=comparability.human_pairings if comparability else [],
        )
        return Response(to_json(board))


class AnalysesView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="SPEC 6 analyses over the rows compared on one conversation set",
        parameters=[*SET_PARAMETERS, POOL_PARAMETER, IDENTITY_PARAM],
        responses={200: Analyses, **BAD_FILTER, **DENIED, **NOT_FOUND},
    )
    def get(self, request: Request) -> Response:
        data = _evaluation(request)
        analyses = Analyses(
            research_only_statement=RESEARCH_ONLY_STATEMENT, runs=[r.pk for r in data.runs], analysis=data.analysis
        )
        return Response(to_json(analyses))


@extend_schema_view(
    list=extend_schema(
        summary="Frozen result snapshots", responses={200: SnapshotSummarySerializer(many=True), **DENIED}
    ),
    retrieve=extend_schema(
        summary="One frozen snapshot: manifest, leaderboard and analyses",
        responses={200: SnapshotSerializer, **DENIED, **NOT_FOUND},
    ),
)
class SnapshotViewSet(ResearcherAPIMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Snapshots are created once and never changed: no update or delete."""

    queryset = ResultSnapshot.objects.select_related("created_by").order_by("-created_at", "-pk")

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return SnapshotSummarySerializer if self.action == "list" else SnapshotSerializer

    def get_queryset(self) -> QuerySet[ResultSnapshot]:
        if self.action == "list":
            return self.queryset.defer("leaderboard", "table", "analysis", "manifest")
        return self.queryset

    @extend_schema(
        summary="Freeze the current comparison (set, pinned runs, weighting) as a named snapshot",
        request=SnapshotCreateSerializer,
        responses={201: SnapshotSerializer, 400: INVALID, 409: CONFLICT, **DENIED, **NOT_FOUND},
    )
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = SnapshotCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        d = payload.validated_data
        try:
            data = evaluation_data(set_key=d["set"] or None, pinned=d["runs"])
        except SelectionError as exc:
            raise NotFound(str(exc)) from None
        try:
            snapshot = do_freeze_snapshot(d["name"], d["description"], data, d["weighting"], request.user)
        except SnapshotError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(SnapshotSerializer(snapshot).data, status=status.HTTP_201_CREATED)


class AgreementView(ResearcherAPIMixin, APIView):
    @extend_schema(
        summary="Agreement between human-baseline raters (Krippendorff's alpha with bootstrap CIs)",
        responses={200: RaterAgreement, **DENIED},
    )
    def get(self, request: Request) -> Response:
        return Response(to_json(rater_agreement()))


def _account(request: Request) -> User:
    """The researcher the permission check let through."""
    if not isinstance(request.user, User):
        raise NotAuthenticated()
    return request.user


class TokenView(ResearcherAPIMixin, APIView):
    """The signed-in researcher's own API token, so scripts need no password and no server command.

    Sign in on the research pages, open the API docs (/api/docs/) and call POST /api/token/ there (the
    page sends the session and CSRF token), or call it with an existing token to rotate it.
    """

    # The only field is optional: a bare POST (no body, or an empty form) takes the default lifetime.
    parser_classes: Sequence[type[BaseParser]] = [DepthLimitedJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        summary="Issue a new API token for yourself, expiring after the days you choose (any previous one stops "
        "working); the key is in this answer only",
        request=TokenRequestSerializer,
        responses={201: TokenSerializer, 400: INVALID, **DENIED},
    )
    def post(self, request: Request) -> Response:
        user = _account(request)
        payload = TokenRequestSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        token = do_issue_token(user, payload.validated_data["expires_in_days"])
        body = {"token": token.key, "username": user.get_username(), "created": token.created, "expiry": token.expiry}
        return Response(TokenSerializer(body).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Revoke your API token", request=None, responses={204: None, **DENIED})
    def delete(self, request: Request) -> Response:
        do_revoke_token(_account(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------------------
# Schema and offline docs
# ---------------------------------------------------------------------------


class JSONErrorsMixin(APIView):
    """Errors as JSON even from views whose renderers are YAML or HTML (the schema and the docs page)."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response


class SchemaView(JSONErrorsMixin, SpectacularAPIView):
    authentication_classes = AUTHENTICATION
    permission_classes = [IsResearcher]


def _sidecar_root() -> Path:
    import drf_spectacular_sidecar

    return Path(drf_spectacular_sidecar.__file__).parent / "static" / "drf_spectacular_sidecar"


class DocsView(JSONErrorsMixin, SpectacularSwaggerSplitView):
    """Swagger UI from the drf-spectacular-sidecar package, served by this app: no CDN needed.

    The split view serves its start-up script from this address (``?script``) instead of inline,
    so the page passes the Content-Security-Policy without 'unsafe-inline' for scripts.
    """

    authentication_classes = AUTHENTICATION
    permission_classes = [IsResearcher]
    url_name = "api:schema"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # A person opening the docs without signing in (no session, no token) is sent to the login page and
        # back, rather than shown a bare JSON 401 meant for scripts.
        if not request.user.is_authenticated and "HTTP_AUTHORIZATION" not in request.META:
            from django.contrib.auth.views import redirect_to_login

            return redirect_to_login(request.get_full_path())
        return super().dispatch(request, *args, **kwargs)

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
    try:
        return serve(request, path, document_root=str(_sidecar_root()))
    except Http404:
        return not_found(request)


def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any other address under /api/: a JSON 404 like the API's own, not the site's HTML page."""
    return JsonResponse({"detail": f"No API endpoint at {request.path}."}, status=404)
