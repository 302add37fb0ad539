"""The replay service: evaluation runs stored in the database, replayed in-process or by Celery workers.

This is the Django side of the replay engine. The replay protocol itself is pure
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
(the call cache, written before an answer is used). A worker replays a
conversation under a lease it renews every quarter of
ATTUNE_REPLAY_LEASE_SECONDS; only the holder stores the output, and a
conversation is claimed again only once its lease has lapsed, so it is never
replayed twice at once. A killed worker's conversations are requeued by any
live worker's sweeper (``scoring.run_control.sweep``) once their leases lapse,
and replay from the cache without paying again; finished conversations are
skipped outright.

Live models (kind "llm") are refused unless ATTUNE_ALLOW_LIVE_MODELS is set or
the model is served from this machine (api_base on a loopback address), so a
demo can never spend money.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import BooleanField, DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from attunebench import canonical as cf
from attunebench.replay.aio import Abandoned, process_loop, run_sync_beating
from attunebench.replay.baselines import PriorTally
from attunebench.replay.cache import CachedCall, CallCache, LayeredCache, MemoryCache, OwnAnswersCache
from attunebench.replay.courier import CourierBackend, CourierConnection
from attunebench.replay.llm import KIND_LLM, KIND_OFFLINE, EMSpec, warm_up
from attunebench.replay.prompts import PROMPT_VERSION
from attunebench.replay.protocol import ReplayConfig, Replayer, ReplayResult, provider_limits
from attunebench.replay.run import make_replayer
from attunebench.replay.scheduler import Scheduler, describe_limits
from collection.models import Conversation, OriginalModel
from datasets.exchange import conversation_to_canonical, with_export_relations, withdrawn_conversations
from datasets.selection import selection_queryset
from scoring import ops_metrics
from scoring.call_courier import CourierProcess, RedisJournal, journal_recovery
from scoring.models import LEGACY_PAID_KEY, EvaluatedModel, EvaluationRun, ModelCallCache, RunConversation
from scoring.provider_access import allowed_key_env, api_base_problem
from scoring.provider_access import is_loopback as _is_loopback
from scoring.redis_limits import RedisInFlightSlots, RedisRateLimiter
from scoring.run_gaps import count_gaps
from scoring.run_scoring import do_score_evaluation_run
from scoring.transcripts import save_call_records

logger = logging.getLogger("attune.replay")

REDIS_CACHE_PREFIX = "attune:call:"
# The Redis copy of a cached answer (a few KB) expires; the database keeps the durable one, and a later read
# that finds it there puts it back in Redis. Redis is also the broker: the copy must not grow without bound.
REDIS_CACHE_TTL_SECONDS = 7 * 24 * 3600

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
        spec = EMSpec(
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
    if (spec.max_in_flight is not None or spec.rpm is not None) and spec.provider in participant_providers():
        share = settings.ATTUNE_REPLAY_PROVIDER_SHARE
        spec = dataclasses.replace(
            spec, max_in_flight=_share_of(spec.max_in_flight, share), rpm=_share_of(spec.rpm, share)
        )
    return spec


def _share_of(cap: int | None, share: float) -> int | None:
    return None if cap is None else max(1, math.floor(cap * share))


def participant_providers() -> set[str]:
    """Providers the live participant chat calls (original models, their fallbacks, the rewrite model).

    A replay at a provider one of these shares leaves the participants ATTUNE_REPLAY_PROVIDER_SHARE's
    complement of its caps: a run at the provider's full rate limit would otherwise make their replies fail.
    """
    if not settings.ATTUNE_ALLOW_LIVE_MODELS:
        return set()
    endpoints: set[tuple[str, str]] = set()
    for model, base, fallback, fallback_base in OriginalModel.objects.exclude(litellm_model="").values_list(
        "litellm_model", "api_base", "fallback_litellm_model", "fallback_api_base"
    ):
        endpoints.add((model, base))
        if fallback:
            endpoints.add((fallback, fallback_base))
    if settings.ATTUNE_ALTERNATE_MODEL:
        endpoints.add((settings.ATTUNE_ALTERNATE_MODEL, settings.ATTUNE_ALTERNATE_API_BASE))
    return {EMSpec(name=model, litellm_model=model, api_base=base or None).provider for model, base in endpoints}


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


def _db_pool() -> Any:
    """The process's threads for ORM calls made from the replay loop (cache rows, sent counts).

    SQLite allows one writer at a time (and a shared in-memory test database
    none concurrently), so it gets a single thread; other databases get a few.
    """
    state = _state
    with state.lock:
        if state.db_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            from django.db import connection

            workers = 1 if connection.vendor == "sqlite" else 4
            state.db_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attune-replay-db")
        return state.db_pool


class DatabaseCallCache:
    """ModelCallCache rows. ORM calls run in a small thread pool (``_db_pool``): the replay loop must not block.

    ``replace``: a write replaces the entry under its key (a run asked to call afresh: its newer answer
    is the one later runs reuse); otherwise the first answer stored is kept.
    """

    def __init__(self, replace: bool = False) -> None:
        self.replace = replace

    async def _run(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(_db_pool(), self._reconnecting, function, *args)

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
            .values("model", "prompt_version", "response", "usage", "cost_usd", "paid_by", "requests")
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
            paid_by=row["paid_by"] or None,
            requests=row["requests"] or 1,
        )

    @staticmethod
    def _row(key: str, value: CachedCall) -> ModelCallCache:
        return ModelCallCache(
            key=key,
            model=value.model[:200],
            prompt_version=value.prompt_version[:40],
            response=value.response,
            usage={"prompt_tokens": value.prompt_tokens, "completion_tokens": value.completion_tokens},
            cost_usd=value.cost_usd,
            paid_by=(value.paid_by or "")[:100],
            requests=value.requests,
        )

    @classmethod
    def _set(cls, key: str, value: CachedCall) -> None:
        # ignore_conflicts: two workers finishing the same call store it once, neither fails.
        ModelCallCache.objects.bulk_create([cls._row(key, value)], ignore_conflicts=True)

    @classmethod
    def _replace(cls, key: str, value: CachedCall) -> None:
        row = cls._row(key, value)
        ModelCallCache.objects.bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["key"],
            update_fields=["model", "prompt_version", "response", "usage", "cost_usd", "paid_by", "requests"],
        )

    async def get(self, key: str) -> CachedCall | None:
        return await self._run(self._get, key)

    async def set(self, key: str, value: CachedCall) -> None:
        await self._run(self._replace if self.replace else self._set, key, value)


class RedisCallCache:
    """Cache entries in Redis, shared by every worker; the client is bound to the process loop.

    Redis is only the fast shared layer in front of the database, so when it
    fails the replay goes on with the other layers: the failure is logged, and
    a conversation is not lost for want of a cache.
    """

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic, replace: bool = False) -> None:
        self.url = url
        self.replace = replace  # as DatabaseCallCache's
        self._client: Any = None
        self._errors: tuple[type[Exception], ...] = ()
        self.failures = 0
        self._clock = clock  # for the one-line-a-minute log below
        self._last_logged = -float("inf")

    def _failed(self, action: str, exc: Exception) -> None:
        # One line per minute at most: an outage must be visible, not flood the log per call.
        self.failures += 1
        now = self._clock()
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
            await client.set(
                REDIS_CACHE_PREFIX + key, json.dumps(value.to_dict()), nx=not self.replace, ex=REDIS_CACHE_TTL_SECONDS
            )
        except self._errors as exc:
            self._failed("write", exc)


# What a worker process keeps between tasks, and how much of it.
#: Validated model answers held in memory in front of Redis and the database
#: (a few KB each: about 50 MB at most per worker process).
MEMORY_CACHE_ENTRIES = 10_000
#: Runs whose baseline:prior tally (one per conversation of the run, and their sum) is held in memory;
#: only the most recently used are kept.
PRIOR_TALLIES_KEPT = 2


@dataclass
class ProcessState:
    """One worker process's long-lived replay state; a forked child starts from a fresh one."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    scheduler: Scheduler | None = None
    cache: CallCache | None = None
    memory: MemoryCache | None = None
    replacing_cache: CallCache | None = None
    prior_tallies: OrderedDict[int, PriorTally] = field(default_factory=OrderedDict)
    db_pool: Any = None
    courier: CourierConnection | None = None
    courier_process: CourierProcess | None = None
    journal: RedisJournal | None = None


_state = ProcessState()


def _fresh_state_in_child() -> None:
    """A Celery prefork child inherits its parent's objects but not its threads or
    connections, so it must not reuse the parent's scheduler, clients, lock or courier."""
    global _state
    _state = ProcessState()


def reset_process_state() -> None:
    """Forget this process's replay state, and end its call courier (tests start each from nothing)."""
    global _state
    old, _state = _state, ProcessState()
    if old.courier_process is not None:
        old.courier_process.stop()


os.register_at_fork(after_in_child=_fresh_state_in_child)


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


def _courier_connection() -> CourierConnection:
    """This process's connection to its call courier (the courier starts on the first call)."""
    state = _state
    with state.lock:
        if state.courier is None:
            # A dead worker's conversation is requeued within about 1.5 leases: delivered answers outlast that.
            state.courier_process = CourierProcess(settings.REDIS_URL, delivered_ttl_s=2 * lease_seconds() + 60)
            state.courier = CourierConnection(state.courier_process.ensure)
        return state.courier


def prepare_model_calls() -> concurrent.futures.Future[Any]:
    """Get this process ready for its first model call now, in the background (a worker that will run replays,
    at start): start its call courier, or, without one, warm litellm up on the loop that makes the calls.

    The courier imports litellm and warms it up (seconds of CPU) before it
    listens; left to the first call, that wait fell on the first run's first
    requests. A failure is logged; the first call then tries again and reports it. Returns the
    preparation's future, which nobody needs to wait for.
    """
    if not settings.ATTUNE_CALL_COURIER:
        return asyncio.run_coroutine_threadsafe(warm_up(), process_loop().loop)  # it logs its own failure
    future = asyncio.run_coroutine_threadsafe(_courier_connection().prepare(), process_loop().loop)

    def report(done: Any) -> None:
        if not done.cancelled() and done.exception() is not None:
            logger.warning("the call courier could not be started (the first call tries again): %s", done.exception())

    future.add_done_callback(report)
    return future


def _journal() -> RedisJournal:
    state = _state
    with state.lock:
        if state.journal is None:
            state.journal = RedisJournal(settings.REDIS_URL)
        return state.journal


def build_cache(replace: bool = False) -> CallCache:
    """Memory (bounded, least recently used dropped first) over Redis when configured over the database.

    ``replace``: the same layers, whose writes replace an entry instead of keeping the first (a run asked
    to call afresh); both share the memory layer, so this process reads what either wrote.
    """
    state = _state
    with state.lock:
        if state.memory is None:
            state.memory = MemoryCache(maxsize=MEMORY_CACHE_ENTRIES)
        if (state.replacing_cache if replace else state.cache) is None:
            layers: list[CallCache] = [state.memory]
            if settings.REDIS_URL:
                layers.append(RedisCallCache(settings.REDIS_URL, replace=replace))
            layers.append(DatabaseCallCache(replace=replace))
            if replace:
                state.replacing_cache = LayeredCache(*layers)
            else:
                state.cache = LayeredCache(*layers)
        built = state.replacing_cache if replace else state.cache
        assert built is not None
        return built


def attempt_cache(item: RunConversation) -> CallCache:
    """The call cache one attempt at ``item`` reads and writes: the shared one, or, for a run asked to call
    afresh, only the answers this run-conversation paid for (stored so that later runs reuse the newest)."""
    if not item.run.fresh_calls:
        return build_cache()
    return OwnAnswersCache(build_cache(replace=True), lambda tag: paid_attempt(tag, item) is not None)


# ---------------------------------------------------------------------------
# Conversations of a run
# ---------------------------------------------------------------------------


def run_selection(run: EvaluationRun) -> QuerySet[Conversation]:
    """The conversations a run names: its dataset version or its saved selection filter, less any a researcher
    has excluded for quality (they would never be scored, so they are not replayed either)."""
    categories = list((run.selection or {}).get("topic_categories") or [])
    return selection_queryset(categories or None, run.dataset_version).exclude(
        participant__quality_excluded_at__isnull=False
    )


def load_canonical(conversation_pks: Sequence[int]) -> dict[int, cf.ConversationFile]:
    """Canonical documents by primary key, in a fixed number of queries."""
    rows = with_export_relations(Conversation.objects.filter(pk__in=list(conversation_pks)))
    return {c.pk: conversation_to_canonical(c, include_model_identity=True) for c in rows}


def _prior_tally_for(run: EvaluationRun) -> PriorTally:
    """The run's baseline:prior tally, built once per run and process (kept for PRIOR_TALLIES_KEPT runs).

    Every conversation's replayer shares it, so a run costs one pass over its dataset, not one per
    conversation.
    """
    state = _state
    with state.lock:
        cached = state.prior_tallies.get(run.pk)
        if cached is not None:
            state.prior_tallies.move_to_end(run.pk)
            return cached
    pks = list(RunConversation.objects.filter(run=run).values_list("conversation_id", flat=True))
    tally = PriorTally(list(load_canonical(pks).values()))
    with state.lock:
        state.prior_tallies[run.pk] = tally
        while len(state.prior_tallies) > PRIOR_TALLIES_KEPT:
            state.prior_tallies.popitem(last=False)
    return tally


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


# ---------------------------------------------------------------------------
# Leases: one worker at a time per run conversation
# ---------------------------------------------------------------------------

OPEN_STATUSES = (RunConversation.Status.PENDING, RunConversation.Status.RUNNING)


def lease_seconds() -> int:
    return int(settings.ATTUNE_REPLAY_LEASE_SECONDS)


def new_lease_token() -> str:
    """Who holds a lease: host, process and a random part (one per claim), as shown on the run page."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def lease_process(token: str) -> int | None:
    """The process id in a lease token of ``new_lease_token``'s shape; None for any other text."""
    parts = token.split(":")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def _lease_until() -> Any:
    # Database time, not this machine's: workers on several hosts compare leases on one clock.
    return ExpressionWrapper(Now() + timedelta(seconds=lease_seconds()), output_field=DateTimeField())


def _lapsed() -> Q:
    return Q(status=RunConversation.Status.RUNNING, lease_expires_at__lt=Now())


def _claim(run_conversation_id: int, token: str) -> RunConversation | None:
    """Take the lease on a conversation of an active run; None when it is not ours to replay.

    One conditional UPDATE: it succeeds for a pending conversation or one whose
    lease has lapsed (its worker died), so of two deliveries of the same
    conversation exactly one gets it while the other's holder lives. Then the
    earlier attempts that were never stored are superseded: their couriers send
    nothing more for them, so what they sent is final when this attempt counts it.
    """
    # No join in this UPDATE: Postgres re-checks a plain WHERE on the row it waited for, so of two
    # simultaneous claims the second sees the first's lease (a join would be a subquery it does not re-check).
    changed = (
        RunConversation.objects.filter(pk=run_conversation_id)
        .filter(Q(status=RunConversation.Status.PENDING) | _lapsed())
        .filter(Exists(EvaluationRun.objects.filter(pk=OuterRef("run_id"), status__in=ACTIVE_STATUSES)))
        .update(
            status=RunConversation.Status.RUNNING,
            lease_owner=token,
            lease_expires_at=_lease_until(),
            heartbeat_at=Now(),
            attempts=F("attempts") + 1,
        )
    )
    if not changed:
        return None
    item = RunConversation.objects.select_related("run", "run__evaluated_model", "run__judge_model").get(
        pk=run_conversation_id
    )
    if settings.REDIS_URL:
        _journal().counts.start(
            paid_tag(item, item.attempts) if settings.ATTUNE_CALL_COURIER else None, _interrupted_tags(item)
        )
    return item


def _not_claimed(run_conversation_id: int) -> str:
    """Why a delivery did not get the conversation, for its summary and the log."""
    row = RunConversation.objects.filter(pk=run_conversation_id).values("status", "lease_owner", "run__status").first()
    if row is None:
        return "no such run conversation"
    if row["status"] in (RunConversation.Status.DONE, RunConversation.Status.FAILED):
        return "already finished"
    if row["run__status"] not in ACTIVE_STATUSES:
        return f"run {row['run__status']}"
    return f"leased by {row['lease_owner']}"


def renew_lease(run_conversation_id: int, token: str) -> bool:
    """Extend a held lease; False when it is no longer ours (it lapsed and another worker took it)."""
    return bool(
        RunConversation.objects.filter(
            pk=run_conversation_id, status=RunConversation.Status.RUNNING, lease_owner=token
        ).update(lease_expires_at=_lease_until(), heartbeat_at=Now())
    )


def release_lease(run_conversation_id: int, token: str) -> bool:
    """Give a held conversation back untouched (pending), e.g. after a database error."""
    return bool(
        RunConversation.objects.filter(
            pk=run_conversation_id, status=RunConversation.Status.RUNNING, lease_owner=token
        ).update(status=RunConversation.Status.PENDING, lease_owner="", lease_expires_at=None)
    )


def stalled_conversations(run_id: int | None = None) -> QuerySet[RunConversation]:
    """Conversations of active runs whose worker stopped renewing its lease (it died or hangs)."""
    queryset = RunConversation.objects.filter(_lapsed(), run__status__in=ACTIVE_STATUSES)
    return queryset.filter(run_id=run_id) if run_id is not None else queryset


def conversation_states(run_id: int) -> QuerySet[RunConversation]:
    """A run's conversations with ``is_stalled`` (lease lapsed on the database's clock), for the API.

    A withdrawn participant's conversations are left out, as from every other research surface.
    """
    return (
        RunConversation.objects.filter(run_id=run_id)
        .exclude(conversation__in=withdrawn_conversations())
        .select_related("conversation")
        .annotate(is_stalled=ExpressionWrapper(_lapsed(), output_field=BooleanField()))
        .order_by("pk")
    )


def mark_requeued(run_conversation_id: int, owner: str) -> bool:
    """A stalled conversation was sent to the queue again: pending, its lapsed lease dropped.

    Conditional on the same lapsed lease, so two sweepers requeue it once and a
    worker that claimed it meanwhile keeps it.
    """
    return bool(
        RunConversation.objects.filter(pk=run_conversation_id, lease_owner=owner)
        .filter(_lapsed())
        .update(
            status=RunConversation.Status.PENDING,
            lease_owner="",
            lease_expires_at=None,
            requeued=F("requeued") + 1,
        )
    )


def open_conversations(run_id: int) -> int:
    return RunConversation.objects.filter(run_id=run_id, status__in=OPEN_STATUSES).count()


def runs_to_finalize() -> list[int]:
    """Running runs with nothing left open: their finalisation was lost (the worker died after the last store)."""
    return list(
        EvaluationRun.objects.filter(status=EvaluationRun.Status.RUNNING, conversation_outputs__isnull=False)
        .exclude(conversation_outputs__status__in=OPEN_STATUSES)
        .distinct()
        .values_list("pk", flat=True)
    )


def paid_tag(item: RunConversation, attempt: int) -> str:
    """How a cache entry and a journaled answer name the attempt that paid for them.

    The row's random ``paid_key`` is part of it because the cache and the journal in Redis outlive the
    database: after it is recreated, ids start again, and an earlier database's answers must not pass
    for this conversation's own. Rows from before the key (``LEGACY_PAID_KEY``, migration 0010) keep
    the tags they had, so a conversation interrupted across the upgrade still finds what it paid for.
    """
    key = "" if item.paid_key == LEGACY_PAID_KEY else f".{item.paid_key.hex}"
    return f"rc{item.pk}{key}.a{attempt}"


def paid_attempt(tag: str, item: RunConversation) -> int | None:
    """The attempt of this run-conversation that ``paid_tag`` named, or None for anyone else's tag."""
    prefix = paid_tag(item, 0)[:-1]
    number = tag[len(prefix) :]
    return int(number) if tag.startswith(prefix) and number.isdigit() else None


def _recoverable(item: RunConversation, counted_attempt: int, attempt: int) -> Any:
    """Whether a cache entry was paid by one of this conversation's attempts whose accounting was lost.

    Those are the attempts after the last one stored (``counted_attempt``) and
    before this one: their workers died before storing what they paid.
    """

    def recoverable(tag: str) -> bool:
        paid = paid_attempt(tag, item)
        return paid is not None and counted_attempt < paid < attempt

    return recoverable


def _counted_earlier(item: RunConversation, counted_attempt: int) -> Any:
    """Whether a cache entry was paid by one of this conversation's attempts that a store already counted.

    A failed conversation that is resumed finds its earlier answers in the cache: paid once, by this run,
    so neither paid again nor a hit on another run's cache (``calls_reused``).
    """

    def counted(tag: str) -> bool:
        paid = paid_attempt(tag, item)
        return paid is not None and 0 < paid <= counted_attempt

    return counted


def _interrupted_tags(item: RunConversation) -> list[str]:
    """The attempts after the last one stored and before this one: they ended without a store (their worker
    died or lost its lease)."""
    return [paid_tag(item, attempt) for attempt in range(item.counted_attempt + 1, item.attempts)]


def _sent_through_couriers(item: RunConversation) -> int | None:
    """The requests that the couriers of ``item``'s attempts that ended without a store sent, when every one
    of them was counted (``SentCounts``); read before the store's transaction (the claim made them final)."""
    if not settings.REDIS_URL:
        return None
    return _journal().counts.total(_interrupted_tags(item))


def _unstored_requests(in_database: int, by_couriers: int | None) -> int:
    """The requests of the attempts that ended without a store: the database's write-ahead count, which
    never misses one but may hold one a worker counted and died before handing over, unless their couriers'
    count is known (never more than the database's)."""
    counted = max(0, in_database)
    return counted if by_couriers is None else min(counted, by_couriers)


def _count_sent(run_conversation_id: int) -> Any:
    """An ``on_send`` hook: add one to the conversation's paid requests in the database before each is sent
    (and take it back when it never left)."""

    def bump(requests: int) -> None:
        DatabaseCallCache._reconnecting(
            lambda: RunConversation.objects.filter(pk=run_conversation_id).update(paid_sent=F("paid_sent") + requests)
        )

    async def on_send(requests: int) -> None:
        await asyncio.get_running_loop().run_in_executor(_db_pool(), bump, requests)

    return on_send


def _store(item: RunConversation, token: str, result: ReplayResult) -> bool:
    """Write the output and add its counts to the run, exactly once per conversation."""
    output = result.output
    usable = result.scoreable
    status = RunConversation.Status.DONE if usable else RunConversation.Status.FAILED
    stats = result.stats
    errors = "; ".join(f"turn {f.turn_number} {f.call_type}: {f.error}" for f in result.failures)
    by_couriers = _sent_through_couriers(item)
    with transaction.atomic():
        # Only the lease holder stores; a delivery whose lease lapsed and was taken finds nothing to move.
        row = (
            RunConversation.objects.select_for_update()
            .filter(pk=item.pk, status=RunConversation.Status.RUNNING, lease_owner=token)
            .values("paid_sent", "paid_sent_counted", "attempts")
            .first()
        )
        if row is None:
            return False
        # Paid requests of interrupted attempts (answered or lost in flight) that no store has counted:
        # everything sent so far, less what was counted before, less this attempt's own.
        interrupted = _unstored_requests(row["paid_sent"] - row["paid_sent_counted"] - stats.paid_requests, by_couriers)
        made = stats.calls_made + interrupted
        RunConversation.objects.filter(pk=item.pk).update(
            status=status,
            lease_owner="",
            lease_expires_at=None,
            output=cf.to_canonical_dict(output),
            calls_made=F("calls_made") + made,
            calls_cached=stats.calls_cached,
            calls_recovered=stats.calls_recovered,
            calls_reused=stats.calls_reused,
            calls_failed=stats.calls_failed,
            # What this run paid for it over all attempts, as the run's own cost adds up (the output's
            # api_cost also prices answers reused from other runs' cache).
            cost_usd=F("cost_usd") + stats.cost_spent,
            cost_reused_usd=stats.cost_reused,
            error=errors[:5000],
            paid_sent_counted=row["paid_sent"],
            counted_attempt=row["attempts"],
        )
        EvaluationRun.objects.filter(pk=item.run_id).update(
            conversations_done=F("conversations_done") + (1 if usable else 0),
            conversations_failed=F("conversations_failed") + (0 if usable else 1),
            calls_made=F("calls_made") + made,
            calls_cached=F("calls_cached") + stats.calls_cached,
            calls_recovered=F("calls_recovered") + stats.calls_recovered,
            calls_reused=F("calls_reused") + stats.calls_reused,
            calls_failed=F("calls_failed") + stats.calls_failed,
            cost_usd=F("cost_usd") + stats.cost_spent,
            cost_reused_usd=F("cost_reused_usd") + stats.cost_reused,
        )
    return True


def _fail(item: RunConversation, token: str, error: str, run_error: str = "") -> bool:
    """The conversation could not be replayed at all (configuration, a bug): failed, visibly."""
    by_couriers = _sent_through_couriers(item)
    with transaction.atomic():
        row = (
            RunConversation.objects.select_for_update()
            .filter(pk=item.pk, status=RunConversation.Status.RUNNING, lease_owner=token)
            .values("paid_sent", "paid_sent_counted", "attempts")
            .first()
        )
        moved = 0
        if row is not None:
            # Counted since this attempt's claim (its own, and any the superseded ones counted but their couriers
            # refused), and what the attempts before it sent.
            made = max(0, row["paid_sent"] - item.paid_sent) + _unstored_requests(
                item.paid_sent - row["paid_sent_counted"], by_couriers
            )
            moved = RunConversation.objects.filter(pk=item.pk).update(
                status=RunConversation.Status.FAILED,
                lease_owner="",
                lease_expires_at=None,
                error=error[:5000],
                calls_made=F("calls_made") + made,
                paid_sent_counted=row["paid_sent"],
                counted_attempt=row["attempts"],
            )
        if moved:
            changes: dict[str, Any] = {
                "conversations_failed": F("conversations_failed") + 1,
                "calls_made": F("calls_made") + made,
            }
            if run_error:
                changes["error"] = run_error[:2000]
            EvaluationRun.objects.filter(pk=item.run_id).update(**changes)
    return bool(moved)


def attempt_replayer(
    item: RunConversation, spec: EMSpec, config: ReplayConfig, prior_tally: PriorTally | None = None
) -> Replayer:
    """The replayer of the attempt that holds ``item``'s lease: its cache, counts, recovery and courier."""
    tag = paid_tag(item, item.attempts)
    # Attempts that ended without a store (their worker died): what their couriers were paid for is
    # in the journal, and this attempt takes it from there instead of paying again.
    interrupted = _interrupted_tags(item)
    return make_replayer(
        spec,
        config,
        prior_tally=prior_tally,
        scheduler=_process_scheduler(),
        cache=attempt_cache(item),
        on_send=_count_sent(item.pk),
        paid_tag=tag,
        recoverable=_recoverable(item, item.counted_attempt, item.attempts),
        counted_earlier=_counted_earlier(item, item.counted_attempt),
        recover=journal_recovery(_journal(), interrupted) if interrupted and settings.REDIS_URL else None,
        llm_backend=CourierBackend(_courier_connection(), tag) if settings.ATTUNE_CALL_COURIER else None,
    )


WITHDRAWN_NOT_REPLAYED = "the participant withdrew before it was replayed: nothing of it was sent to the model"


def do_replay_conversation(run_conversation_id: int) -> dict[str, Any]:
    """Replay one conversation of a run under a lease and store its output; safe to call twice.

    Returns a small JSON-able summary; ``open`` is how many conversations of the
    run are still pending or running afterwards (0: the run can be finalised).
    Database errors propagate (the task retries them) after the lease is given back.
    """
    token = new_lease_token()
    item = _claim(run_conversation_id, token)
    if item is None:
        return {"run_conversation": run_conversation_id, "skipped": _not_claimed(run_conversation_id)}
    run = item.run
    summary: dict[str, Any] = {"run_conversation": run_conversation_id, "run": run.pk}
    _mark_running(run)
    if withdrawn_conversations().filter(pk=item.conversation_id).exists():
        # Withdrawn after the run was prepared: not one of the participant's words goes to a provider.
        _fail(item, token, WITHDRAWN_NOT_REPLAYED)
        return {**summary, "skipped": "withdrawn", "open": open_conversations(run.pk)}
    try:
        try:
            # A repeat gets answers of its own: its number is part of every cache key of the model's calls.
            spec = dataclasses.replace(em_spec(run.evaluated_model), repeat=run.repeat)
            config = run_config(run)
            conversation = load_canonical([item.conversation_id])[item.conversation_id]
            prior_tally = _prior_tally_for(run) if spec.name == "baseline:prior" else None
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:  # configuration problems fail this conversation, visibly
            _fail(item, token, str(exc), run_error=str(exc))
            return {**summary, "failed": str(exc), "open": open_conversations(run.pk)}
        replayer = attempt_replayer(item, spec, config, prior_tally)
        try:
            result = run_sync_beating(
                replayer.replay(conversation), lease_seconds() / 4, lambda: renew_lease(item.pk, token)
            )
        except Abandoned:
            logger.warning("run conversation %s: lease lost to another worker; its replay was dropped", item.pk)
            return {**summary, "skipped": "lease lost"}
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:
            logger.exception("replay of run conversation %s failed", run_conversation_id)
            _fail(item, token, f"{type(exc).__name__}: {exc}")
            return {**summary, "failed": f"{type(exc).__name__}: {exc}", "open": open_conversations(run.pk)}
    except (OperationalError, InterfaceError):
        # If the database is away, the lease lapses instead and a sweeper requeues the conversation.
        with contextlib.suppress(OperationalError, InterfaceError):
            release_lease(item.pk, token)
        raise
    stored = _store(item, token, result)
    if stored:
        save_call_records(item.pk, result.calls)
        ops_metrics.record_replay_calls(result.calls, ops_metrics.providers_of([spec, config.judge]))
    logger.info(
        "run %s conversation %s: %s calls made, %s cached, %s failed",
        run.pk,
        conversation.conversationId,
        result.stats.calls_made,
        result.stats.calls_cached,
        result.stats.calls_failed,
    )
    return {**summary, "stored": stored, "open": open_conversations(run.pk), **result.stats.to_dict()}


# ---------------------------------------------------------------------------
# Scoring and run life cycle
# ---------------------------------------------------------------------------


def do_finalize_run(run_id: int) -> str:
    """Score a run whose conversations have all been attempted; returns the final status."""
    # Queued too: a resumed run with nothing left to replay goes straight to scoring. Never while a
    # conversation is open: a late duplicate request (a run resumed meanwhile) must not score half a run.
    # (No join: see _claim; of two finalisers exactly one moves the run.)
    moved = (
        EvaluationRun.objects.filter(pk=run_id, status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING])
        .exclude(Exists(RunConversation.objects.filter(run_id=OuterRef("pk"), status__in=OPEN_STATUSES)))
        .update(status=EvaluationRun.Status.SCORING)
    )
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
    changes: dict[str, Any] = {"finished_at": timezone.now(), "gaps": count_gaps(run_id)}
    if run.conversations_done:
        changes["status"] = EvaluationRun.Status.DONE
    else:
        # Say why where the run is shown; the failed conversations list their failed calls.
        changes["status"] = EvaluationRun.Status.FAILED
        first = (
            RunConversation.objects.filter(run_id=run_id, status=RunConversation.Status.FAILED)
            .exclude(error="")
            .order_by("pk")
            .values_list("error", flat=True)
            .first()
        )
        changes["error"] = (
            run.error
            or f"no conversation could be replayed ({run.conversations_failed} failed)"
            + (f"; first failure: {first}" if first else "")
        )[:2000]
    EvaluationRun.objects.filter(pk=run_id).update(**changes)
    return changes["status"]


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
        "calls_recovered": run.calls_recovered,
        "calls_reused": run.calls_reused,
        "calls_failed": run.calls_failed,
        "cost_usd": run.cost_usd,
        "cost_reused_usd": run.cost_reused_usd,
        "percent": run.progress_percent,
    }


def calls_sent_so_far(run: EvaluationRun) -> int:
    """The run's requests so far, those of conversations still being replayed included.

    A run's ``calls_made`` grows as each conversation is stored; while one is
    replayed its requests are counted as they go out (``paid_sent``, before each
    is sent), so a run's page shows its calls as they happen, as ``attune eval``'s
    progress line does.
    """
    going = RunConversation.objects.filter(run=run, status=RunConversation.Status.RUNNING).aggregate(
        sent=Sum(F("paid_sent") - F("paid_sent_counted"))
    )["sent"]
    return run.calls_made + max(0, going or 0)


def do_create_run(
    model_name: str,
    mode: str,
    panas_strategy: str = "absolute",
    judge_name: str | None = None,
    conversation_ids: Sequence[str] | None = None,
    *,
    fresh_calls: bool = False,
    repeat: int = 0,
    origin: str = "",
    provenance: dict[str, Any] | None = None,
) -> EvaluationRun:
    """A queued run over the given conversations (default: all complete ones), registering baselines on demand.

    ``fresh_calls`` asks the models again instead of reusing other runs' answers; ``repeat`` numbers a repeat
    of the same configuration, whose answers are its own (both as ``attune eval --fresh/--repeat``).
    """
    if repeat < 0:
        raise ValueError(f"repeat must be 0 or more, not {repeat}")

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
            fresh_calls=fresh_calls,
            repeat=repeat,
            origin=origin,
            provenance=provenance,
        )
        if conversation_ids is not None:
            pks = list(
                Conversation.objects.filter(conversation_id__in=list(conversation_ids)).values_list("pk", flat=True)
            )
            RunConversation.objects.bulk_create([RunConversation(run=run, conversation_id=pk) for pk in pks])
            run.conversations_total = len(pks)
            run.save(update_fields=["conversations_total"])
    return run
