"""Evaluating a set of conversations end to end: backends, outputs on disk, dry-run estimates.

The thin layer the ``attune eval`` command, the Celery tasks and the
benchmark share. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attunebench.canonical import ConversationFile, dumps_canonical
from attunebench.replay.cache import CallCache
from attunebench.replay.failures import FailureWatch
from attunebench.replay.llm import Completion, EMSpec, LiteLLMBackend, ModelBackend, price_per_token
from attunebench.replay.protocol import PlannedCall, ReplayConfig, Replayer, ReplayResult, dry_run_plan
from attunebench.replay.scheduler import Scheduler
from attunebench.synth import document_filename

if TYPE_CHECKING:
    from attunebench.replay.baselines import PriorTally

_llm_backend: LiteLLMBackend | None = None


def make_backend(
    spec: EMSpec,
    dataset: Sequence[ConversationFile] = (),
    llm_backend: ModelBackend | None = None,
    prior_tally: PriorTally | None = None,
) -> ModelBackend:
    """The backend answering ``spec``'s calls; ``dataset`` (or its ``prior_tally``) feeds ``baseline:prior``."""
    global _llm_backend
    if spec.is_offline:
        from attunebench.replay.baselines import make_baseline

        return make_baseline(spec.name, dataset, prior_tally=prior_tally)
    if llm_backend is not None:
        return llm_backend
    if _llm_backend is None:
        _llm_backend = LiteLLMBackend()
    return _llm_backend


def make_replayer(
    em: EMSpec,
    config: ReplayConfig,
    *,
    dataset: Sequence[ConversationFile] = (),
    concurrency: int = 16,
    cache: CallCache | None = None,
    scheduler: Scheduler | None = None,
    on_result: Callable[[ReplayResult], None] | None = None,
    on_send: Callable[[int], Awaitable[None]] | None = None,
    paid_tag: str | None = None,
    recoverable: Callable[[str], bool] | None = None,
    counted_earlier: Callable[[str], bool] | None = None,
    recover: Callable[[EMSpec, list[dict[str, str]]], Awaitable[Completion | None]] | None = None,
    llm_backend: ModelBackend | None = None,
    prior_tally: PriorTally | None = None,
    watch: FailureWatch | None = None,
) -> Replayer:
    """A replayer with backends for the EM and the judge, sharing one scheduler.

    ``llm_backend`` answers the calls of real models instead of litellm in this process (a Celery
    worker's ``CourierBackend``); offline baselines are always answered here. ``prior_tally`` is
    ``dataset``'s prior tally built once for the run: a replayer per conversation then does not
    tally the whole dataset again.
    """
    scheduler = scheduler or Scheduler(max_concurrency=concurrency)
    judge_backend = make_backend(config.judge, dataset, llm_backend, prior_tally) if config.judge is not None else None
    return Replayer(
        em,
        make_backend(em, dataset, llm_backend, prior_tally),
        config,
        judge_backend=judge_backend,
        scheduler=scheduler,
        cache=cache,
        on_result=on_result,
        on_send=on_send,
        paid_tag=paid_tag,
        recoverable=recoverable,
        counted_earlier=counted_earlier,
        recover=recover,
        watch=watch,
    )


def render_output(result: ReplayResult) -> tuple[str, str]:
    """A result's run file: (file name, canonical text), as ``write_outputs`` writes it."""
    return document_filename(result.output), dumps_canonical(result.output)


def write_outputs(
    results: Sequence[ReplayResult], out_dir: str | Path, rendered: Mapping[str, tuple[str, str]] | None = None
) -> list[Path]:
    """Canonical, byte-stable run files (SPEC 3.2) in ``out_dir``.

    ``rendered`` holds files already made by ``render_output``, by conversation id (a replay renders each
    conversation's file as it finishes, so the run's end only writes them)."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for result in results:
        name, text = (rendered or {}).get(result.conversation_id) or render_output(result)
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


@dataclass(frozen=True)
class DryRunEstimate:
    calls: int
    em_calls: int
    judge_calls: int
    prompt_tokens: int
    output_tokens: int
    cost_usd: float | None  # None when a model's price is unknown

    def describe(self) -> str:
        cost = (
            f"${self.cost_usd:.4f}"
            if self.cost_usd is not None
            else "unknown (model not in the price list; set input/output prices)"
        )
        return (
            f"{self.calls} calls ({self.em_calls} EM, {self.judge_calls} judge), "
            f"~{self.prompt_tokens} prompt tokens, ~{self.output_tokens} output tokens, estimated cost {cost}"
        )


def estimate(conversations: Sequence[ConversationFile], em: EMSpec, config: ReplayConfig) -> DryRunEstimate:
    """Calls and cost a replay would make, computed from the real prompts, without calling anything."""
    return estimate_plan(dry_run_plan(conversations, config), em, config.judge)


def estimate_plan(plan: Sequence[PlannedCall], em: EMSpec, judge: EMSpec | None) -> DryRunEstimate:
    """Price a dry-run plan for an EM (and judge).

    The plan depends on the conversations and the config only, so a launcher
    estimating several models under one config builds it once and prices it per model.
    """
    prices = {"em": price_per_token(em), "judge": price_per_token(judge) if judge is not None else None}
    cost: float | None = 0.0
    for role, _call, prompt, output in plan:
        price = prices[role]
        if price is None or cost is None:
            cost = None
        else:
            cost += prompt * price[0] + output * price[1]
    return DryRunEstimate(
        calls=len(plan),
        em_calls=sum(1 for p in plan if p[0] == "em"),
        judge_calls=sum(1 for p in plan if p[0] == "judge"),
        prompt_tokens=sum(p[2] for p in plan),
        output_tokens=sum(p[3] for p in plan),
        cost_usd=cost,
    )
