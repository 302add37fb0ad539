"""Run pages: the launcher, a run's detail and progress, and the actions on a run.

Views parse and authorise; services do the work.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from datasets.exchange import withdrawn_conversations
from research.access.checks import researcher_required
from research.runs import launcher
from research.runs.forms import LaunchForm
from scoring.models import EvaluationRun, RunConversation
from scoring.replay_service import ACTIVE_STATUSES as ACTIVE_RUN_STATUSES
from scoring.replay_service import calls_sent_so_far, run_limits, stalled_conversations
from scoring.run_gaps import run_gaps


def _calls_sent(run: EvaluationRun) -> int | None:
    """Requests sent so far while the run goes (one query); None once it has ended (its counts are final)."""
    return calls_sent_so_far(run) if run.status in ACTIVE_RUN_STATUSES else None


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
            "calls_sent": _calls_sent(run),
            "call_limits": run_limits(run),
            # Stalled: running, but its worker stopped renewing the lease (died or hangs); requeue button below.
            "stalled": list(stalled_conversations(run.pk).select_related("conversation").order_by("pk")[:100]),
            "failed": list(
                run.conversation_outputs.filter(status=RunConversation.Status.FAILED)
                .exclude(conversation__in=withdrawn_conversations())
                .select_related("conversation")
                .order_by("pk")[:100]
            ),
            # Failed or defaulted turns by kind, with the button that replays only them.
            "gap_groups": run_gaps(run.pk),
            # Counted in the run's figures, shown nowhere: say why the lists are shorter.
            "withdrawn": run.conversation_outputs.filter(conversation__in=withdrawn_conversations()).count(),
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
        fresh_calls=bool(d["fresh_calls"]),
        repeat=d["repeat"],
    )


@researcher_required
def run_launcher(request: HttpRequest) -> HttpResponse:
    form = LaunchForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            launch = _launch_request(form)
            launcher.check_preflight(launch)
            runs = launcher.do_launch_runs(launch, request.user)
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
    return render(
        request,
        "research/_run_progress.html",
        {"run": run, "active_statuses": ACTIVE_RUN_STATUSES, "calls_sent": _calls_sent(run)},
    )


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
def run_retry_failed(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_action(request, run_id, launcher.do_retry_failed, "is replaying its failed turns")


@researcher_required
@require_POST
def run_requeue(request: HttpRequest, run_id: int) -> HttpResponse:
    return _run_action(request, run_id, launcher.do_requeue_stalled, "had its stalled conversations requeued")
