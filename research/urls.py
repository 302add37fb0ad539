from django.contrib.auth import views as auth_views
from django.urls import path

from research.access import views as access_views
from research.exports import views as export_views
from research.raters import views as rater_views
from research.results import views as result_views
from research.runs import registry_views
from research.runs import views as run_views
from research.studies import collection_views, quality_views, safety_views
from research.studies import views as study_views

app_name = "research"
urlpatterns = [
    path("", result_views.evaluation_dashboard, name="home"),
    path("login/", access_views.ResearchLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="research:login"), name="logout"),
    path("figures/<slug:name>.<str:ext>", result_views.figure_download, name="figure"),
    path("collection/", collection_views.collection_dashboard, name="collection"),
    path("conversations/<str:conversation_id>/", collection_views.conversation_viewer, name="conversation"),
    path("runs/", run_views.run_launcher, name="runs"),
    path("runs/estimate/", run_views.run_estimate, name="run_estimate"),
    path("runs/<int:run_id>/", run_views.run_detail, name="run"),
    path("runs/<int:run_id>/progress/", run_views.run_progress, name="run_progress"),
    path("runs/<int:run_id>/download.zip", result_views.run_download, name="run_download"),
    path("runs/<int:run_id>/cancel/", run_views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/resume/", run_views.run_resume, name="run_resume"),
    path("runs/<int:run_id>/requeue/", run_views.run_requeue, name="run_requeue"),
    path("runs/<int:run_id>/retry-failed/", run_views.run_retry_failed, name="run_retry_failed"),
    path(
        "runs/<int:run_id>/conversations/<str:conversation_id>/",
        result_views.run_conversation_drilldown,
        name="drilldown",
    ),
    path(
        "runs/<int:run_id>/conversations/<str:conversation_id>/transcript/",
        result_views.run_conversation_transcript,
        name="transcript",
    ),
    path("datasets/", export_views.dataset_list, name="datasets"),
    path("datasets/<int:version_id>/", export_views.dataset_detail, name="dataset"),
    path("datasets/<int:version_id>/export/", export_views.dataset_export, name="dataset_export"),
    path("exports/<int:job_id>/status/", export_views.export_status, name="export_status"),
    path("exports/<int:job_id>/download/", export_views.export_download, name="export_download"),
    path("snapshots/", result_views.snapshot_list, name="snapshots"),
    path("snapshots/<int:snapshot_id>/", result_views.snapshot_detail, name="snapshot"),
    path("snapshots/<int:snapshot_id>.<str:ext>", result_views.snapshot_download, name="snapshot_download"),
    path("human/", rater_views.human_baseline, name="human"),
    path("models/", registry_views.model_registry, name="models"),
    path("models/<int:model_id>/", registry_views.model_edit, name="model"),
    path("models/<int:model_id>/test/", registry_views.model_test, name="model_test"),
    path("token/", access_views.api_token, name="token"),
    path("rate/", rater_views.rater_home, name="rater_home"),
    path("rate/<int:assignment_id>/", rater_views.rater_step, name="rate"),
    # Study set-up
    path("studies/", study_views.study_list, name="studies"),
    path("studies/new/", study_views.study_create, name="study_create"),
    path("studies/<slug:slug>/", study_views.study_edit, name="study"),
    path("studies/<slug:slug>/status/", study_views.study_status, name="study_status"),
    path("studies/<slug:slug>/pool/", study_views.study_pool, name="study_pool"),
    path("studies/<slug:slug>/quotas/", study_views.study_quotas, name="study_quotas"),
    path("studies/<slug:slug>/preview/", study_views.study_preview, name="study_preview"),
    path("studies/<slug:slug>/safety/", safety_views.study_safety, name="study_safety"),
    # Quality control
    path("quality/<slug:slug>/", quality_views.quality_study, name="quality_study"),
    path("quality/<slug:slug>/<str:pseudonym>/", quality_views.quality_participant, name="quality_participant"),
]
