"""Result pages: the evaluation dashboard, figures, drill-downs, call transcripts, snapshots and run downloads.

Views parse and authorise; services do the work.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from datasets.exchange import exportable_conversations
from research.access.checks import researcher_required
from research.models import ResultSnapshot
from research.params import id_param
from research.results import dashboard_page, drilldown, snapshots
from research.results.evaluation import (
    EvaluationData,
    SelectionError,
    capability_columns,
    evaluation_data,
)
from research.results.figures import figure
from research.results.publication import site_archive
from research.results.run_download import run_archive
from scoring import transcripts
from scoring.models import EvaluationRun


def _dataset_filter(request: HttpRequest) -> int | None:
    return id_param(request.GET.get("dataset"))


# ---------------------------------------------------------------------------
# Evaluation dashboard
# ---------------------------------------------------------------------------


@researcher_required
@require_GET
def evaluation_dashboard(request: HttpRequest) -> HttpResponse:
    """The dashboard; its leaderboard and its figures come as HTML cached per comparison and view."""
    data = _evaluation_data(request, _dataset_filter(request))
    if getattr(request, "htmx", False) and request.GET.get("part") == "leaderboard":  # set by django-htmx
        return HttpResponse(dashboard_page.rendered_part(data, request.GET, "leaderboard"))
    context = {
        **dashboard_page.page_context(data, dashboard_page.view_options(request.GET)),
        "leaderboard_html": dashboard_page.rendered_part(data, request.GET, "leaderboard"),
        "analyses_html": dashboard_page.rendered_part(data, request.GET, "analyses"),
    }
    return render(request, "research/evaluation.html", context)


def _evaluation_data(request: HttpRequest, dataset: int | None) -> EvaluationData:
    """The dashboard's data for ?set=…&run=…&dataset=…; a bad choice is said in a message and the default shown."""
    pinned = [int(v) for v in request.GET.getlist("run") if v.isascii() and v.isdigit() and len(v) < 19]
    pool = [v for v in request.GET.getlist("pool") if v.strip()]
    try:
        return evaluation_data(dataset, set_key=request.GET.get("set") or None, pinned=pinned, pool=pool)
    except SelectionError as exc:
        messages.error(request, f"{exc}. Showing the default comparison instead.")
        return evaluation_data(dataset)


@researcher_required
@require_GET
def figure_download(request: HttpRequest, name: str, ext: str) -> HttpResponse:
    if ext not in ("csv", "svg"):
        raise Http404("A figure downloads as .svg or .csv.")
    data = _evaluation_data(request, _dataset_filter(request))
    if data.analysis is None:
        raise Http404("No scored runs yet.")
    try:
        chart = figure(
            name,
            data,
            weighting=request.GET.get("weighting", "spec"),
            metric=request.GET.get("metric", "behaviour_accuracy"),
            topic_metric=request.GET.get("topic_metric", "composite_score"),
        )
    except KeyError:
        raise Http404("No such figure.") from None
    if ext == "csv":
        response = HttpResponse(chart.csv(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="attunebench-{name}.csv"'
        return response
    if not chart.svg:
        raise Http404("This figure is a table; download its CSV.")
    response = HttpResponse(str(chart.svg), content_type="image/svg+xml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="attunebench-{name}.svg"'
    return response


@researcher_required
@require_GET
def run_conversation_drilldown(request: HttpRequest, run_id: int, conversation_id: str) -> HttpResponse:
    run = get_object_or_404(EvaluationRun.objects.select_related("evaluated_model"), pk=run_id)
    conversation = get_object_or_404(
        exportable_conversations().select_related("topic", "original_model"), conversation_id=conversation_id
    )
    context = drilldown.drilldown(run, conversation)
    return render(request, "research/drilldown.html", context)


@researcher_required
@require_GET
def run_conversation_transcript(request: HttpRequest, run_id: int, conversation_id: str) -> HttpResponse:
    """Every model call of one conversation in one run: prompt, raw reply, parsed answer, tokens, latency, cost."""
    run = get_object_or_404(EvaluationRun.objects.select_related("evaluated_model", "judge_model"), pk=run_id)
    conversations = exportable_conversations().select_related("topic")
    conversation = get_object_or_404(conversations, conversation_id=conversation_id)
    transcript = transcripts.run_conversation_transcript(run.pk, conversation.pk)
    for call in transcript["calls"]:
        call["parsed_text"] = json.dumps(call["parsed"], indent=2, ensure_ascii=False) if call["parsed"] else ""
    context = {"run": run, "conversation": conversation, **transcript}
    return render(request, "research/transcript.html", context)


# ---------------------------------------------------------------------------
# Frozen result snapshots
# ---------------------------------------------------------------------------


@researcher_required
def snapshot_list(request: HttpRequest) -> HttpResponse:
    """GET: the snapshots. POST: freeze the comparison the dashboard showed (its set, pinned runs, weighting)."""
    if request.method == "POST":
        weighting = "equal" if request.POST.get("weighting") == "equal" else "spec"
        pinned = [int(v) for v in request.POST.getlist("run") if v.isascii() and v.isdigit() and len(v) < 19]
        try:
            data = evaluation_data(_dataset_filter(request), set_key=request.POST.get("set") or None, pinned=pinned)
            snapshot = snapshots.do_freeze_snapshot(
                request.POST.get("name", ""), request.POST.get("description", ""), data, weighting, request.user
            )
        except (SelectionError, snapshots.SnapshotError) as exc:
            messages.error(request, str(exc))
            return redirect("research:snapshots")
        messages.success(request, f"Froze snapshot {snapshot.pk}: {snapshot.name}.")
        return redirect("research:snapshot", snapshot_id=snapshot.pk)
    listed = ResultSnapshot.objects.select_related("created_by").defer("leaderboard", "table", "analysis")
    return render(request, "research/snapshots.html", {"snapshots": listed[:500]})


@researcher_required
@require_GET
def snapshot_detail(request: HttpRequest, snapshot_id: int) -> HttpResponse:
    snapshot = get_object_or_404(ResultSnapshot.objects.select_related("created_by"), pk=snapshot_id)
    return render(
        request,
        "research/snapshot_detail.html",
        {
            "snapshot": snapshot,
            "rows": snapshot.leaderboard.get("rows", []),
            "apart": snapshot.leaderboard.get("apart", []),
            "pairings": snapshot.leaderboard.get("human_pairings", []),
            "manifest": snapshot.manifest,
            "capability_columns": capability_columns(),
        },
    )


@researcher_required
@require_GET
def snapshot_download(request: HttpRequest, snapshot_id: int, ext: str) -> HttpResponse:
    snapshot = get_object_or_404(ResultSnapshot, pk=snapshot_id)
    filename = f"attunebench-snapshot-{snapshot.pk}"
    if ext == "csv":
        response = HttpResponse(snapshots.snapshot_csv(snapshot), content_type="text/csv; charset=utf-8")
    elif ext == "json":
        response = JsonResponse(snapshots.snapshot_json(snapshot), json_dumps_params={"indent": 2})
    elif ext == "zip":  # the static results site of this snapshot (attune publish results)
        response = HttpResponse(site_archive(snapshot), content_type="application/zip")
        filename += "-site"
    else:
        raise Http404("Snapshots download as .json, .csv or .zip (the static results site).")
    response["Content-Disposition"] = f'attachment; filename="{filename}.{ext}"'
    return response


@researcher_required
@require_GET
def run_download(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's canonical outputs and manifest as a zip (research.results.run_download)."""
    run = get_object_or_404(
        EvaluationRun.objects.select_related("evaluated_model", "judge_model", "dataset_version"), pk=run_id
    )
    response = HttpResponse(run_archive(run), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="attunebench-run-{run.pk}.zip"'
    return response
