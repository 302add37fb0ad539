"""The replay protocol (SPEC 4): one conversation against one EM → one canonical RunOutput.

Per turn t the EM sees only turns <= t:

1. draft      – sees the participant's message, writes its own reply;
2. analysis   – sees the original model's (OM) reply; emotion tags and, for the
                questions the participant answered this turn, OM assessment and
                prediction of the participant's preference;
3. hp_binary  – the same two answers for the first-person wording;
4. pairwise   – predicts A/B per comparison among masked candidates;
5. judge      – (optional, separate model) rates the draft against the golden reply
                and answers the questions about it; with no golden reply it
                only answers the questions, and with neither it is not called.

The EM's answers never stay in the thread (SPEC 4 elides them), so the thread
after call 2 of turn t is simply the transcript of turns <= t. That makes the
data dependencies explicit: draft → analysis per turn on the thread; calls
3–5 of turn t hang off the thread after call 2 and run concurrently, *while*
the thread moves on to turn t+1. After the last turn's analysis, the
post-conversation call predicts post-PANAS (by strategy) and the
conversation-wide answers. The sequential chain of a conversation is
therefore 2·T + 1 calls (``critical_path_calls``).

A call whose transport keeps failing (after the scheduler's retries) or whose
reply stays unusable (after the parse retries) is recorded in
``failed_calls``; its turn is left out of the output (the scorer's coverage
shows it) and the run goes on. A failing judge only nulls the judge fields.
Each failure says whether the model answered unusably (its own result: an
output left empty by such failures is still scored, at coverage 0) or the
provider never answered (the conversation is then retried, not scored).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from attunebench import catalogue as cat
from attunebench.canonical import (
    ConversationFile,
    RunOutput,
    Turn,
    format_timestamp,
    parse_run,
)
from attunebench.replay import prompts as P
from attunebench.replay.cache import CachedCall, CallCache, NullCache
from attunebench.replay.failures import UNUSABLE, FailureWatch, reason_of
from attunebench.replay.llm import Completion, EMSpec, ModelBackend
from attunebench.replay.parsing import (
    AnalysisAnswer,
    Answer,
    BinaryAnswer,
    DraftAnswer,
    JudgeAnswer,
    PairwiseAnswer,
    ParseRetriesExhausted,
    PostAnswer,
    ReplyParseError,
    ask_until_valid,
    parse_reply,
)
from attunebench.replay.scheduler import (
    PermanentCallError,
    ProviderLimits,
    RetriesExhausted,
    Scheduler,
    TransientCallError,
)
from attunebench.replay.transcript import ROLE_EM, ROLE_JUDGE, CallRecord, answer_json, capped, capped_messages


@dataclass(frozen=True)
class ReplayConfig:
    """What, besides the EM, defines a run (SPEC 4 modes and PANAS strategies)."""

    mode: str = "default"
    panas_strategy: str = "absolute"
    judge: EMSpec | None = None
    # Tries per call when replies are unusable (each re-ask shows the reason). With three, bench/replay_faults.py
    # (6.4% of answers malformed, 1,265 calls) lost a turn in about one run in three (0.064**3 per call); five
    # make that about one run in 700, and a model that never answers in JSON costs two more requests a call.
    parse_attempts: int = 5

    def __post_init__(self) -> None:
        if self.mode not in cat.MODES:
            raise ValueError(f"mode must be one of {', '.join(cat.MODES)}, got {self.mode!r}")
        if self.panas_strategy not in cat.PANAS_STRATEGIES:
            raise ValueError(
                f"PANAS strategy must be one of {', '.join(cat.PANAS_STRATEGIES)}, got {self.panas_strategy!r}"
            )
        if self.parse_attempts < 1:
            raise ValueError("parse_attempts must be >= 1")


@dataclass
class ReplayStats:
    """Call accounting. ``calls_made`` counts requests sent to a model, counted as they go out (parse retries
    and transport retries included: what the provider sees; an offline baseline's predictions are not calls);
    ``paid_requests`` those to a paid backend."""

    calls_made: int = 0
    paid_requests: int = 0
    calls_cached: int = 0  # answers reused that this conversation did not pay for (another run's cache)
    calls_recovered: int = 0  # answers it paid for in an interrupted earlier attempt, reused (counted as paid)
    calls_reused: int = 0  # answers its earlier, already counted attempt paid for (a failed conversation resumed)
    requests_recovered: int = 0  # the requests those answers took
    calls_failed: int = 0
    # Attempts whose connection was never opened (refused, unknown host): not in calls_made, nobody saw them.
    calls_unconnected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_spent: float = 0.0  # money spent by this process on requests it sent
    cost_unknown: bool = False  # some request had no price
    # What the answers reused from another run's cache cost when they were paid: with cost_spent, the
    # cost of every answer the output rests on, whichever run paid for it.
    cost_reused: float = 0.0

    def add(self, other: ReplayStats) -> None:
        self.calls_made += other.calls_made
        self.calls_unconnected += other.calls_unconnected
        self.paid_requests += other.paid_requests
        self.calls_cached += other.calls_cached
        self.calls_recovered += other.calls_recovered
        self.calls_reused += other.calls_reused
        self.requests_recovered += other.requests_recovered
        self.calls_failed += other.calls_failed
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_spent += other.cost_spent
        self.cost_unknown = self.cost_unknown or other.cost_unknown
        self.cost_reused += other.cost_reused

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls_made": self.calls_made,
            "paid_requests": self.paid_requests,
            "calls_cached": self.calls_cached,
            "calls_recovered": self.calls_recovered,
            "calls_reused": self.calls_reused,
            "requests_recovered": self.requests_recovered,
            "calls_failed": self.calls_failed,
            "calls_unconnected": self.calls_unconnected,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_spent": round(self.cost_spent, 8),
            "cost_unknown": self.cost_unknown,
            "cost_reused": round(self.cost_reused, 8),
        }


UNUSABLE_REPLY = "unusable_reply"  # the model answered, never in a usable shape: its own failure
NO_ANSWER = "no_answer"  # the provider never answered (429s, timeouts, refused): nothing about the model


@dataclass(frozen=True)
class FailedCall:
    """A logical call given up: ``kind`` says whose failure it is (the model's or the provider's), ``reason``
    which of the four kinds a researcher acts on (``attunebench.replay.failures.REASONS``)."""

    turn_number: int | None
    call_type: str
    error: str
    kind: str = NO_ANSWER
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "turnNumber": self.turn_number,
            "call": self.call_type,
            "error": self.error,
            "kind": self.kind,
            "reason": self.reason,
        }


@dataclass
class ReplayResult:
    """One conversation's canonical output and what producing it took."""

    output: RunOutput
    stats: ReplayStats
    failures: list[FailedCall]
    # Every request sent and every cached answer reused, in the order they started.
    calls: list[CallRecord] = field(default_factory=list)

    @property
    def conversation_id(self) -> str:
        return self.output.conversationId

    @property
    def scoreable(self) -> bool:
        """Whether this output is the model's result, to be scored even if empty.

        An output without turns or post answers scores 0 with coverage 0 (SPEC
        5.3) when the model itself gave only unusable replies. When the provider
        never answered, it says nothing about the model: the conversation has
        failed and is replayed again on resume instead of being scored.
        """
        if self.output.turns or self.output.post_conversation is not None:
            return True
        return bool(self.failures) and all(f.kind == UNUSABLE_REPLY for f in self.failures)


class CallFailed(Exception):
    """A logical call that could not be completed; the protocol records and moves on."""

    def __init__(self, failure: FailedCall):
        self.failure = failure
        super().__init__(f"{failure.call_type} (turn {failure.turn_number}): {failure.error}")


class _Ledger:
    """Per-conversation accounting; the output's api_cost counts cached answers too."""

    def __init__(self) -> None:
        self.stats = ReplayStats()
        self.output_cost = 0.0
        self.output_cost_known = True
        self.failures: list[FailedCall] = []
        self.reasoning: dict[str, dict[str, str]] = {}
        self.calls: list[CallRecord] = []

    def record(self, spec: EMSpec, ctx: P.CallContext, role: str, attempt: int) -> CallRecord:
        """A new call record, numbered in the order calls start."""
        record = CallRecord(
            sequence=len(self.calls),
            call_type=ctx.call_type,
            turn_number=ctx.turn_number,
            role=role,
            model=spec.name,
            attempt=attempt,
        )
        self.calls.append(record)
        return record

    def paid(self, completions: Sequence[Completion]) -> tuple[int, int, float | None]:
        prompt = sum(c.prompt_tokens for c in completions)
        completion = sum(c.completion_tokens for c in completions)
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += completion
        costs = [c.cost_usd for c in completions]
        if any(c is None for c in costs):
            self.stats.cost_unknown = True
            self.output_cost_known = False
            return prompt, completion, None
        total = float(sum(costs))  # type: ignore[arg-type]
        self.stats.cost_spent += total
        self.output_cost += total
        return prompt, completion, total

    def reused(self, cached: CachedCall, own: bool = False) -> None:
        """A cached answer nobody pays for now: another run's (``calls_cached``), or this conversation's
        from an earlier attempt whose accounting already counted it (``own``: ``calls_reused``)."""
        if own:
            self.stats.calls_reused += 1
        else:
            self.stats.calls_cached += 1
            self.stats.cost_reused += cached.cost_usd or 0.0
        if cached.cost_usd is None:
            self.output_cost_known = False
        else:
            self.output_cost += cached.cost_usd

    def recovered(self, cached: CachedCall) -> None:
        """An answer this conversation paid for in an attempt whose accounting was lost (its worker died)."""
        self.stats.calls_recovered += 1
        self.stats.requests_recovered += cached.requests
        self.stats.prompt_tokens += cached.prompt_tokens
        self.stats.completion_tokens += cached.completion_tokens
        if cached.cost_usd is None:
            self.stats.cost_unknown = True
            self.output_cost_known = False
        else:
            self.stats.cost_spent += cached.cost_usd
            self.output_cost += cached.cost_usd


def critical_path_calls(conversation: ConversationFile) -> int:
    """Length of the conversation's sequential chain: draft+analysis per turn, then post."""
    return 2 * len(conversation.turns) + 1


def turn_calls(turn: Turn, judge: bool) -> tuple[str, ...]:
    """The calls a replay makes for one turn, in order (SPEC 4 steps 1-5).

    The single rule behind the replay itself, its call count and its dry run:
    draft and analysis always; the HP-perspective binary call when the
    participant answered questions; pairwise when the turn has comparisons; the
    judge (when there is one) when it has something to rate or answer.
    """
    calls = [P.DRAFT, P.ANALYSIS]
    if _question_ids(turn):
        calls.append(P.HP_BINARY)
    if turn.annotations.pairwiseComparisons:
        calls.append(P.PAIRWISE)
    if judge and _judged(turn):
        calls.append(P.JUDGE)
    return tuple(calls)


def planned_calls(conversation: ConversationFile, judge: bool) -> int:
    """How many logical calls a replay makes when nothing fails (progress and the dry run's count)."""
    return 1 + sum(len(turn_calls(turn, judge)) for turn in conversation.turns)  # 1: post-conversation


def _golden_reply(turn: Turn) -> str | None:
    """The participant's own rewrite of the reply (SPEC 3.1 ``humanEdited``), if they wrote one."""
    alternates = turn.annotations.alternateResponses
    return alternates.humanEdited.strip() if alternates and alternates.humanEdited.strip() else None


def _judged(turn: Turn) -> bool:
    """Whether the judge has anything to do on this turn (SPEC 4 step 5).

    Its ratings are against the golden reply, so without one it only answers the
    binary questions about the draft; with neither there is no judge call.
    """
    return _golden_reply(turn) is not None or bool(_question_ids(turn))


def _question_ids(turn: Turn) -> tuple[str, ...]:
    """The questions the participant answered on this turn, in stored order (SPEC 4 step 2)."""
    return tuple(
        j.questionId
        for j in turn.annotations.binaryJudgements or []
        if j.observedBehavior is not None or j.preferredBehavior is not None or j.llmValue is not None
    )


def masked_labels(conversation_id: str, turn_number: int) -> dict[str, str]:
    """Masked labels for the candidates; which alternate is '1' is fixed per turn, not per run.

    Stable so that cache keys are reproducible; varied across turns so that an
    EM cannot learn that one position always holds the participant's reply.
    """
    digest = hashlib.sha256(f"{conversation_id}:{turn_number}".encode()).digest()
    if digest[0] % 2:
        return {
            cat.RESPONSE_ORIGINAL: P.MASK_ORIGINAL,
            cat.RESPONSE_ALTERNATE: P.MASK_ALTERNATE_2,
            cat.RESPONSE_HUMAN: P.MASK_ALTERNATE_1,
        }
    return {
        cat.RESPONSE_ORIGINAL: P.MASK_ORIGINAL,
        cat.RESPONSE_ALTERNATE: P.MASK_ALTERNATE_1,
        cat.RESPONSE_HUMAN: P.MASK_ALTERNATE_2,
    }


def _pairwise_question_text(question_id: str) -> str:
    if question_id in cat.PAIRWISE_QUESTIONS:
        return cat.PAIRWISE_QUESTIONS[question_id]
    return question_id[len(cat.CUSTOM_PAIRWISE_PREFIX) :].strip()


class ConversationView:
    """Builds call contexts for one conversation, never reaching past turn t.

    All access to the ground truth goes through here; every context carries
    transcript turns ``[:index + 1]`` only, and annotations are used solely for
    *which* questions and comparisons to ask, never for their answers.
    """

    def __init__(self, conversation: ConversationFile, config: ReplayConfig):
        self.conversation = conversation
        self.config = config
        self.omniscient = config.mode in P.OMNISCIENT_MODES
        pre = conversation.prePanas
        self.pre_items: dict[str, int] = dict(pre.items) if pre is not None else {}
        self.pre_totals = (pre.totalPositiveAffect, pre.totalNegativeAffect) if pre is not None else None

    def _base(
        self, call_type: str, visible: tuple[P.VisibleTurn, ...], turn_number: int | None, **extra: Any
    ) -> P.CallContext:
        conversation = self.conversation
        profile = None
        background = None
        if self.omniscient and call_type != P.JUDGE:
            if conversation.participant_profile is not None:
                profile = conversation.participant_profile.model_dump(mode="json", exclude_none=True)
            # blind_delta means the pre-chat mood is hidden, whatever the mode shows otherwise.
            if self.config.panas_strategy != "blind_delta":
                background = self.pre_items or None
        return P.CallContext(
            call_type=call_type,
            conversation_id=conversation.conversationId,
            category=conversation.metadata.category,
            subtopic=conversation.metadata.subtopic,
            # The judge is not the EM: it never gets the EM's verbose or omniscient extras.
            mode="default" if call_type == P.JUDGE else self.config.mode,
            turns=visible,
            turn_number=turn_number,
            profile=profile,
            background_pre_panas=background,
            **extra,
        )

    def _visible(self, index: int, with_reply: bool) -> tuple[P.VisibleTurn, ...]:
        turns = self.conversation.turns
        past = tuple(P.VisibleTurn(t.turnNumber, t.userMessage, t.llmResponse) for t in turns[:index])
        current = turns[index]
        return (
            *past,
            P.VisibleTurn(current.turnNumber, current.userMessage, current.llmResponse if with_reply else None),
        )

    def draft(self, index: int) -> P.CallContext:
        return self._base(P.DRAFT, self._visible(index, with_reply=False), self.conversation.turns[index].turnNumber)

    def analysis(self, index: int) -> P.CallContext:
        turn = self.conversation.turns[index]
        return self._base(P.ANALYSIS, self._visible(index, True), turn.turnNumber, question_ids=_question_ids(turn))

    def hp_binary(self, index: int) -> P.CallContext:
        turn = self.conversation.turns[index]
        return self._base(P.HP_BINARY, self._visible(index, True), turn.turnNumber, question_ids=_question_ids(turn))

    def pairwise(self, index: int) -> P.CallContext:
        turn = self.conversation.turns[index]
        mask = masked_labels(self.conversation.conversationId, turn.turnNumber)
        alternates = turn.annotations.alternateResponses
        texts = {
            cat.RESPONSE_ORIGINAL: turn.llmResponse,
            cat.RESPONSE_ALTERNATE: alternates.llmImproved if alternates else "",
            cat.RESPONSE_HUMAN: alternates.humanEdited if alternates else "",
        }
        by_mask = {mask[label]: text for label, text in texts.items()}
        candidates = tuple(
            P.Candidate(label, by_mask[label]) for label in (P.MASK_ORIGINAL, P.MASK_ALTERNATE_1, P.MASK_ALTERNATE_2)
        )
        comparisons = tuple(
            P.ComparisonView(
                i, c.questionId, _pairwise_question_text(c.questionId), mask[c.responseA], mask[c.responseB]
            )
            for i, c in enumerate(turn.annotations.pairwiseComparisons or [])
        )
        return self._base(
            P.PAIRWISE, self._visible(index, True), turn.turnNumber, candidates=candidates, comparisons=comparisons
        )

    def judge(self, index: int, draft: str) -> P.CallContext:
        turn = self.conversation.turns[index]
        # The judge compares the draft with the golden reply; the OM's reply to this
        # message is not part of that comparison.
        return self._base(
            P.JUDGE,
            self._visible(index, False),
            turn.turnNumber,
            question_ids=_question_ids(turn),
            draft=draft,
            golden=_golden_reply(turn),
        )

    def post(self) -> P.CallContext:
        strategy = self.config.panas_strategy
        turns = tuple(P.VisibleTurn(t.turnNumber, t.userMessage, t.llmResponse) for t in self.conversation.turns)
        return self._base(
            P.POST,
            turns,
            None,
            panas_strategy=strategy,
            pre_panas=(self.pre_items or None) if strategy == "delta" else None,
            pre_totals=self.pre_totals if strategy == "absolute" else None,
        )


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def provider_limits(specs: Iterable[EMSpec | None]) -> dict[str, ProviderLimits]:
    """The caps each provider gets when these models are replayed together.

    An EM and its judge at the same provider share one cap, so the tighter of
    their values applies to both (a model without a cap of its own sets none).
    """
    merged: dict[str, ProviderLimits] = {}
    for spec in specs:
        if spec is None:
            continue
        limits, seen = spec.limits, merged.get(spec.provider)
        if seen is not None:
            caps = [c for c in (seen.max_in_flight, limits.max_in_flight) if c is not None]
            rpms = [r for r in (seen.rpm, limits.rpm) if r is not None]
            limits = ProviderLimits(max_in_flight=min(caps) if caps else None, rpm=min(rpms) if rpms else None)
        merged[spec.provider] = limits
    return merged


class Replayer:
    """Replays conversations against one EM under one configuration.

    ``backend`` answers the EM's calls and ``judge_backend`` the judge's. The
    scheduler and cache may be shared with other replayers in the same event
    loop (several runs sharing provider limits). ``totals`` is updated live
    for progress lines.
    """

    def __init__(
        self,
        em: EMSpec,
        backend: ModelBackend,
        config: ReplayConfig = ReplayConfig(),
        *,
        judge_backend: ModelBackend | None = None,
        scheduler: Scheduler | None = None,
        cache: CallCache | None = None,
        on_result: Callable[[ReplayResult], None] | None = None,
        on_send: Callable[[int], Awaitable[None]] | None = None,
        paid_tag: str | None = None,
        recoverable: Callable[[str], bool] | None = None,
        counted_earlier: Callable[[str], bool] | None = None,
        recover: Callable[[EMSpec, list[dict[str, str]]], Awaitable[Completion | None]] | None = None,
        watch: FailureWatch | None = None,
    ) -> None:
        """``watch`` counts failures by kind and may stop the replay early (``StoppedEarly``); by default it
        only counts. ``on_send(1)`` is awaited before every request goes out (a write-ahead count of what the
        provider sees, kept even if this process dies), and ``on_send(-1)`` when one failed before it
        left (``sent=False`` on its error); ``paid_tag`` marks the answers this replayer
        pays for in the cache, and a hit whose tag ``recoverable`` accepts is this conversation's own
        answer from an interrupted attempt: counted as paid (``calls_recovered``), not as a free hit.
        A hit whose tag ``counted_earlier`` accepts is its own answer from an earlier attempt that was
        counted when it ended (``calls_reused``): paid once, by this run, and not another run's cache.

        ``recover`` is given to an attempt that follows an interrupted one: before a request goes out it
        returns the answer the dead attempt already paid for, if any (``attunebench.replay.courier``), and
        that answer is taken instead of paying again (``calls_recovered``; its request was counted by the
        write-ahead count, its cost is this attempt's)."""
        self.on_send = on_send
        self.paid_tag = paid_tag
        self.recoverable = recoverable
        self.counted_earlier = counted_earlier
        self.recover = recover
        self.em = em
        self.backend = backend
        self.config = config
        self.judge_backend = judge_backend if judge_backend is not None else backend
        self.scheduler = scheduler or Scheduler()
        self.cache: CallCache = cache if cache is not None else NullCache()
        self.on_result = on_result
        self.totals = ReplayStats()
        self.watch = watch if watch is not None else FailureWatch(stop_after=0)
        self.conversations_done = 0
        for provider, limits in provider_limits([em, config.judge]).items():
            self.scheduler.use_limits(provider, limits)

    # -- one logical call -------------------------------------------------

    async def _call(
        self, spec: EMSpec, backend: ModelBackend, ctx: P.CallContext, ledger: _Ledger, waiting_on_it: int = 0
    ) -> Answer:
        """One logical call: the cache, else the scheduler (retries) and re-asking for a usable reply.

        ``waiting_on_it`` is how many of the conversation's calls cannot start before this one
        ends; the scheduler lets the longer chains go first, so a run ends when its calls do.
        """
        messages = P.build_messages(ctx)
        role = ROLE_JUDGE if ctx.call_type == P.JUDGE else ROLE_EM
        key = spec.cache_key(messages, P.PROMPT_VERSION) if backend.cacheable else None
        if key is not None:
            cached = await self.cache.get(key)
            if cached is not None:
                try:
                    answer = parse_reply(ctx, cached.response)
                except ReplyParseError:
                    answer = None  # stored under an older validator: ask again
                if answer is not None:
                    self.watch.succeeded()
                    record = ledger.record(spec, ctx, role, attempt=1)
                    record.messages = capped_messages(messages)
                    record.reused(cached.response, cached.prompt_tokens, cached.completion_tokens, cached.cost_usd)
                    record.parsed = answer_json(answer)
                    tag = cached.paid_by
                    if tag is not None and self.recoverable is not None and self.recoverable(tag):
                        ledger.recovered(cached)
                        self.totals.calls_recovered += 1
                        self.totals.cost_spent += cached.cost_usd or 0.0
                    elif tag is not None and self.counted_earlier is not None and self.counted_earlier(tag):
                        ledger.reused(cached, own=True)
                        self.totals.calls_reused += 1
                    else:
                        ledger.reused(cached)
                        self.totals.calls_cached += 1
                        self.totals.cost_reused += cached.cost_usd or 0.0
                    return answer

        on_send = self.on_send
        recover = self.recover if backend.cacheable else None
        # A backend that must get ready before a request leaves (``CourierBackend``); the others have none.
        prepare: Callable[[], Awaitable[None]] | None = getattr(backend, "prepare", None)
        attempts: list[CallRecord] = []

        async def send(current: list[dict[str, str]]) -> Completion:
            record = ledger.record(spec, ctx, role, attempt=len(attempts) + 1)
            record.messages = capped_messages(current)
            attempts.append(record)
            if recover is not None:
                found = await recover(spec, current)
                if found is not None:
                    ledger.stats.calls_recovered += 1
                    ledger.stats.requests_recovered += 1
                    self.totals.calls_recovered += 1
                    record.reused(found.text, found.prompt_tokens, found.completion_tokens, found.cost_usd)
                    return found

            async def count(requests: int) -> None:
                record.transport_attempts += requests
                if backend.cacheable:
                    # Offline predictions (a baseline computing its answer here) are not calls: no provider
                    # sees them, so only requests to a model backend are counted as made.
                    ledger.stats.calls_made += requests
                    self.totals.calls_made += requests
                    ledger.stats.paid_requests += requests
                    if on_send is not None:
                        await on_send(requests)

            async def once() -> Completion:
                if prepare is not None:
                    await prepare()  # reach the call courier first: failing here, nothing was sent or counted
                # Counted before it goes out: a request whose answer is lost was still seen (and billed).
                await count(1)
                started = time.perf_counter()
                try:
                    completion = await backend.complete(spec, current, ctx)
                except (TransientCallError, PermanentCallError) as exc:
                    if not exc.sent:  # it never left: neither seen nor billed
                        await count(-1)
                        ledger.stats.calls_unconnected += 1
                        self.totals.calls_unconnected += 1
                        self.watch.unconnected += 1
                    self.watch.attempt_failed(reason_of(exc), f"{ctx.call_type}: {exc}", exc)  # may stop the run
                    raise
                record.latency_s = round(time.perf_counter() - started, 6)
                return completion

            completion = await self.scheduler.submit(spec.provider, once, waiting_on_it)
            record.raw_reply = capped(completion.text)
            record.prompt_tokens = completion.prompt_tokens
            record.completion_tokens = completion.completion_tokens
            record.cost_usd = completion.cost_usd
            return completion

        def parse(text: str | None) -> Answer:
            try:
                answer = parse_reply(ctx, text)
            except ReplyParseError as exc:
                self.watch.attempt_failed(UNUSABLE, f"{ctx.call_type}: {exc}")  # may stop the run
                raise
            self.watch.succeeded()
            return answer

        failure: str
        kind = NO_ANSWER
        reason = UNUSABLE
        try:
            parsed = await ask_until_valid(messages, send, lambda c: c.text, parse, self.config.parse_attempts)
        except ParseRetriesExhausted as exc:
            self._account(ledger, exc.completions)
            failure = f"unusable reply after {len(exc.completions)} attempts: {exc.errors[-1] if exc.errors else ''}"
            kind = UNUSABLE_REPLY
            for record, error in zip(attempts, exc.errors, strict=False):
                record.parse_error = error
        except RetriesExhausted as exc:
            failure = str(exc)
            reason = reason_of(exc.last)
        except PermanentCallError as exc:
            failure = f"permanent error: {exc}"
            reason = reason_of(exc)
        else:
            for record, error in zip(attempts, parsed.errors, strict=False):
                record.parse_error = error
            if attempts:
                attempts[-1].parsed = answer_json(parsed.value)
            prompt, completion, cost = self._account(ledger, parsed.completions)
            if key is not None:
                await self.cache.set(
                    key,
                    CachedCall(
                        model=spec.litellm_model,
                        prompt_version=P.PROMPT_VERSION,
                        response=parsed.text,
                        prompt_tokens=prompt,
                        completion_tokens=completion,
                        cost_usd=cost,
                        paid_by=self.paid_tag,
                        requests=len(parsed.completions),
                    ),
                )
            return parsed.value
        if attempts and attempts[-1].raw_reply is None and not attempts[-1].parse_error:
            attempts[-1].error = failure  # no reply came for the last attempt
        ledger.stats.calls_failed += 1
        self.totals.calls_failed += 1
        self.watch.call_failed(reason)
        raise CallFailed(FailedCall(ctx.turn_number, ctx.call_type, failure, kind, reason))

    def _account(self, ledger: _Ledger, completions: Sequence[Completion]) -> tuple[int, int, float | None]:
        before = (
            0,
            ledger.stats.prompt_tokens,
            ledger.stats.completion_tokens,
            ledger.stats.cost_spent,
        )
        result = ledger.paid(completions)
        self.totals.prompt_tokens += ledger.stats.prompt_tokens - before[1]
        self.totals.completion_tokens += ledger.stats.completion_tokens - before[2]
        self.totals.cost_spent += ledger.stats.cost_spent - before[3]
        self.totals.cost_unknown = self.totals.cost_unknown or ledger.stats.cost_unknown
        return result

    # -- one turn -----------------------------------------------------------

    async def _off_thread(
        self, view: ConversationView, index: int, draft: DraftAnswer, analysis: AnalysisAnswer, ledger: _Ledger
    ) -> dict[str, Any] | None:
        """Calls 3–5 of a turn, concurrently; returns the finished turn or None if it must be left out."""
        turn = view.conversation.turns[index]
        em, judge = self.em, self.config.judge
        calls = turn_calls(turn, judge is not None)
        jobs: dict[str, Any] = {}
        if P.HP_BINARY in calls:
            jobs[P.HP_BINARY] = self._call(em, self.backend, view.hp_binary(index), ledger)
        if P.PAIRWISE in calls:
            jobs[P.PAIRWISE] = self._call(em, self.backend, view.pairwise(index), ledger)
        if judge is not None and P.JUDGE in calls:
            jobs[P.JUDGE] = self._call(judge, self.judge_backend, view.judge(index, draft.response), ledger)
        results = dict(zip(jobs, await asyncio.gather(*jobs.values(), return_exceptions=True), strict=False))
        keep = True
        for name, result in results.items():
            if isinstance(result, CallFailed):
                ledger.failures.append(result.failure)
                if name != P.JUDGE:
                    keep = False
            elif isinstance(result, BaseException):
                raise result
        if not keep:
            return None
        hp = results.get(P.HP_BINARY)
        pairwise = results.get(P.PAIRWISE)
        judged = results.get(P.JUDGE)
        reasoning = {P.DRAFT: draft.reasoning, P.ANALYSIS: analysis.reasoning}
        if isinstance(hp, BinaryAnswer):
            reasoning[P.HP_BINARY] = hp.reasoning
        if isinstance(pairwise, PairwiseAnswer):
            reasoning[P.PAIRWISE] = pairwise.reasoning
        if self.config.mode in P.VERBOSE_MODES:
            ledger.reasoning[str(turn.turnNumber)] = {k: v for k, v in reasoning.items() if v}
        return {
            "turnNumber": turn.turnNumber,
            "em_emotion_tags": analysis.emotion_tags,
            "em_drafted_response": draft.response,
            "em_binary_om_assessment": analysis.om,
            "em_binary_human_prediction": analysis.human,
            "em_binary_om_assessment_hp": hp.om if isinstance(hp, BinaryAnswer) else {},
            "em_binary_human_prediction_hp": hp.human if isinstance(hp, BinaryAnswer) else {},
            "em_pairwise_selections": pairwise.selections if isinstance(pairwise, PairwiseAnswer) else {},
            "em_draft_judge_scores": judged.scores if isinstance(judged, JudgeAnswer) else None,
            "em_draft_binary_assessment": judged.binary if isinstance(judged, JudgeAnswer) else None,
        }

    # -- one conversation -------------------------------------------------------

    async def replay(self, conversation: ConversationFile) -> ReplayResult:
        """Replay one conversation; never raises for model failures (they are recorded)."""
        started = datetime.now(UTC)
        clock = time.perf_counter()
        view = ConversationView(conversation, self.config)
        ledger = _Ledger()
        pending: list[asyncio.Task[dict[str, Any] | None]] = []
        try:
            turn_count = len(conversation.turns)
            for index in range(turn_count):
                # The chain after this turn's draft: its analysis, two calls per later turn, the post call.
                after_draft = 2 * (turn_count - index - 1) + 2
                try:
                    draft = await self._call(self.em, self.backend, view.draft(index), ledger, after_draft)
                    analysis = await self._call(self.em, self.backend, view.analysis(index), ledger, after_draft - 1)
                except CallFailed as exc:
                    ledger.failures.append(exc.failure)
                    continue  # the thread holds only the transcript, so turn t+1 can go on
                assert isinstance(draft, DraftAnswer) and isinstance(analysis, AnalysisAnswer)
                pending.append(asyncio.ensure_future(self._off_thread(view, index, draft, analysis, ledger)))
            post = None
            try:
                post = await self._call(self.em, self.backend, view.post(), ledger)
            except CallFailed as exc:
                ledger.failures.append(exc.failure)
            turns = [t for t in await asyncio.gather(*pending) if t is not None]
        except BaseException:
            for task in pending:
                task.cancel()
            raise
        output = self._output(conversation, view, turns, post, ledger, started, time.perf_counter() - clock)
        result = ReplayResult(output=output, stats=ledger.stats, failures=ledger.failures, calls=ledger.calls)
        self.conversations_done += 1
        if self.on_result is not None:
            self.on_result(result)
        return result

    def _output(
        self,
        conversation: ConversationFile,
        view: ConversationView,
        turns: list[dict[str, Any]],
        post: Answer | None,
        ledger: _Ledger,
        started: datetime,
        seconds: float,
    ) -> RunOutput:
        post_conversation = None
        if isinstance(post, PostAnswer):
            if post.is_change:
                # delta / blind_delta: post = pre + change, clamped (SPEC 4); an item
                # without a pre rating starts from the scale midpoint.
                items = {
                    item: _clamp((view.pre_items.get(item, 4)) + change, cat.PANAS_SCALE_MIN, cat.PANAS_SCALE_MAX)
                    for item, change in post.panas.items()
                }
            else:
                items = dict(post.panas)
            post_conversation = {
                "panas_strategy": self.config.panas_strategy,
                "predicted_post_panas": {"items": items},
                "predicted_conversation_wide": post.conversation_wide,
            }
            if post.reasoning and self.config.mode in P.VERBOSE_MODES:
                ledger.reasoning["post"] = {P.POST: post.reasoning}
        document: dict[str, Any] = {
            "conversationId": conversation.conversationId,
            "em_model": self.em.name,
            "mode": self.config.mode,
            "run_timestamp": format_timestamp(started),
            "turns": turns,
            "post_conversation": post_conversation,
            "api_cost": round(ledger.output_cost, 8) if ledger.output_cost_known else None,
            "duration_seconds": round(seconds, 3),
            "prompt_version": P.PROMPT_VERSION,
            "judge_model": self.config.judge.name if self.config.judge else None,
            "failed_calls": [f.to_dict() for f in ledger.failures],
            "usage": ledger.stats.to_dict(),
        }
        if self.config.mode in P.VERBOSE_MODES:
            document["em_reasoning"] = ledger.reasoning
        return parse_run(document, f"replay of {conversation.conversationId}")

    async def replay_many(
        self, conversations: Iterable[ConversationFile], max_in_flight: int | None = None
    ) -> list[ReplayResult]:
        """Replay conversations concurrently; results in input order.

        ``max_in_flight`` bounds conversations in progress (memory), not calls:
        the scheduler bounds calls. The default keeps enough conversations
        open to saturate the scheduler's global cap.
        """
        items = list(conversations)
        limit = max_in_flight or max(4, 2 * self.scheduler.max_concurrency)
        gate = asyncio.Semaphore(limit)

        async def one(conversation: ConversationFile) -> ReplayResult:
            async with gate:
                return await self.replay(conversation)

        # Started longest chain first (the gate lets them in in this order), so the run does not end waiting
        # on a long conversation begun last; the results stay in input order.
        started = {i: asyncio.ensure_future(one(items[i])) for i in longest_first(items)}
        tasks = [started[i] for i in range(len(items))]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # One conversation's error ends the replay (a stop, a cancellation): the others stop with it.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def replay_claimed(
        self,
        conversations: Sequence[ConversationFile],
        claim: Callable[[], int | None],
        open_conversations: int,
        on_done: Callable[[int, ReplayResult], None] | None = None,
    ) -> list[tuple[int, ReplayResult]]:
        """Replay the conversations ``claim()`` hands out (their positions; None when none is left), keeping
        ``open_conversations`` of them in progress; (position, result) pairs in the order they finished.

        For several processes sharing one list of work: each takes the next conversation only when it has
        room for one, so none holds work another could start, and all stop together when the work ends.
        ``on_done(position, result)`` is called as each conversation finishes, so its result can be passed on
        (and its file and score prepared) while the others still run.
        """

        async def worker() -> list[tuple[int, ReplayResult]]:
            done: list[tuple[int, ReplayResult]] = []
            while (position := claim()) is not None:
                result = await self.replay(conversations[position])
                done.append((position, result))
                if on_done is not None:
                    on_done(position, result)
            return done

        workers = [asyncio.ensure_future(worker()) for _ in range(max(1, open_conversations))]
        try:
            finished = await asyncio.gather(*workers)
        except BaseException:
            for task in workers:  # one conversation's error ends the replay, as in replay_many
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        return [pair for part in finished for pair in part]


def longest_first(conversations: Sequence[ConversationFile]) -> list[int]:
    """Positions of ``conversations``, longest sequential chain first (ties in their order): the order to start
    them in, so the last to start are the quickest to finish."""
    return sorted(range(len(conversations)), key=lambda i: -critical_path_calls(conversations[i]))


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """Rough prompt size (4 characters per token) for dry-run cost estimates."""
    return math.ceil(sum(len(m["content"]) for m in messages) / 4)


# Typical answer sizes in tokens, per call type, for dry-run estimates.
EXPECTED_OUTPUT_TOKENS: dict[str, int] = {
    P.DRAFT: 120,
    P.ANALYSIS: 160,
    P.HP_BINARY: 120,
    P.PAIRWISE: 40,
    P.JUDGE: 120,
    P.POST: 260,
}


# (role "em" or "judge", call type, prompt tokens, expected output tokens)
PlannedCall = tuple[str, str, int, int]


def dry_run_plan(conversations: Iterable[ConversationFile], config: ReplayConfig) -> list[PlannedCall]:
    """One ``PlannedCall`` for every call a replay would make when nothing fails.

    The thread holds no EM answers, so every prompt is known in advance —
    except the judge's, which embeds the draft: it is sized with an empty draft
    plus the expected draft length.
    """
    plan: list[PlannedCall] = []
    for conversation in conversations:
        view = ConversationView(conversation, config)
        em_contexts = {
            P.DRAFT: view.draft,
            P.ANALYSIS: view.analysis,
            P.HP_BINARY: view.hp_binary,
            P.PAIRWISE: view.pairwise,
        }
        for index, turn in enumerate(conversation.turns):
            calls = turn_calls(turn, config.judge is not None)
            for call in calls:
                if call in em_contexts:
                    ctx = em_contexts[call](index)
                    plan.append(("em", call, estimate_tokens(P.build_messages(ctx)), EXPECTED_OUTPUT_TOKENS[call]))
            if P.JUDGE in calls:
                judge_ctx = view.judge(index, "")
                plan.append(
                    (
                        "judge",
                        P.JUDGE,
                        estimate_tokens(P.build_messages(judge_ctx)) + EXPECTED_OUTPUT_TOKENS[P.DRAFT],
                        EXPECTED_OUTPUT_TOKENS[P.JUDGE],
                    )
                )
        ctx = view.post()
        plan.append(("em", P.POST, estimate_tokens(P.build_messages(ctx)), EXPECTED_OUTPUT_TOKENS[P.POST]))
    return plan
