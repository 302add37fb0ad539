"""AttuneBench as an inspect_ai task: the replay protocol and the scorer, run by inspect.

Nothing is implemented twice. Each inspect Sample is one conversation; its solver runs the core's
replay protocol (``attunebench.replay``: the same prompts, parsing, re-asks of unusable answers,
PANAS strategies and judge option) through :class:`InspectModelBackend`, a ``ModelBackend`` whose
calls go to inspect's model API, so inspect's providers, caching, concurrency limits and retries
apply and every call is in the eval log. The scorer scores the finished run with the core's engine
(``attunebench.metrics.score_documents``), and the eval's metrics aggregate the per-conversation
records exactly as ``attune score`` does (``aggregate_rows`` and ``leaderboard_rows``).

Only this module needs inspect-ai (the ``inspect`` extra); the rest of the core never imports it.
The task is registered with inspect by the ``attune`` package's entry point (``attune.inspect_registry``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    Model,
    ModelOutput,
    get_model,
)
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile, RunOutput, dumps_canonical, load_run
from attunebench.metrics import score_documents
from attunebench.metrics.aggregate import aggregate_rows
from attunebench.metrics.comparison import PRIOR_BASELINE, skill
from attunebench.metrics.composite import CAPABILITIES, capability_scores
from attunebench.metrics.report import leaderboard_rows
from attunebench.metrics.results import ConversationRecord, LeaderboardRow, ScoringReport, to_json
from attunebench.replay.baselines import PriorTally
from attunebench.replay.llm import Completion, EMSpec, spec_from_name
from attunebench.replay.prompts import CallContext
from attunebench.replay.protocol import ReplayConfig
from attunebench.replay.run import make_replayer, write_outputs
from attunebench.replay.scheduler import PermanentCallError
from attunebench.sources import read_conversations

#: Where a sample keeps its canonical run (JSON) between the solver and the scorer.
RUN_STORE_KEY: Final = "attunebench_run"
#: Where a sample keeps the prior baseline's run of its conversation (the reference of the skill metric).
PRIOR_STORE_KEY: Final = "attunebench_prior_run"
#: The score metadata key holding the sample's per-conversation record (the report's ``conversations`` row).
RECORD_KEY: Final = "record"
#: The score metadata key holding the prior baseline's record of the same conversation.
PRIOR_RECORD_KEY: Final = "prior_record"

TASK_DESCRIPTION: Final = (
    "AttuneBench: an evaluated model replays finished human-AI conversations turn by turn (SPEC 4) and is "
    "scored on how closely its predictions match the participants' own annotations (SPEC 5). "
    + cat.RESEARCH_ONLY_STATEMENT
)

_ROLES: Final[dict[str, Callable[[str], ChatMessage]]] = {
    "system": lambda text: ChatMessageSystem(content=text),
    "user": lambda text: ChatMessageUser(content=text),
    "assistant": lambda text: ChatMessageAssistant(content=text),
}


def chat_messages(messages: Sequence[dict[str, str]]) -> list[ChatMessage]:
    """The replay protocol's chat messages as inspect's message objects, text unchanged."""
    converted = []
    for index, message in enumerate(messages):
        role = message.get("role", "")
        if role not in _ROLES:
            raise ValueError(f"message {index}: role {role!r} is not one of {', '.join(_ROLES)}")
        converted.append(_ROLES[role](message.get("content", "")))
    return converted


class InspectModelBackend:
    """Answers the replay's calls through inspect's model API: each spec name maps to an inspect ``Model``.

    inspect retries transient provider errors itself (its own backoff and limits), so an error that
    reaches here has exhausted them: it is reported to the replay as permanent, and the replay records
    the call as failed, as for any other backend.
    """

    cacheable = True  # a real model: its requests are counted as calls made

    def __init__(self, models: dict[str, Model]) -> None:
        self.models = models

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: CallContext) -> Completion:
        model = self.models.get(spec.name)
        if model is None:
            raise PermanentCallError(f"{spec.name}: no inspect model for this name", sent=False)
        try:
            output = await model.generate(chat_messages(messages))
        except Exception as exc:
            raise PermanentCallError(f"{spec.name}: {type(exc).__name__}: {str(exc)[:300]}") from exc
        if output.error:
            raise PermanentCallError(f"{spec.name}: {output.error[:300]}")
        usage = output.usage
        return Completion(
            text=output.completion,
            prompt_tokens=usage.input_tokens if usage else 0,
            completion_tokens=usage.output_tokens if usage else 0,
            cost_usd=None,  # inspect reports usage; prices stay with the provider's bill
        )


def load_conversations(path: str | Path) -> list[ConversationFile]:
    """The conversation files under ``path`` (a file or a folder); every problem found is an error."""
    if not Path(path).exists():
        raise FileNotFoundError(f"conversations: {path} does not exist")
    found, problems = read_conversations([path])
    if problems:
        listed = "\n".join(f"  {p}" for p in problems[:20])
        raise ValueError(f"conversations: {len(problems)} problem(s) in {path}:\n{listed}")
    if not found:
        raise ValueError(f"conversations: no conversation file found in {path}")
    return [conversation for _, conversation in found]


def conversation_samples(conversations: Sequence[ConversationFile]) -> list[Sample]:
    """One inspect Sample per conversation, identified by its conversation id."""
    return [
        Sample(
            id=c.conversationId,
            input=f"Replay of conversation {c.conversationId} ({len(c.turns)} turns)",
            metadata={"conversation_id": c.conversationId, "turns": len(c.turns)},
        )
        for c in conversations
    ]


@solver
def attunebench_replay(
    conversations: str,
    mode: str = "default",
    panas_strategy: str = "absolute",
    judge: str | None = None,
    parse_attempts: int = 5,
    runs_dir: str | None = None,
) -> Solver:
    """Replays the sample's conversation against the eval's model with the AttuneBench protocol (SPEC 4).

    ``conversations`` is the path the task read (its parameters stay plain values in the eval log)."""
    dataset = load_conversations(conversations)
    by_id = {c.conversationId: c for c in dataset}
    prior_tally = PriorTally(dataset)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        conversation = by_id[str(state.sample_id)]
        model = get_model()
        em = EMSpec(name=str(model))
        models = {em.name: model}
        judge_spec = None
        if judge:
            judge_model = get_model(judge)
            judge_spec = EMSpec(name=str(judge_model))
            models[judge_spec.name] = judge_model
        config = ReplayConfig(mode=mode, panas_strategy=panas_strategy, judge=judge_spec, parse_attempts=parse_attempts)
        replayer = make_replayer(em, config, dataset=dataset, llm_backend=InspectModelBackend(models))
        result = await replayer.replay(conversation)
        state.store.set(RUN_STORE_KEY, dumps_canonical(result.output))
        # The prior baseline answers offline (no model call): the reference the skill metric is measured from.
        prior = make_replayer(
            spec_from_name(PRIOR_BASELINE),
            ReplayConfig(mode=mode, panas_strategy=panas_strategy),
            dataset=dataset,
            prior_tally=prior_tally,
        )
        state.store.set(PRIOR_STORE_KEY, dumps_canonical((await prior.replay(conversation)).output))
        if runs_dir:
            write_outputs([result], runs_dir)
        failed = len(result.failures)
        summary = (
            f"Replayed {len(result.output.turns)} of {len(conversation.turns)} turns in {result.stats.calls_made} "
            f"calls; {failed} call(s) failed"
        )
        state.output = ModelOutput.from_content(model=em.name, content=summary)
        state.metadata["failed_calls"] = [f.to_dict() for f in result.failures]
        return state

    return solve


def _report(scores: Sequence[SampleScore], key: str = RECORD_KEY) -> ScoringReport:
    """The scoring report of the scored samples (their records under ``key``), aggregated by the engine
    ``attune score`` uses."""
    records = [
        ConversationRecord.model_validate(s.score.metadata[key])
        for s in scores
        if s.score.metadata and key in s.score.metadata
    ]
    return ScoringReport(conversations=records, aggregates=aggregate_rows(records))


def _row(scores: Sequence[SampleScore], key: str = RECORD_KEY) -> LeaderboardRow | None:
    """The run's leaderboard row (None when nothing was scored)."""
    rows = leaderboard_rows(_report(scores, key))
    return rows[0] if len(rows) == 1 else None


def _number(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _leaderboard_value(scores: Sequence[SampleScore], read: Callable[[LeaderboardRow], float | None]) -> float:
    """One figure of the run's leaderboard row (NaN when nothing was scored or the figure is undefined)."""
    row = _row(scores)
    return float("nan") if row is None else _number(read(row))


@metric
def composite() -> Metric:
    """Mean SPEC 5.3 composite over the conversations, 0-100: the ``attune score`` figure. Read it with the
    capabilities, not alone. AttuneBench is a research instrument, not a certificate of safety or suitability."""

    def compute(scores: list[SampleScore]) -> float:
        return _leaderboard_value(scores, lambda row: row.composite_score)

    return compute


def _capability_metric(name: str) -> Callable[[], Metric]:
    @metric(name=name)
    def capability() -> Metric:
        def compute(scores: list[SampleScore]) -> float:
            return _leaderboard_value(scores, lambda row: row.capabilities.capability(name))

        return compute

    capability.__doc__ = (
        f"Mean {name.replace('_', ' ')} capability score over the conversations, 0-1 (as in `attune score`). "
        "AttuneBench is a research instrument, not a certificate of safety or suitability."
    )
    return capability


CAPABILITY_METRICS: Final = {name: _capability_metric(name) for name in CAPABILITIES}


@metric
def coverage() -> Metric:
    """Mean share of a conversation's turns the model answered usably (1.0: every turn scored on the model's
    own answers; below it, the scores rest partly on the scorer's defaults)."""

    def compute(scores: list[SampleScore]) -> float:
        return _leaderboard_value(scores, lambda row: row.coverage)

    return compute


@metric
def composite_skill() -> Metric:
    """Skill over the prior baseline on the same conversations: (composite - prior) / (100 - prior), as
    ``attune analyze`` estimates it; 1 is perfect, 0 no better than predicting the most frequent answers,
    below 0 worse. AttuneBench is a research instrument, not a certificate of safety or suitability."""

    def compute(scores: list[SampleScore]) -> float:
        row, prior = _row(scores), _row(scores, PRIOR_RECORD_KEY)
        if row is None or prior is None:
            return float("nan")
        return _number(skill(row.composite_score, prior.composite_score, 100.0))

    return compute


@scorer(metrics=[composite(), *(make() for make in CAPABILITY_METRICS.values()), coverage(), composite_skill()])
def attunebench_scorer(conversations: str) -> Scorer:
    """Scores the sample's run with the AttuneBench engine (SPEC 5): the per-conversation composite as the value,
    the conversation's full record (every metric ``attune score`` reports) and capabilities in the metadata."""
    by_id = {c.conversationId: c for c in load_conversations(conversations)}

    async def score(state: TaskState, target: Target) -> Score:
        conversation = by_id[str(state.sample_id)]
        run: RunOutput = load_run(state.store.get(RUN_STORE_KEY), f"run of {conversation.conversationId}")
        record = score_documents([conversation], [run]).conversations[0]
        prior_run = load_run(state.store.get(PRIOR_STORE_KEY), f"prior baseline run of {conversation.conversationId}")
        prior_record = score_documents([conversation], [prior_run]).conversations[0]
        capabilities = capability_scores(record.metrics())
        return Score(
            value=record.composite_score,
            answer=f"composite {record.composite_score:.2f}, coverage {record.coverage:.2f}",
            explanation=cat.RESEARCH_ONLY_STATEMENT,
            metadata={
                RECORD_KEY: to_json(record),
                "capabilities": capabilities,
                PRIOR_RECORD_KEY: to_json(prior_record),
            },
        )

    return score


def attunebench_task(
    conversations: str,
    mode: str = "default",
    panas_strategy: str = "absolute",
    judge: str | None = None,
    parse_attempts: int = 5,
    runs_dir: str | None = None,
) -> Task:
    """The AttuneBench task over the conversation files at ``conversations`` (a file or a folder)."""
    ReplayConfig(mode=mode, panas_strategy=panas_strategy, parse_attempts=parse_attempts)  # a bad value fails here
    loaded = load_conversations(conversations)
    return Task(
        dataset=MemoryDataset(conversation_samples(loaded), name="attunebench", location=str(conversations)),
        solver=attunebench_replay(conversations, mode, panas_strategy, judge, parse_attempts, runs_dir),
        scorer=attunebench_scorer(conversations),
        metadata={"description": TASK_DESCRIPTION, "mode": mode, "panas_strategy": panas_strategy, "judge": judge},
    )


__all__ = [
    "TASK_DESCRIPTION",
    "InspectModelBackend",
    "attunebench_replay",
    "attunebench_scorer",
    "attunebench_task",
    "chat_messages",
    "load_conversations",
]
