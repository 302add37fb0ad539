"""Researcher pages and the human-baseline rater screens. Views parse and authorise, services do the work."""

from __future__ import annotations

import json

from django.contrib import messages
from django.db.models import Count
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from attunebench import catalogue as cat
from attunebench.metrics.comparison import MIN_CONVERSATIONS_FOR_CI
from collection.models import Conversation
from datasets.exchange import exportable_conversations, withdrawn_conversations
from datasets.models import DatasetVersion, ExportJob
from datasets.tasks import do_request_export
from datasets.versions import (
    DatasetError,
    access_export_file,
    build_datasheet,
    do_freeze_dataset_version,
    version_summary,
)
from research import collection_stats, drilldown, launcher, monitoring, snapshots
from research.access import login_required_403, researcher_required, signed_in_user
from research.charts import model_colours
from research.evaluation import (
    RUN_CHOICE_TEXT,
    SORT_KEYS,
    EvaluationData,
    SelectionError,
    apart_rows,
    capability_columns,
    evaluation_data,
    leaderboard_rows,
)
from research.figures import TURN_METRIC_TITLES, figure
from research.forms import AnalysisForm, AssignForm, DatasetVersionForm, DraftForm, ExportForm, LaunchForm, PostForm
from research.human_baseline import (
    HumanBaselineError,
    access_assignment,
    current_step,
    do_assign,
    do_record_analysis,
    do_record_draft,
    do_record_post,
    rater_agreement,
)
from research.models import HumanAssignment, ResultSnapshot
from research.run_download import run_archive
from scoring import transcripts
from scoring.models import EvaluationRun, RunConversation
from scoring.replay_service import ACTIVE_STATUSES as ACTIVE_RUN_STATUSES
from scoring.replay_service import run_limits, stalled_conversations


def _dataset_filter(request: HttpRequest) -> int | None:
    from research.api import id_param

    return id_param(request.GET.get("dataset"))


# ---------------------------------------------------------------------------
# Evaluation dashboard
# ---------------------------------------------------------------------------


@researcher_required
@require_GET
def evaluation_dashboard(request: HttpRequest) -> HttpResponse:
    weighting = "equal" if request.GET.get("weighting") == "equal" else "spec"
    sort = request.GET.get("sort", "composite")
    descending = request.GET.get("dir", "desc") != "asc"
    metric = request.GET.get("metric", "behaviour_accuracy")
    dataset = _dataset_filter(request)
    data = _evaluation_data(request, dataset)
    rows = leaderboard_rows(data, weighting=weighting, sort=sort, descending=descending)
    figures = {}
    if data.analysis:
        figures = {
            name: figure(name, data, weighting=weighting, metric=metric)
            for name in (
                "leaderboard",
                "capability_profile",
                "independence",
                "discrimination",
                "by_topic",
                "by_group",
                "turn_position",
                "comparison_matrix",
            )
        }
    keep = QueryDict(mutable=True)
    for name in ("set", "dataset", "run"):
        if values := [v for v in request.GET.getlist(name) if v]:
            keep.setlist(name, values)
    context = {
        "data": data,
        "rows": rows,
        "weighting": weighting,
        "sort": sort if sort in SORT_KEYS else "composite",
        "descending": descending,
        "capability_columns": capability_columns(),
        "apart": apart_rows(data, weighting=weighting),
        "apart_info": {a.label: a for a in data.analysis.comparability.apart}
        if data.analysis and data.analysis.comparability
        else {},
        "colours": model_colours(r.em_model for r in data.report.conversations),
        "keep": keep.urlencode(),
        "run_choice_text": RUN_CHOICE_TEXT,
        "min_n": MIN_CONVERSATIONS_FOR_CI,
        "pinned": request.GET.getlist("run"),
        "sort_columns": [
            ("label", "Model"),
            ("skill", "Skill"),
            ("composite", "Composite" if weighting == "spec" else "Equal-weight"),
            *capability_columns(),
            ("n", "Conv."),
            ("coverage", "Coverage"),
            ("post_coverage", "Post cov."),
            ("cost", "Cost"),
        ],
        "figures": figures,
        "analysis": data.analysis,
        "metric": metric if metric in TURN_METRIC_TITLES else "behaviour_accuracy",
        "turn_metrics": TURN_METRIC_TITLES,
        "dataset": dataset,
        "query": request.GET.urlencode(),
    }
    template = (
        "research/_leaderboard.html"
        if getattr(request, "htmx", False) and request.GET.get("part") == "leaderboard"  # set by django-htmx
        else "research/evaluation.html"
    )
    return render(request, template, context)


def _evaluation_data(request: HttpRequest, dataset: int | None) -> EvaluationData:
    """The dashboard's data for ?set=…&run=…&dataset=…; a bad choice is said in a message and the default shown."""
    pinned = [int(v) for v in request.GET.getlist("run") if v.isascii() and v.isdigit() and len(v) < 19]
    try:
        return evaluation_data(dataset, set_key=request.GET.get("set") or None, pinned=pinned)
    except SelectionError as exc:
        messages.error(request, f"{exc}. Showing the default comparison instead.")
        return evaluation_data(dataset)


@researcher_required
@require_GET
def figure_download(request: HttpRequest, name: str, ext: str) -> HttpResponse:
    data = _evaluation_data(request, _dataset_filter(request))
    if data.analysis is None:
        raise Http404("No scored runs yet.")
    try:
        chart = figure(
            name,
            data,
            weighting=request.GET.get("weighting", "spec"),
            metric=request.GET.get("metric", "behaviour_accuracy"),
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


@researcher_required
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(
        EvaluationRun.objects.select_related("evaluated_model", "judge_model", "dataset_version"), pk=run_id
    )
    scores = (
        run.conversation_scores.exclude(conversation__in=withdrawn_conversations())
        .select_related("conversation__topic")
        .order_by("-composite_score")
    )
    return render(
        request,
        "research/run_detail.html",
        {
            "run": run,
            "scores": scores[:500],
            "active_statuses": ACTIVE_RUN_STATUSES,
            "call_limits": run_limits(run),
            # Stalled: running, but its worker stopped renewing the lease (died or hangs); requeue button below.
            "stalled": list(stalled_conversations(run.pk).select_related("conversation").order_by("pk")[:100]),
            "failed": list(
                run.conversation_outputs.filter(status=RunConversation.Status.FAILED)
                .exclude(conversation__in=withdrawn_conversations())
                .select_related("conversation")
                .order_by("pk")[:100]
            ),
            # Counted in the run's figures, shown nowhere: say why the lists are shorter.
            "withdrawn": run.conversation_outputs.filter(conversation__in=withdrawn_conversations()).count(),
        },
    )


# ---------------------------------------------------------------------------
# Collection dashboard
# ---------------------------------------------------------------------------


@researcher_required
@require_GET
def collection_dashboard(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status") or None
    category = request.GET.get("category") or None
    monitored, monitor = monitoring.dashboard_study(request.GET.get("study") or None)
    return render(
        request,
        "research/collection.html",
        {
            "monitored": monitored,
            "monitor": monitor,
            "stats": collection_stats.collection_stats(),
            "studies": collection_stats.study_limits(),
            "conversations": collection_stats.recent_conversations(status, category),
            "status": status,
            "category": category,
            "statuses": Conversation.Status.choices,
            "categories": cat.TOPIC_CATEGORIES,
        },
    )


@researcher_required
@require_GET
def conversation_viewer(request: HttpRequest, conversation_id: str) -> HttpResponse:
    # A withdrawn participant's conversation is gone from the research pages as from exports (issue 13).
    conversation = get_object_or_404(
        exportable_conversations().select_related("topic", "original_model", "participant", "wide_answers"),
        conversation_id=conversation_id,
    )
    surveys = {s.kind: s for s in conversation.panas_surveys.prefetch_related("item_responses")}
    return render(
        request,
        "research/conversation.html",
        {
            "conversation": conversation,
            "turns": collection_stats.conversation_transcript(conversation),
            "pre": surveys.get("pre"),
            "post": surveys.get("post"),
            "wide": getattr(conversation, "wide_answers", None),
            "branches": conversation.four_branch_ratings.all(),
            "runs": RunConversation.objects.filter(conversation=conversation, status=RunConversation.Status.DONE)
            .select_related("run__evaluated_model")
            .order_by("run__evaluated_model__name"),
        },
    )


# ---------------------------------------------------------------------------
# Run launcher
# ---------------------------------------------------------------------------


def _launch_request(form: LaunchForm) -> launcher.LaunchRequest:
    d = form.cleaned_data
    return launcher.LaunchRequest(
        models=list(d["models"]),
        modes=list(d["modes"]),
        panas_strategy=d["panas_strategy"],
        judge=d["judge"],
        dataset_version=d["dataset_version"],
        topic_categories=list(d["topic_categories"]),
    )


@researcher_required
def run_launcher(request: HttpRequest) -> HttpResponse:
    form = LaunchForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            runs = launcher.do_launch_runs(_launch_request(form), request.user)
        except launcher.LauncherError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Started {len(runs)} run(s).")
            return redirect(reverse("research:runs"))
    recent_runs = EvaluationRun.objects.select_related("evaluated_model", "judge_model", "dataset_version").order_by(
        "-created_at"
    )[:50]
    return render(
        request,
        "research/runs.html",
        {
            "form": form,
            "runs": recent_runs,
            "active_statuses": ACTIVE_RUN_STATUSES,
        },
    )


@researcher_required
@require_POST
def run_estimate(request: HttpRequest) -> HttpResponse:
    form = LaunchForm(request.POST)
    estimate = error = None
    if form.is_valid():
        request_ = _launch_request(form)
        try:
            launcher.check_launch(request_)
            estimate = launcher.estimate(request_)
        except launcher.LauncherError as exc:
            error = str(exc)
    return render(request, "research/_estimate.html", {"form": form, "estimate": estimate, "error": error})


@researcher_required
@require_GET
def run_progress(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(EvaluationRun.objects.select_related("evaluated_model"), pk=run_id)
    # A finished run's fragment carries no hx-trigger, so swapping it in ends the polling.
    return render(request, "research/_run_progress.html", {"run": run, "active_statuses": ACTIVE_RUN_STATUSES})


def _run_action(request: HttpRequest, run_id: int, action, done: str) -> HttpResponse:
    """Cancel or resume, then go back where the researcher was (only ever to a page of this site)."""
    run = get_object_or_404(EvaluationRun, pk=run_id)
    try:
        action(run)
        messages.success(request, f"Run {run.pk} {done}.")
    except launcher.LauncherError as exc:
        messages.error(request, str(exc))
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("research:runs")
    return redirect(target)


@researcher_required
@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_action(request, run_id, launcher.do_cancel_run, "cancelled")


@researcher_required
@require_POST
def run_resume(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_action(request, run_id, launcher.do_resume_run, "resumed")


@researcher_required
@require_POST
def run_requeue(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_action(request, run_id, launcher.do_requeue_stalled, "had its stalled conversations requeued")


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
        path = access_export_file(job)
    except DatasetError as exc:
        raise Http404(str(exc)) from None
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type="application/zip")


# ---------------------------------------------------------------------------
# Human baseline
# ---------------------------------------------------------------------------


@researcher_required
def human_baseline(request: HttpRequest) -> HttpResponse:
    form = AssignForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            assignment = do_assign(
                form.cleaned_data["conversation"], form.cleaned_data["rater"], signed_in_user(request)
            )
            messages.success(request, f"Assigned {assignment.conversation} to {assignment.rater}.")
            return redirect("research:human")
        except HumanBaselineError as exc:
            form.add_error(None, str(exc))
    assignments = HumanAssignment.objects.select_related(
        "rater", "conversation", "assigned_by", "run_conversation"
    ).annotate(n_turns=Count("conversation__turns"))
    return render(
        request,
        "research/human.html",
        {
            "form": form,
            "assignments": assignments,
            "agreement": rater_agreement(),
        },
    )


@login_required_403
@require_GET
def rater_home(request: HttpRequest) -> HttpResponse:
    assignments = (
        HumanAssignment.objects.filter(rater=signed_in_user(request))
        .select_related("conversation__topic")
        .annotate(n_turns=Count("conversation__turns"))
    )
    return render(request, "research/rater_home.html", {"assignments": assignments})


@login_required_403
def rater_step(request: HttpRequest, assignment_id: int) -> HttpResponse:
    rater = signed_in_user(request)
    assignment = access_assignment(rater, assignment_id)
    own = assignment.rater_id == rater.pk
    step = current_step(assignment)
    form: DraftForm | AnalysisForm | PostForm | None = None
    if step.stage == "draft":
        form = DraftForm(request.POST or None, initial={"turn_number": step.turn_number})
    elif step.stage == "analysis":
        form = AnalysisForm(request.POST or None, step=step, initial={"turn_number": step.turn_number})
    elif step.stage == "post":
        form = PostForm(request.POST or None)
    if step.stage == "withdrawn":  # nothing shown, nothing saved (issue 13)
        return render(
            request,
            "research/rater_step.html",
            {"assignment": assignment, "step": step, "own": own, "progress": 0},
            status=410,
        )
    if request.method == "POST":
        if not own:
            raise Http404("Only the assigned rater can answer.")
        if form is not None and form.is_valid():
            try:
                if isinstance(form, DraftForm):
                    do_record_draft(assignment, form.cleaned_data["turn_number"], form.cleaned_data["draft"])
                elif isinstance(form, AnalysisForm):
                    do_record_analysis(assignment, form.cleaned_data["turn_number"], **form.answers())
                else:
                    do_record_post(assignment, **form.answers())
                return redirect("research:rate", assignment_id=assignment.pk)
            except HumanBaselineError as exc:
                messages.error(request, str(exc))
                return redirect("research:rate", assignment_id=assignment.pk)
    return render(
        request,
        "research/rater_step.html",
        {
            "assignment": assignment,
            "step": step,
            "form": form,
            "own": own,
            "progress": round(
                100 * (assignment.turns_done + (1 if assignment.is_complete else 0)) / (step.total_turns + 1)
            ),
        },
    )


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
    else:
        raise Http404("Snapshots download as .json or .csv.")
    response["Content-Disposition"] = f'attachment; filename="{filename}.{ext}"'
    return response


@researcher_required
@require_GET
def run_download(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's canonical outputs and manifest as a zip (research.run_download)."""
    run = get_object_or_404(
        EvaluationRun.objects.select_related("evaluated_model", "judge_model", "dataset_version"), pk=run_id
    )
    response = HttpResponse(run_archive(run), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="attunebench-run-{run.pk}.zip"'
    return response
