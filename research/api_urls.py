from django.urls import include, path, re_path
from rest_framework.routers import DefaultRouter

from research import api, monitoring_api, quality_api

app_name = "api"

router = DefaultRouter()
router.register("conversations", api.ConversationViewSet, basename="conversation")
router.register("models", api.EvaluatedModelViewSet, basename="model")
router.register("dataset-versions", api.DatasetVersionViewSet, basename="dataset-version")
router.register("exports", api.ExportJobViewSet, basename="export")
router.register("runs", api.RunViewSet, basename="run")
router.register("snapshots", api.SnapshotViewSet, basename="snapshot")

urlpatterns = [
    path("schema/", api.SchemaView.as_view(), name="schema"),
    path("docs/", api.DocsView.as_view(), name="docs"),
    path("docs/assets/<path:path>", api.docs_asset, name="docs-asset"),
    path("leaderboard/", api.LeaderboardView.as_view(), name="leaderboard"),
    path("analyses/", api.AnalysesView.as_view(), name="analyses"),
    path("agreement/", api.AgreementView.as_view(), name="agreement"),
    path("token/", api.TokenView.as_view(), name="token"),
    # Quality control (issue 18, item 2)
    path("quality/<slug:slug>/", quality_api.QualityStudyView.as_view(), name="quality-study"),
    path(
        "quality/<slug:slug>/<str:pseudonym>/",
        quality_api.QualityParticipantView.as_view(),
        name="quality-participant",
    ),
    path("", include(router.urls)),
    # Study monitoring (issue 18, item 5)
    path("studies/<slug:slug>/monitoring/", monitoring_api.StudyMonitoringView.as_view(), name="study-monitoring"),
    # Last: any other address ending in "/" is a JSON 404. One without the slash still gets Django's
    # redirect to the slashed form first (so /api/runs reaches /api/runs/), then this JSON 404 if unknown.
    re_path(r"^(?P<path>.*/)$", api.not_found, name="not-found"),
]
