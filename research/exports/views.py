"""Dataset versions and their exports. Views parse and authorise; services do the work."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from datasets.models import DatasetVersion, ExportJob
from datasets.tasks import do_request_export
from datasets.versions import (
    DatasetError,
    access_export_file,
    build_datasheet,
    do_freeze_dataset_version,
    version_summary,
)
from research.access.checks import researcher_required
from research.exports.downloads import export_file_response
from research.exports.forms import DatasetVersionForm, ExportForm

# ---------------------------------------------------------------------------
# Dataset versions and exports
# ---------------------------------------------------------------------------


@researcher_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    form = DatasetVersionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            version = do_freeze_dataset_version(
                d["name"], d["description"], list(d["topic_categories"]), request.user, d["include_unfinished"]
            )
        except DatasetError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Froze {version.name}: {version.conversation_count} conversations.")
            return redirect("research:dataset", version_id=version.pk)
    versions = (
        DatasetVersion.objects.select_related("created_by")
        .annotate(n_exports=Count("export_jobs"))
        .order_by("-created_at")
    )
    return render(request, "research/datasets.html", {"form": form, "versions": versions})


@researcher_required
@require_GET
def dataset_detail(request: HttpRequest, version_id: int) -> HttpResponse:
    version = get_object_or_404(DatasetVersion.objects.select_related("created_by"), pk=version_id)
    return render(
        request,
        "research/dataset_detail.html",
        {
            "version": version,
            "datasheet": build_datasheet(version, "preview", True).data,
            "summary": version_summary(version),
            "export_form": ExportForm(),
            "jobs": version.export_jobs.select_related("created_by").order_by("-created_at"),
        },
    )


@researcher_required
@require_POST
def dataset_export(request: HttpRequest, version_id: int) -> HttpResponse:
    version = get_object_or_404(DatasetVersion, pk=version_id)
    form = ExportForm(request.POST)
    if form.is_valid():
        try:
            do_request_export(
                version, form.cleaned_data["fmt"], request.user, form.cleaned_data["include_model_identity"]
            )
            messages.success(request, "Export started; the download link appears here when it is ready.")
        except DatasetError as exc:
            messages.error(request, str(exc))
    else:
        messages.error(request, "Choose an export format.")
    return redirect("research:dataset", version_id=version.pk)


@researcher_required
@require_GET
def export_status(request: HttpRequest, job_id: int) -> HttpResponse:
    job = get_object_or_404(ExportJob.objects.select_related("dataset_version"), pk=job_id)
    return render(request, "research/_export_job.html", {"job": job})


@researcher_required
@require_GET
def export_download(request: HttpRequest, job_id: int) -> HttpResponseBase:
    job = get_object_or_404(ExportJob.objects.select_related("dataset_version"), pk=job_id)
    try:
        download = access_export_file(job)
    except DatasetError as exc:
        raise Http404(str(exc)) from None
    return export_file_response(download)
