"""The replay service: evaluation runs stored in the database, replayed in-process or by Celery workers.

This is the Django side of issue 4. The replay protocol itself is pure
(``attunebench.replay``); here live the pieces that need the database or Redis:

- ``em_spec``                the registry row (EvaluatedModel) as an EMSpec
- ``DatabaseCallCache``      ModelCallCache rows as the call cache (durable)
- ``RedisCallCache``         the same entries in Redis when REDIS_URL is set (fast, shared)
- ``redis_limits``           requests per minute and requests in flight per provider, shared by
                             every worker through Redis
- ``do_prepare_run``         one RunConversation row per selected conversation
- ``do_replay_conversation`` claim, replay, store and count one conversation (idempotent)
- ``do_score_evaluation_run`` (from scoring.run_scoring) scores a finished run when it ends
- ``scoring.run_control`` starts, resumes and cancels runs (what the research launcher calls)

Checkpointing is per conversation (RunConversation.status/output) and per call
(the call cache): a killed worker's conversation is redelivered (acks_late)
and replays from the cache without paying again; finished conversations are
skipped outright.

Live models (kind "llm") are refused unless ATTUNE_ALLOW_LIVE_MODELS is set or
the model is served from this machine (api_base on a loopback address), so a
demo can never spend money.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from attunebench import canonical as cf
from attunebench.replay.aio import run_sync
from attunebench.replay.cache import CachedCall, CallCache, LayeredCache, MemoryCache
from attunebench.replay.llm import KIND_LLM, KIND_OFFLINE, EMSpec
from attunebench.replay.prompts import PROMPT_VERSION
from attunebench.replay.protocol import ReplayConfig, ReplayResult, provider_limits
from attunebench.replay.run import make_replayer
from attunebench.replay.scheduler import Scheduler, describe_limits
from collection.models import Conversation
from datasets.exchange import conversation_to_canonical, with_export_relations
from datasets.selection import selection_queryset
from scoring.models import EvaluatedModel, EvaluationRun, ModelCallCache, RunConversation
from scoring.provider_access import allowed_key_env, api_base_problem
from scoring.provider_access import is_loopback as _is_loopback
from scoring.redis_limits import RedisInFlightSlots, RedisRateLimiter
from scoring.run_scoring import do_score_evaluation_run
from scoring.transcripts import save_call_records

logger = logging.getLogger("attune.replay")

REDIS_CACHE_PREFIX = "attune:call:"

ACTIVE_STATUSES = (EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING, EvaluationRun.Status.SCORING)


class ReplayRefused(ValueError):
    """A run that cannot be replayed as configured (human rater, live model not allowed, ...)."""


# ---------------------------------------------------------------------------
# Registry → spec
# ---------------------------------------------------------------------------


def live_calls_allowed(model: EvaluatedModel) -> bool:
    """Whether replaying ``model`` may call it: offline, served on this machine, or live models allowed."""
    if model.kind != EvaluatedModel.Kind.LLM:
        return True
    return bool(settings.ATTUNE_ALLOW_LIVE_MODELS or (model.api_base and _is_loopback(model.api_base)))


def em_spec(model: EvaluatedModel) -> EMSpec:
    """The pure spec of a registry row; refuses what cannot (or may not) be replayed."""
    if not live_calls_allowed(model):
        raise ReplayRefused(
            f"{model.name} is a live model and ATTUNE_ALLOW_LIVE_MODELS is not set; set it to allow paid calls"
        )
    if model.kind == EvaluatedModel.Kind.LLM and (
        problem := api_base_problem(model.api_base, live=settings.ATTUNE_ALLOW_LIVE_MODELS)
    ):
        raise ReplayRefused(f"{model.name}: {problem}")
    return registry_spec(model)


def registry_spec(model: EvaluatedModel) -> EMSpec:
    """The pure spec of a registry row, whether or not it may be called now (dry runs price it anyway)."""
    if model.kind == EvaluatedModel.Kind.HUMAN:
        raise ReplayRefused(f"{model.name} is a human rater: humans take part through assignments, not replay")
    if model.kind == EvaluatedModel.Kind.OFFLINE:
        return EMSpec(name=model.name, kind=KIND_OFFLINE, litellm_model=model.name)
    try:
        return EMSpec(
            name=model.name,
            kind=KIND_LLM,
            litellm_model=model.litellm_model or model.name,
            api_base=model.api_base or None,
            params=dict(model.params or {}),
            max_in_flight=model.max_concurrency,
            rpm=model.requests_per_minute,
            input_cost_per_million=model.input_cost_per_million,
            output_cost_per_million=model.output_cost_per_million,
            allowed_key_env=allowed_key_env(),
        )
    except ValueError as exc:  # params refused by the core (a stored key, a key variable off the list)
        raise ReplayRefused(str(exc)) from exc


def spec_for_name(name: str) -> EMSpec:
    """A spec by registry name; ``baseline:*`` works without a registry row."""
    model = EvaluatedModel.objects.filter(name=name).first()
    if model is not None:
        return em_spec(model)
    if name.startswith("baseline:"):
        return EMSpec(name=name, kind=KIND_OFFLINE, litellm_model=name)
    return EMSpec(name=name, litellm_model=name, allowed_key_env=allowed_key_env())


def run_limits(run: EvaluationRun) -> list[str]:
    """What bounds a run's calls in a worker, one line per provider (run page, ``attune eval``).

    A worker's scheduler takes ATTUNE_REPLAY_CONCURRENCY calls at most; a
    registered model's max_concurrency and requests per minute cap its provider
    further (across all workers when Redis is configured).
    """
    try:
        specs = [registry_spec(run.evaluated_model)]
        if run.judge_model is not None:
            specs.append(registry_spec(run.judge_model))
    except ReplayRefused:
        return []
    return [
        describe_limits(provider, limits, settings.ATTUNE_REPLAY_CONCURRENCY, "ATTUNE_REPLAY_CONCURRENCY")
        for provider, limits in sorted(provider_limits(specs).items())
        if provider != "offline"
    ]


def run_config(run: EvaluationRun) -> ReplayConfig:
    judge = em_spec(run.judge_model) if run.judge_model is not None else None
    return ReplayConfig(mode=run.mode, panas_strategy=run.panas_strategy, judge=judge)


# ---------------------------------------------------------------------------
# Caches and limits backed by the database and Redis
# ---------------------------------------------------------------------------


class DatabaseCallCache:
    """ModelCallCache rows. ORM calls run in a small thread pool: the replay loop must not block.

    SQLite allows one writer at a time (and a shared in-memory test database
    none concurrently), so it gets a single thread; other databases get a few.
    """

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from django.db import connection

        workers = 1 if connection.vendor == "sqlite" else 4
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attune-call-cache")

    async def _run(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._reconnecting, function, *args)

    @staticmethod
    def _reconnecting(function: Any, *args: Any) -> Any:
        """Run an ORM call; once, on a dropped connection, reconnect and try again.

        These pool threads live as long as the worker, outside the request/task
        cycle in which Django normally recycles connections.
        """
        from django.db import InterfaceError, OperationalError, connection

        try:
            return function(*args)
        except (OperationalError, InterfaceError):
            connection.close()
            return function(*args)

    @staticmethod
    def _get(key: str) -> CachedCall | None:
        row = (
            ModelCallCache.objects.filter(key=key)
            .values("model", "prompt_version", "response", "usage", "cost_usd")
            .first()
        )
        if row is None:
            return None
        usage = row["usage"] or {}
        return CachedCall(
            model=row["model"],
            prompt_version=row["prompt_version"],
            response=row["response"],
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cost_usd=row["cost_usd"],
        )

    @staticmethod
    def _set(key: str, value: CachedCall) -> None:
        # ignore_conflicts: two workers finishing the same call store it once, neither fails.
        ModelCallCache.objects.bulk_create(
            [
                ModelCallCache(
                    key=key,
                    model=value.model[:200],
                    prompt_version=value.prompt_version[:40],
                    response=value.response,
                    usage={"prompt_tokens": value.prompt_tokens, "completion_tokens": value.completion_tokens},
                    cost_usd=value.cost_usd,
                )
            ],
            ignore_conflicts=True,
        )

    async def get(self, key: str) -> CachedCall | None:
        return await self._run(self._get, key)

    async def set(self, key: str, value: CachedCall) -> None:
        await self._run(self._set, key, value)


class RedisCallCache:
    """Cache entries in Redis, shared by every worker; the client is bound to the process loop.

    Redis is only the fast shared layer in front of the database, so when it
    fails the replay goes on with the other layers: the failure is logged, and
    a conversation is not lost for want of a cache.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None
        self._errors: tuple[type[Exception], ...] = ()
        self.failures = 0
        self._last_logged = -float("inf")

    def _failed(self, action: str, exc: Exception) -> None:
        # One line per minute at most: an outage must be visible, not flood the log per call.
        self.failures += 1
        now = time.monotonic()
        if now - self._last_logged >= 60:
            self._last_logged = now
            logger.warning(
                "Redis call cache %s failed (%s: %s); going on with the database cache (%d failures so far)",
                action,
                type(exc).__name__,
                exc,
                self.failures,
            )

    def _redis(self) -> Any:
        if self._client is None:
            import redis.asyncio as aioredis  # ~90 ms: only once Redis is actually used
            from redis.exceptions import RedisError

            # Bounded waits: a Redis that hangs must not stall the replay it only speeds up.
            self._client = aioredis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=5)
            self._errors = (RedisError, OSError)
        return self._client

    async def get(self, key: str) -> CachedCall | None:
        client = self._redis()
        try:
            raw = await client.get(REDIS_CACHE_PREFIX + key)
        except self._errors as exc:
            self._failed("read", exc)
            return None
        if raw is None:
            return None
        try:
            return CachedCall.from_dict(json.loads(raw))
        except (ValueError, KeyError, TypeError):
            return None

    async def set(self, key: str, value: CachedCall) -> None:
        client = self._redis()
        try:
            await client.set(REDIS_CACHE_PREFIX + key, json.dumps(value.to_dict()), nx=True)
        except self._errors as exc:
            self._failed("write", exc)


# What a worker process keeps between tasks, and how much of it.
#: Validated model answers held in memory in front of Redis and the database
#: (a few KB each: about 50 MB at most per worker process).
MEMORY_CACHE_ENTRIES = 10_000
#: Runs whose whole dataset (baseline:prior's leave-one-out tallies) is held in memory.
#: A dataset is every conversation of a run, so only the most recently used are kept.
DATASETS_KEPT = 2


@dataclass
class ProcessState:
    """One worker process's long-lived replay state; a forked child starts from a fresh one."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduler: Scheduler | None = None
    cache: CallCache | None = None
    datasets: OrderedDict[int, list[cf.ConversationFile]] = field(default_factory=OrderedDict)


_state = ProcessState()


def reset_process_state() -> None:
    """Forget this process's replay state (registered once, to run in every forked child).

    A Celery prefork child inherits its parent's objects but not its threads or
    connections, so it must not reuse the parent's scheduler, clients or lock.
    """
    global _state
    _state = ProcessState()


os.register_at_fork(after_in_child=reset_process_state)


def _process_scheduler() -> Scheduler:
    """One scheduler per worker process: provider caps hold across the conversations it runs."""
    state = _state
    with state.lock:
        if state.scheduler is None:
            redis_url = settings.REDIS_URL
            state.scheduler = Scheduler(
                max_concurrency=settings.ATTUNE_REPLAY_CONCURRENCY,
                rate_limiter=RedisRateLimiter(redis_url) if redis_url else None,
                shared_slots=RedisInFlightSlots(redis_url) if redis_url else None,
            )
        return state.scheduler


def build_cache() -> CallCache:
    """Memory (bounded, least recently used dropped first) over Redis when configured over the database."""
    state = _state
    with state.lock:
        if state.cache is None:
            layers: list[CallCache] = [MemoryCache(maxsize=MEMORY_CACHE_ENTRIES)]
            if settings.REDIS_URL:
                layers.append(RedisCallCache(settings.REDIS_URL))
            layers.append(DatabaseCallCache())
            state.cache = LayeredCache(*layers)
        return state.cache


# ---------------------------------------------------------------------------
# Conversations of a run
# ---------------------------------------------------------------------------


def run_selection(run: EvaluationRun) -> QuerySet[Conversation]:
    """The conversations a run names: its dataset version or its saved selection filter."""
    categories = list((run.selection or {}).get("topic_categories") or [])
    return selection_queryset(categories or None, run.dataset_version)


def load_canonical(conversation_pks: Sequence[int]) -> dict[int, cf.ConversationFile]:
    """Canonical documents by primary key, in a fixed number of queries."""
    rows = with_export_relations(Conversation.objects.filter(pk__in=list(conversation_pks)))
    return {c.pk: conversation_to_canonical(c, include_model_identity=True) for c in rows}


def _dataset_for(run: EvaluationRun) -> list[cf.ConversationFile]:
    """The run's conversations, for baseline:prior's leave-one-out tallies (kept for DATASETS_KEPT runs)."""
    state = _state
    with state.lock:
        cached = state.datasets.get(run.pk)
        if cached is not None:
            state.datasets.move_to_end(run.pk)
            return cached
    pks = list(RunConversation.objects.filter(run=run).values_list("conversation_id", flat=True))
    documents = list(load_canonical(pks).values())
    with state.lock:
        state.datasets[run.pk] = documents
        while len(state.datasets) > DATASETS_KEPT:
            state.datasets.popitem(last=False)
    return documents


def do_prepare_run(run_id: int) -> list[int]:
    """Create the run's RunConversation rows (once) and mark it queued; returns ids still to do.

    The run says "running" only once a worker takes its first conversation
    (``_mark_running``): with no worker up, "running" would be a false promise.
    """
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        existing = set(RunConversation.objects.filter(run=run).values_list("conversation_id", flat=True))
        if not existing:
            pks = list(run_selection(run).values_list("pk", flat=True))
            RunConversation.objects.bulk_create(
                [RunConversation(run=run, conversation_id=pk) for pk in pks], ignore_conflicts=True
            )
        total = RunConversation.objects.filter(run=run).count()
        run.conversations_total = total
        run.prompt_version = PROMPT_VERSION
        run.status = EvaluationRun.Status.QUEUED
        run.finished_at = None
        run.error = ""
        run.save(update_fields=["conversations_total", "prompt_version", "status", "finished_at", "error"])
    return list(
        RunConversation.objects.filter(run_id=run_id)
        .exclude(status=RunConversation.Status.DONE)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _mark_running(run: EvaluationRun) -> None:
    """A worker took one of a queued run's conversations: the run is running from now on.

    Conditional, so a run cancelled meanwhile stays cancelled; ``started_at``
    keeps the first start across resumes.
    """
    if run.status == EvaluationRun.Status.QUEUED:
        EvaluationRun.objects.filter(pk=run.pk, status=EvaluationRun.Status.QUEUED).update(
            status=EvaluationRun.Status.RUNNING, started_at=Coalesce(F("started_at"), Now())
        )


def _claim(run_conversation_id: int) -> RunConversation | None:
    """Mark a conversation running unless it is already done (idempotent redelivery)."""
    # PENDING or RUNNING (a redelivery after a worker died) may go; DONE and FAILED are
    # final until resume_run puts failed ones back to PENDING.
    changed = RunConversation.objects.filter(
        pk=run_conversation_id, status__in=[RunConversation.Status.PENDING, RunConversation.Status.RUNNING]
    ).update(status=RunConversation.Status.RUNNING)
    if not changed:
        return None
    return RunConversation.objects.select_related("run", "run__evaluated_model", "run__judge_model").get(
        pk=run_conversation_id
    )


def _store(item: RunConversation, result: ReplayResult) -> bool:
    """Write the output and add its counts to the run, exactly once per conversation."""
    output = result.output
    usable = result.scoreable
    status = RunConversation.Status.DONE if usable else RunConversation.Status.FAILED
    stats = result.stats
    cost = output.api_cost or 0.0
    errors = "; ".join(f"turn {f.turn_number} {f.call_type}: {f.error}" for f in result.failures)
    with transaction.atomic():
        # Only the delivery that moves RUNNING → final counts; a duplicate finds nothing to move.
        moved = RunConversation.objects.filter(pk=item.pk, status=RunConversation.Status.RUNNING).update(
            status=status,
            output=cf.to_canonical_dict(output),
            calls_made=stats.calls_made,
            calls_cached=stats.calls_cached,
            calls_failed=stats.calls_failed,
            cost_usd=cost,
            error=errors[:5000],
        )
        if moved:
            EvaluationRun.objects.filter(pk=item.run_id).update(
                conversations_done=F("conversations_done") + (1 if usable else 0),
                conversations_failed=F("conversations_failed") + (0 if usable else 1),
                calls_made=F("calls_made") + stats.calls_made,
                calls_cached=F("calls_cached") + stats.calls_cached,
                calls_failed=F("calls_failed") + stats.calls_failed,
                cost_usd=F("cost_usd") + stats.cost_spent,
            )
    return bool(moved)


def do_replay_conversation(run_conversation_id: int) -> dict[str, Any]:
    """Replay one conversation of a run and store its output; safe to call twice.

    Returns a small JSON-able summary (it travels through the Celery result
    backend into the chord callback).
    """
    item = _claim(run_conversation_id)
    if item is None:
        return {"run_conversation": run_conversation_id, "skipped": "already finished"}
    run = item.run
    if run.status == EvaluationRun.Status.CANCELLED:
        RunConversation.objects.filter(pk=item.pk, status=RunConversation.Status.RUNNING).update(
            status=RunConversation.Status.PENDING
        )
        return {"run_conversation": run_conversation_id, "skipped": "run cancelled"}
    _mark_running(run)
    try:
        spec = em_spec(run.evaluated_model)
        config = run_config(run)
        conversation = load_canonical([item.conversation_id])[item.conversation_id]
        dataset = _dataset_for(run) if spec.name == "baseline:prior" else []
    except Exception as exc:  # configuration problems fail this conversation, visibly
        moved = RunConversation.objects.filter(pk=item.pk, status=RunConversation.Status.RUNNING).update(
            status=RunConversation.Status.FAILED, error=str(exc)[:5000]
        )
        if moved:
            EvaluationRun.objects.filter(pk=run.pk).update(
                conversations_failed=F("conversations_failed") + 1, error=str(exc)[:2000]
            )
        return {"run_conversation": run_conversation_id, "failed": str(exc)}
    replayer = make_replayer(spec, config, dataset=dataset, scheduler=_process_scheduler(), cache=build_cache())
    result = run_sync(replayer.replay(conversation))
    stored = _store(item, result)
    if stored:
        save_call_records(item.pk, result.calls)
    logger.info(
        "run %s conversation %s: %s calls made, %s cached, %s failed",
        run.pk,
        conversation.conversationId,
        result.stats.calls_made,
        result.stats.calls_cached,
        result.stats.calls_failed,
    )
    return {"run_conversation": run_conversation_id, "stored": stored, **result.stats.to_dict()}


# ---------------------------------------------------------------------------
# Scoring and run life cycle
# ---------------------------------------------------------------------------


def do_finalize_run(run_id: int) -> str:
    """Score a run whose conversations have all been attempted; returns the final status."""
    # Queued too: a resumed run with nothing left to replay goes straight to scoring.
    moved = EvaluationRun.objects.filter(
        pk=run_id, status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING]
    ).update(status=EvaluationRun.Status.SCORING)
    if not moved:
        return EvaluationRun.objects.get(pk=run_id).status  # cancelled, or finalized by a duplicate
    try:
        do_score_evaluation_run(run_id)
    except Exception as exc:
        EvaluationRun.objects.filter(pk=run_id).update(
            status=EvaluationRun.Status.FAILED, error=f"scoring failed: {exc}"[:2000], finished_at=timezone.now()
        )
        raise
    run = EvaluationRun.objects.get(pk=run_id)
    final = EvaluationRun.Status.DONE if run.conversations_done else EvaluationRun.Status.FAILED
    EvaluationRun.objects.filter(pk=run_id).update(status=final, finished_at=timezone.now())
    return final


def run_progress(run_id: int) -> dict[str, Any]:
    """Status and counters of a run, as the dashboard and the CLI show them."""
    run = EvaluationRun.objects.get(pk=run_id)
    return {
        "status": run.status,
        "conversations_total": run.conversations_total,
        "conversations_done": run.conversations_done,
        "conversations_failed": run.conversations_failed,
        "calls_made": run.calls_made,
        "calls_cached": run.calls_cached,
        "calls_failed": run.calls_failed,
        "cost_usd": run.cost_usd,
        "percent": run.progress_percent,
    }


def do_create_run(
    model_name: str,
    mode: str,
    panas_strategy: str = "absolute",
    judge_name: str | None = None,
    conversation_ids: Sequence[str] | None = None,
) -> EvaluationRun:
    """A queued run over the given conversations (default: all complete ones), registering baselines on demand."""

    def registry(name: str) -> EvaluatedModel:
        kind = EvaluatedModel.Kind.OFFLINE if name.startswith("baseline:") else EvaluatedModel.Kind.LLM
        model, _ = EvaluatedModel.objects.get_or_create(
            name=name, defaults={"kind": kind, "litellm_model": "" if kind == EvaluatedModel.Kind.OFFLINE else name}
        )
        return model

    ReplayConfig(mode=mode, panas_strategy=panas_strategy)  # validates both
    selection: dict[str, Any] = {"status": "complete"}
    if conversation_ids is not None:
        selection = {"conversation_ids": list(conversation_ids)}
    with transaction.atomic():
        run = EvaluationRun.objects.create(
            evaluated_model=registry(model_name),
            judge_model=registry(judge_name) if judge_name else None,
            mode=mode,
            panas_strategy=panas_strategy,
            selection=selection,
            prompt_version=PROMPT_VERSION,
        )
        if conversation_ids is not None:
            pks = list(
                Conversation.objects.filter(conversation_id__in=list(conversation_ids)).values_list("pk", flat=True)
            )
            RunConversation.objects.bulk_create([RunConversation(run=run, conversation_id=pk) for pk in pks])
            run.conversations_total = len(pks)
            run.save(update_fields=["conversations_total"])
    return run
