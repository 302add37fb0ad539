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

from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet
from django.db.models.functions import Length

from collection.models import Conversation, Turn
from datasets.models import DatasetVersion
from datasets.versions import selection_queryset
from scoring import replay_service, run_control
from scoring.models import EvaluatedModel, EvaluationRun

# SPEC 4 per turn: draft, analysis, HP-perspective binary, pairwise (when the turn has comparisons),
# judge (when a judge is chosen); plus one post-conversation call per conversation.
CALLS_PER_TURN_FIXED = 3
PROMPT_OVERHEAD_TOKENS = 1200
OUTPUT_TOKENS_PER_CALL = 350
CHARS_PER_TOKEN = 4


class LauncherError(ValueError):
    """A launch request that cannot go ahead; the message is shown to the researcher."""


OFFLINE_BASELINES: dict[str, str] = {
    "baseline:random": "Uniform random answers: the floor every model must beat.",
    "baseline:prior": "Majority answers from the other conversations (leave-one-out): what the data alone predicts.",
    "baseline:lexicon": "Emotion words and cues read off the participant's messages: a transparent keyword model.",
}


def ensure_offline_baselines() -> None:
    """The three offline baselines are always in the registry (a migration adds them; this repairs deletions)."""
    present = set(EvaluatedModel.objects.filter(name__in=list(OFFLINE_BASELINES)).values_list("name", flat=True))
    for name in OFFLINE_BASELINES.keys() - present:
        EvaluatedModel.objects.get_or_create(
            name=name, defaults={"kind": EvaluatedModel.Kind.OFFLINE, "notes": OFFLINE_BASELINES[name]}
        )


@dataclass
class LaunchRequest:
    models: list[EvaluatedModel]
    modes: list[str]
    panas_strategy: str
    judge: EvaluatedModel | None
    dataset_version: DatasetVersion | None
    topic_categories: list[str] = field(default_factory=list)

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


def _model_price(model: EvaluatedModel) -> tuple[float, float] | None:
    """(input, output) USD per million tokens: the registry's override, else litellm's price list."""
    if model.kind != EvaluatedModel.Kind.LLM:
        return 0.0, 0.0
    if model.input_cost_per_million is not None and model.output_cost_per_million is not None:
        return model.input_cost_per_million, model.output_cost_per_million
    try:
        import litellm

        info = litellm.model_cost.get(model.litellm_model or model.name)
    except Exception:
        info = None
    if not info:
        return None
    return 1e6 * float(info.get("input_cost_per_token") or 0), 1e6 * float(info.get("output_cost_per_token") or 0)


def estimate(request: LaunchRequest) -> Estimate:
    """Dry run: call count and cost before anything is spent.

    Calls follow SPEC 4 exactly; tokens are approximated (the thread grows with
    each turn, about four characters per token) so the cost is an upper-range
    guide, not a quote. The call count is the replay protocol's own (the same
    for every model and mode), counted once.
    """
    queryset = request.conversations()
    pks = list(queryset.values_list("pk", flat=True))
    turn_rows = list(
        Turn.objects.filter(conversation_id__in=pks)
        .annotate(n_comparisons=Count("pairwise_comparisons"), chars=Length("user_message") + Length("llm_response"))
        .order_by("conversation_id", "turn_number")
        .values_list("conversation_id", "n_comparisons", "chars")
    )
    judge = 1 if request.judge else 0
    input_tokens = 0
    running: dict[int, int] = {}
    for conversation_id, n_comparisons, chars in turn_rows:
        running[conversation_id] = running.get(conversation_id, 0) + (chars or 0)
        # Weight each turn's prompt size by roughly how many calls see it.
        turn_calls = CALLS_PER_TURN_FIXED + (1 if n_comparisons else 0) + judge
        input_tokens += turn_calls * (PROMPT_OVERHEAD_TOKENS + running[conversation_id] // CHARS_PER_TOKEN)
    input_tokens += len(pks) * (
        PROMPT_OVERHEAD_TOKENS + sum(running.values()) // max(1, CHARS_PER_TOKEN * max(1, len(pks)))
    )
    calls = replay_service.estimate_calls(queryset, judge=request.judge is not None)
    output_tokens = calls * OUTPUT_TOKENS_PER_CALL
    notes: list[str] = []
    per_run = []
    total_cost = 0.0
    for model in request.models:
        price = _model_price(model)
        for mode in request.modes:
            if price is None:
                cost = None
                notes.append(
                    f"{model.name}: no price known (set input/output cost in the registry); cost not estimated"
                )
            else:
                cost = (input_tokens * price[0] + output_tokens * price[1]) / 1e6
                total_cost += cost
            if model.kind == EvaluatedModel.Kind.LLM and not settings.ATTUNE_ALLOW_LIVE_MODELS:
                notes.append(f"{model.name}: live models are disabled (ATTUNE_ALLOW_LIVE_MODELS); this run would fail")
            per_run.append({"model": model.name, "mode": mode, "calls": calls, "cost_usd": cost, "kind": model.kind})
    if request.judge:
        judge_price = _model_price(request.judge)
        if judge_price and judge_price != (0.0, 0.0):
            judge_calls = sum(1 for _, n, _ in turn_rows) * len(request.models) * len(request.modes)
            judge_cost = (
                judge_calls * (PROMPT_OVERHEAD_TOKENS * judge_price[0] + OUTPUT_TOKENS_PER_CALL * judge_price[1]) / 1e6
            )
            total_cost += judge_cost
            notes.append(f"judge {request.judge.name}: about {judge_calls} calls, ${judge_cost:.2f} included")
    if any(m.kind == EvaluatedModel.Kind.HUMAN for m in request.models):
        notes.append("human raters are not replayed by the launcher; assign conversations on the human-baseline page")
    return Estimate(
        conversations=len(pks),
        turns=len(turn_rows),
        runs=len(request.models) * len(request.modes),
        calls=sum(r["calls"] for r in per_run),
        cost_usd=total_cost,
        per_run=per_run,
        notes=sorted(set(notes)),
    )


def check_launch(request: LaunchRequest) -> None:
    if not request.models or not request.modes:
        raise LauncherError("Pick at least one evaluated model and one mode.")
    humans = [m.name for m in request.models if m.kind == EvaluatedModel.Kind.HUMAN]
    if humans:
        raise LauncherError(f"{', '.join(humans)}: human raters take part through assignments, not the launcher.")
    if not request.conversations().exists():
        raise LauncherError("No complete, non-withdrawn conversations match this selection.")


def do_launch_runs(request: LaunchRequest, user: Any = None) -> list[EvaluationRun]:
    """Create one run per (EM, mode) and hand each to the replay service after commit."""
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
                        created_by=user if getattr(user, "is_authenticated", False) else None,
                    )
                )
        run_ids = [r.pk for r in runs]
        transaction.on_commit(lambda: [run_control.start_run(run_id) for run_id in run_ids])
    return runs


def do_cancel_run(run: EvaluationRun) -> EvaluationRun:
    """Ask the replay service to stop a queued or running run."""
    if run.status not in (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING, EvaluationRun.Status.SCORING):
        raise LauncherError(
            f"Run {run.pk} is {run.get_status_display().lower()}; only queued or running runs can be cancelled."
        )
    if not run_control.cancel_run(run.pk):
        raise LauncherError(f"Run {run.pk} finished before it could be cancelled.")
    run.refresh_from_db()
    return run


def do_resume_run(run: EvaluationRun) -> EvaluationRun:
    """Continue a cancelled or failed run; finished conversations are kept and cached calls are free."""
    if run.status not in (EvaluationRun.Status.CANCELLED, EvaluationRun.Status.FAILED):
        raise LauncherError(
            f"Run {run.pk} is {run.get_status_display().lower()}; only cancelled or failed runs can be resumed."
        )
    transaction.on_commit(lambda: run_control.resume_run(run.pk))
    return run
