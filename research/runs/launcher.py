"""The run launcher: what a researcher picks, what it will cost, and handing it to the replay service.

The replay itself (Celery fan-out, progress counters on EvaluationRun, the
offline baselines) belongs to ``scoring.replay_service``; this module only
turns a launcher form into runs, estimates them beforehand and relays cancel
and resume. Each (EM, mode) pair becomes its own EvaluationRun so the
leaderboard, which is per (EM, mode), maps one row to one run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from attunebench.replay.baselines import BASELINE_NAMES, BASELINE_NOTES
from attunebench.replay.protocol import ReplayConfig, dry_run_plan
from attunebench.replay.run import estimate_plan
from collection.models import Conversation
from datasets.models import DatasetVersion
from datasets.versions import selection_queryset
from scoring import replay_service, run_control
from scoring.connection_check import do_preflight
from scoring.models import EvaluatedModel, EvaluationRun
from scoring.run_gaps import gapped_rows
from scoring.run_provenance import model_settings, provenance

#: The highest repeat number a launch accepts: enough to measure sampling variance, few enough to budget.
MAX_REPEAT = 100


class LauncherError(ValueError):
    """A launch request that cannot go ahead; the message is shown to the researcher."""


def ensure_offline_baselines() -> None:
    """The three offline baselines are always in the registry (a migration adds them; this repairs deletions)."""
    present = set(EvaluatedModel.objects.filter(name__in=BASELINE_NAMES).values_list("name", flat=True))
    for name in set(BASELINE_NAMES) - present:
        EvaluatedModel.objects.get_or_create(
            name=name, defaults={"kind": EvaluatedModel.Kind.OFFLINE, "notes": BASELINE_NOTES[name]}
        )


@dataclass
class LaunchRequest:
    models: list[EvaluatedModel]
    modes: list[str]
    panas_strategy: str
    judge: EvaluatedModel | None
    dataset_version: DatasetVersion | None
    topic_categories: list[str] = field(default_factory=list)
    # Ask the models again instead of reusing answers other runs paid for (a model updated behind its name).
    fresh_calls: bool = False
    # Which repeat of this configuration: each repeat gets answers of its own, to measure sampling variance.
    repeat: int = 0

    def conversations(self) -> QuerySet[Conversation]:
        return selection_queryset(self.topic_categories or None, self.dataset_version)

    def selection(self) -> dict[str, Any]:
        """What EvaluationRun.selection records, so a run says which conversations it meant."""
        if self.dataset_version is not None:
            return {"dataset_version": self.dataset_version.pk, "topic_categories": self.topic_categories}
        return {"status": "complete", "topic_categories": self.topic_categories}


@dataclass
class Estimate:
    conversations: int
    turns: int
    runs: int
    calls: int
    cost_usd: float
    per_run: list[dict[str, Any]]
    notes: list[str]


def estimate(request: LaunchRequest) -> Estimate:
    """Dry run: call count and cost before anything is spent.

    Each run's figures are the replay's own dry-run plan (``attunebench.replay.run.estimate_plan``):
    the calls it will make and their prompts' approximate size, priced with the
    same price lookup as the calls themselves, judge calls included. The plan
    depends on the mode, not the model, so it is built once per mode.
    """
    pks = list(request.conversations().values_list("pk", flat=True))
    documents = list(replay_service.load_canonical(pks).values())
    judge = replay_service.registry_spec(request.judge) if request.judge is not None else None
    notes: list[str] = []
    per_run: list[dict[str, Any]] = []
    total_cost = 0.0
    for mode in request.modes:
        plan = dry_run_plan(documents, ReplayConfig(mode=mode, panas_strategy=request.panas_strategy, judge=judge))
        for model in request.models:
            if model.kind == EvaluatedModel.Kind.HUMAN:
                notes.append(
                    "human raters are not replayed by the launcher; assign conversations on the human-baseline page"
                )
                per_run.append({"model": model.name, "mode": mode, "calls": 0, "cost_usd": 0.0, "kind": model.kind})
                continue
            if not replay_service.live_calls_allowed(model):
                notes.append(f"{model.name}: live models are disabled (ATTUNE_ALLOW_LIVE_MODELS); this run would fail")
            planned = estimate_plan(plan, replay_service.registry_spec(model), judge)
            if planned.cost_usd is None:
                unpriced = [
                    m.name for m in (model, request.judge) if m is not None and m.kind == EvaluatedModel.Kind.LLM
                ]
                notes.append(
                    f"{' or '.join(unpriced)}: no price known (set input/output cost in the registry); "
                    "cost not estimated"
                )
            else:
                total_cost += planned.cost_usd
            if judge is not None:
                notes.append(
                    f"judge {judge.name}: {planned.judge_calls} calls per run, included in each run's calls and cost"
                )
            per_run.append(
                {
                    "model": model.name,
                    "mode": mode,
                    "calls": planned.calls,
                    "cost_usd": planned.cost_usd,
                    "kind": model.kind,
                }
            )
    return Estimate(
        conversations=len(documents),
        turns=sum(len(d.turns) for d in documents),
        runs=len(request.models) * len(request.modes),
        calls=sum(r["calls"] for r in per_run),
        cost_usd=total_cost,
        per_run=per_run,
        notes=sorted(set(notes)),
    )


def check_launch(request: LaunchRequest) -> None:
    if not request.models or not request.modes:
        raise LauncherError("Pick at least one evaluated model and one mode.")
    if request.repeat < 0 or request.repeat > MAX_REPEAT:
        raise LauncherError(f"The repeat number must be between 0 and {MAX_REPEAT}, not {request.repeat}.")
    humans = [m.name for m in request.models if m.kind == EvaluatedModel.Kind.HUMAN]
    if humans:
        raise LauncherError(f"{', '.join(humans)}: human raters take part through assignments, not the launcher.")
    if not request.conversations().exists():
        raise LauncherError("No complete, non-withdrawn conversations match this selection.")


def launch_provenance(request: LaunchRequest, model: EvaluatedModel, user: Any, origin: str) -> dict[str, Any]:
    """What a launched run records of its start: who, from where, and the registry settings it runs with."""

    def registry_settings(row: EvaluatedModel) -> dict[str, Any]:
        return model_settings(
            row.name,
            litellm_model=row.litellm_model,
            api_base=row.api_base,
            params=dict(row.params or {}),
            max_in_flight=row.max_concurrency,
        )

    settings_ = {
        "model": registry_settings(model),
        "judge": registry_settings(request.judge) if request.judge is not None else None,
        "selection": request.selection(),
        "dataset_version": request.dataset_version.name if request.dataset_version is not None else None,
    }
    name = user.get_username() if getattr(user, "is_authenticated", False) else "anonymous"
    return provenance(origin, user=name, settings=settings_)


def do_launch_runs(
    request: LaunchRequest, user: Any = None, origin: str = EvaluationRun.Origin.LAUNCHER
) -> list[EvaluationRun]:
    """Create one run per (EM, mode) and hand each to the replay service after commit.

    In the embedded default (no Celery worker) the runs are replayed in background
    threads of this process (``scoring.embedded_runs``), so the request returns at once.
    """
    check_launch(request)
    total = request.conversations().count()
    runs = []
    with transaction.atomic():
        for model in request.models:
            for mode in request.modes:
                runs.append(
                    EvaluationRun.objects.create(
                        evaluated_model=model,
                        judge_model=request.judge,
                        mode=mode,
                        panas_strategy=request.panas_strategy,
                        dataset_version=request.dataset_version,
                        selection=request.selection(),
                        conversations_total=total,
                        fresh_calls=request.fresh_calls,
                        repeat=request.repeat,
                        created_by=user if getattr(user, "is_authenticated", False) else None,
                        origin=origin,
                        provenance=launch_provenance(request, model, user, origin),
                    )
                )
        run_ids = [r.pk for r in runs]

        def start_all() -> None:
            for run_id in run_ids:
                run_control.start_run(run_id, in_background=True)

        transaction.on_commit(start_all)
    return runs


def do_cancel_run(run: EvaluationRun) -> EvaluationRun:
    """Ask the replay service to stop a queued or running run."""
    if run.status not in replay_service.ACTIVE_STATUSES:
        raise LauncherError(
            f"Run {run.pk} is {run.get_status_display().lower()}; only queued or running runs can be cancelled."
        )
    if not run_control.cancel_run(run.pk):
        raise LauncherError(f"Run {run.pk} finished before it could be cancelled.")
    run.refresh_from_db()
    return run


def do_requeue_stalled(run: EvaluationRun) -> list[int]:
    """Queue again the run's conversations whose worker stopped renewing its lease (it died or hangs).

    The workers' sweeper does this by itself once a lease lapses; this is the
    researcher's button for when no sweeper is running (every worker is down).
    """
    if run.status not in replay_service.ACTIVE_STATUSES:
        raise LauncherError(
            f"Run {run.pk} is {run.get_status_display().lower()}; resume it instead of requeueing conversations."
        )
    requeued = run_control.requeue_stalled(run.pk, in_background=True)
    if not requeued:
        raise LauncherError(f"Run {run.pk} has no stalled conversation: every running one has a live worker.")
    return requeued


def do_retry_failed(run: EvaluationRun) -> EvaluationRun:
    """Replay only the run's failed or defaulted turns (their conversations, answered calls from the cache) and
    score it again."""
    if run.status not in (EvaluationRun.Status.DONE, EvaluationRun.Status.FAILED):
        raise LauncherError(
            f"Run {run.pk} is {run.get_status_display().lower()}; failed turns can be retried once it has ended."
        )
    if not gapped_rows(run.pk):
        raise LauncherError(f"Run {run.pk} has no failed or defaulted turns to retry.")
    transaction.on_commit(lambda: run_control.retry_failed(run.pk))
    return run


def check_preflight(request: LaunchRequest) -> None:
    """One real call to each model (and the judge) of a launch before any run is created: a model that cannot
    answer fails the launch in seconds, with what and where."""
    first = request.conversations().order_by("pk").values_list("pk", flat=True).first()
    if first is None:
        return
    conversation = replay_service.load_canonical([first])[first]
    problems = [
        result.line()
        for result in do_preflight(request.models, request.judge, conversation, request.modes[0])
        if not result.ok
    ]
    if problems:
        raise LauncherError("Preflight failed, nothing was started: " + "; ".join(problems))


def do_resume_run(run: EvaluationRun) -> EvaluationRun:
    """Continue a cancelled or failed run; finished conversations are kept and cached calls are free."""
    if run.status not in (EvaluationRun.Status.CANCELLED, EvaluationRun.Status.FAILED):
        raise LauncherError(
            f"Run {run.pk} is {run.get_status_display().lower()}; only cancelled or failed runs can be resumed."
        )
    transaction.on_commit(lambda: run_control.resume_run(run.pk, in_background=True))
    return run
