"""Async call scheduler: global and per-provider limits, backoff with jitter (issue 4 item 3).

Every model call of a replay goes through ``Scheduler.submit``. Slots are
taken in the order provider in-flight cap → provider requests-per-minute →
global cap, so a saturated provider never holds global slots that calls to
other providers could use. Transient failures (429, 5xx, timeouts, dropped
connections) are retried with exponential backoff and "equal jitter"; a
``Retry-After`` from the provider is a floor on the wait and also pauses the
whole provider, because a 429 means every call to it would fail until then.
Slots are released while waiting, so backoff never idles capacity. (This
retry loop is ours rather than tenacity's because those three rules act
between the attempts, on the slots and the provider's pause, where a generic
retrier would need a callback for each.)

Requests per minute are enforced by a pluggable ``RateLimiter``: the local
bucket here (aiolimiter) holds within one process; ``scoring.redis_limits`` has a
Redis limiter for several workers sharing one provider budget. In the same
way a ``SharedSlots`` (Redis there too) makes a provider's in-flight cap hold
across every worker process, not per process.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from aiolimiter import AsyncLimiter

T = TypeVar("T")
log = logging.getLogger(__name__)


class TransientCallError(Exception):
    """A failure that may pass on the next try (429, 5xx, timeout, connection)."""

    def __init__(self, kind: str, message: str = "", retry_after: float | None = None, status: int | None = None):
        self.kind = kind
        self.retry_after = retry_after
        self.status = status
        super().__init__(message or kind)


class PermanentCallError(Exception):
    """A failure that retrying cannot fix (bad request, authentication, unknown model)."""


class RetriesExhausted(Exception):
    """The last transient error, after ``max_attempts`` tries."""

    def __init__(self, last: TransientCallError, attempts: int):
        self.last = last
        self.attempts = attempts
        super().__init__(f"gave up after {attempts} attempts: {last.kind}: {last}")


@dataclass(frozen=True)
class ProviderLimits:
    """Caps for one provider; ``rpm`` None means no per-minute limit."""

    max_in_flight: int = 8
    rpm: int | None = None

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        if self.rpm is not None and self.rpm < 1:
            raise ValueError("rpm must be >= 1 or None")


class RateLimiter(Protocol):
    async def acquire(self, key: str, rpm: int) -> None:
        """Return when one more request under ``key`` fits in ``rpm``."""


class TokenBucketLimiter:
    """In-process bucket per key: aiolimiter's leaky bucket, sized for provider limits.

    Capacity is a tenth of a minute's budget (at least 1), drained at rpm/60
    per second: bursts stay small, which is what providers' sub-minute
    enforcement tolerates, and the long-run rate is exactly ``rpm``. Waiters
    are served in arrival order. A changed ``rpm`` gets a fresh bucket.
    """

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[int, AsyncLimiter]] = {}  # key -> (rpm it was made for, bucket)

    async def acquire(self, key: str, rpm: int) -> None:
        made_for, bucket = self._buckets.get(key, (0, None))
        if bucket is None or made_for != rpm:
            capacity = max(1, math.ceil(rpm / 10))
            bucket = AsyncLimiter(capacity, time_period=capacity * 60 / rpm)
            self._buckets[key] = (rpm, bucket)
        await bucket.acquire()


class SharedSlots(Protocol):
    """In-flight slots of a provider shared by several processes."""

    async def acquire(self, key: str, limit: int) -> str:
        """Wait until fewer than ``limit`` calls to ``key`` are in flight anywhere; return a token."""

    async def release(self, key: str, token: str) -> None:
        """Give back the slot ``acquire`` returned."""


@dataclass
class SchedulerStats:
    """Counters for progress lines and tests."""

    submitted: int = 0
    attempts: int = 0
    retries: int = 0
    gave_up: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    backoff_seconds: float = 0.0


class Scheduler:
    """Runs call coroutines under limits, retrying transient failures.

    One scheduler serves one event loop; its semaphores are created lazily so
    it can be built outside the loop that will use it.
    """

    def __init__(
        self,
        max_concurrency: int = 32,
        default_limits: ProviderLimits = ProviderLimits(max_in_flight=1_000_000),
        limits: dict[str, ProviderLimits] | None = None,
        max_attempts: int = 6,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
        attempt_timeout: float | None = None,
        rate_limiter: RateLimiter | None = None,
        shared_slots: SharedSlots | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.max_concurrency = max_concurrency
        self.default_limits = default_limits
        self.limits = dict(limits or {})
        self.max_attempts = max(1, max_attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.attempt_timeout = attempt_timeout
        self.rate_limiter: RateLimiter = rate_limiter or TokenBucketLimiter()
        self.shared_slots = shared_slots
        self._releasing: set[asyncio.Task[None]] = set()
        self.rng = rng or random.Random()
        self.stats = SchedulerStats()
        self._global: asyncio.Semaphore | None = None
        self._providers: dict[str, tuple[int, asyncio.Semaphore]] = {}  # provider -> (cap it was made for, slots)
        self._not_before: dict[str, float] = {}
        self.in_flight = 0
        self.peak_in_flight = 0

    def use_limits(self, provider: str, limits: ProviderLimits) -> None:
        """Caps for calls to ``provider`` from now on.

        A worker's scheduler outlives the runs it serves, so a cap changed in
        the registry must apply to the next conversation without a restart.
        Calls already admitted keep their slots: until they finish, a lowered
        in-flight cap can be exceeded by this process (the shared Redis slots
        apply the new cap at once).
        """
        self.limits[provider] = limits

    def backoff_delay(self, retry: int, retry_after: float | None) -> float:
        """Exponential backoff with equal jitter; ``Retry-After`` is a floor."""
        ceiling = min(self.max_delay, self.base_delay * 2.0**retry)
        delay = ceiling / 2 + self.rng.uniform(0, ceiling / 2)
        if retry_after is not None and retry_after > 0:
            delay = max(delay, min(retry_after, self.max_delay * 5))
        return delay

    def _semaphores(self, provider: str) -> tuple[asyncio.Semaphore, asyncio.Semaphore, ProviderLimits]:
        if self._global is None:
            self._global = asyncio.Semaphore(self.max_concurrency)
        limits = self.limits.get(provider, self.default_limits)
        cap, semaphore = self._providers.get(provider, (0, None))
        if semaphore is None or cap != limits.max_in_flight:
            # A new cap gets fresh slots; holders of the old ones release into those.
            semaphore = asyncio.Semaphore(limits.max_in_flight)
            self._providers[provider] = (limits.max_in_flight, semaphore)
        return self._global, semaphore, limits

    async def _wait_for_cooldown(self, provider: str) -> None:
        while True:
            remaining = self._not_before.get(provider, 0.0) - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(remaining)

    def _release(
        self, provider: str, provider_slots: asyncio.Semaphore, global_slots: asyncio.Semaphore, shared: str | None
    ) -> None:
        """Give back one attempt's slots when it ends."""
        self.in_flight -= 1
        global_slots.release()
        provider_slots.release()
        if shared is not None:
            self._release_shared(provider, shared)

    def _release_shared(self, provider: str, token: str) -> None:
        """Give a shared slot back in the background (``_release`` is synchronous).

        If that fails (the store is down), the store's lease frees the slot later;
        the failure is logged, never raised into the call that already finished.
        """
        assert self.shared_slots is not None
        task = asyncio.get_running_loop().create_task(self.shared_slots.release(provider, token))
        self._releasing.add(task)
        task.add_done_callback(self._released)

    def _released(self, task: asyncio.Task[None]) -> None:
        self._releasing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("could not release a shared in-flight slot (its lease will free it): %s", task.exception())

    async def submit(self, provider: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call()`` once it fits under the limits; retry transient errors.

        Raises ``RetriesExhausted`` after ``max_attempts`` transient failures;
        a ``PermanentCallError`` (or any other exception) propagates at once.
        """
        global_slots, provider_slots, limits = self._semaphores(provider)
        self.stats.submitted += 1
        retry = 0
        while True:
            await self._wait_for_cooldown(provider)
            await provider_slots.acquire()
            shared: str | None = None
            try:
                if limits.rpm is not None:
                    await self.rate_limiter.acquire(provider, limits.rpm)
                if self.shared_slots is not None:
                    shared = await self.shared_slots.acquire(provider, limits.max_in_flight)
                await global_slots.acquire()
            except BaseException:
                if shared is not None:
                    self._release_shared(provider, shared)
                provider_slots.release()
                raise
            self.stats.attempts += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                if self.attempt_timeout is not None:
                    return await asyncio.wait_for(call(), self.attempt_timeout)
                return await call()
            except TimeoutError:
                error = TransientCallError("timeout", f"no answer within {self.attempt_timeout}s")
            except TransientCallError as exc:
                error = exc
            finally:
                self._release(provider, provider_slots, global_slots, shared)
            # Outside every slot from here on: waiting must not hold capacity.
            self.stats.errors[error.kind] += 1
            if retry + 1 >= self.max_attempts:
                self.stats.gave_up += 1
                raise RetriesExhausted(error, retry + 1)
            delay = self.backoff_delay(retry, error.retry_after)
            if error.retry_after:
                self._not_before[provider] = max(
                    self._not_before.get(provider, 0.0), time.monotonic() + error.retry_after
                )
            self.stats.retries += 1
            self.stats.backoff_seconds += delay
            retry += 1
            await asyncio.sleep(delay)
