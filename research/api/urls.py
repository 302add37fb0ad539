from django.urls import include, path, re_path
from rest_framework.routers import DefaultRouter

from research.api import erasure, monitoring, quality, safety, views

app_name = "api"

router = DefaultRouter()
router.register("conversations", views.ConversationViewSet, basename="conversation")
router.register("models", views.EvaluatedModelViewSet, basename="model")
router.register("dataset-versions", views.DatasetVersionViewSet, basename="dataset-version")
router.register("exports", views.ExportJobViewSet, basename="export")
router.register("runs", views.RunViewSet, basename="run")
router.register("snapshots", views.SnapshotViewSet, basename="snapshot")

urlpatterns = [
    path("schema/", views.SchemaView.as_view(), name="schema"),
    path("docs/", views.DocsView.as_view(), name="docs"),
    path("docs/assets/<path:path>", views.docs_asset, name="docs-asset"),
    path("leaderboard/", views.LeaderboardView.as_view(), name="leaderboard"),
    path("analyses/", views.AnalysesView.as_view(), name="analyses"),
    path("agreement/", views.AgreementView.as_view(), name="agreement"),
    path("token/", views.TokenView.as_view(), name="token"),
    # Quality control
    path("quality/<slug:slug>/", quality.QualityStudyView.as_view(), name="quality-study"),
    path(
        "quality/<slug:slug>/<str:pseudonym>/",
        quality.QualityParticipantView.as_view(),
        name="quality-participant",
    ),
    # Erasure of a participant (DELETE only)
    path("participants/<str:pseudonym>/", erasure.ParticipantErasureView.as_view(), name="participant-erasure"),
    path("", include(router.urls)),
    # Study monitoring
    path("studies/<slug:slug>/monitoring/", monitoring.StudyMonitoringView.as_view(), name="study-monitoring"),
    path("studies/<slug:slug>/safety-events/", safety.SafetyEventsView.as_view(), name="study-safety-events"),
    # Last: any other address ending in "/" is a JSON 404. One without the slash still gets Django's
    # redirect to the slashed form first (so /api/runs reaches /api/runs/), then this JSON 404 if unknown.
    re_path(r"^(?P<path>.*/)$", views.not_found, name="not-found"),
]
