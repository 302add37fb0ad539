"""Async call scheduler: global and per-provider limits, backoff with jitter.

Every model call of a replay goes through ``Scheduler.submit``. Slots are
taken in the order provider in-flight cap → provider requests-per-minute →
global cap, so a saturated provider never holds global slots that calls to
other providers could use. Transient failures (429, 5xx, timeouts, dropped
connections) are retried with exponential backoff and "equal jitter"; a
``Retry-After`` from the provider is a floor on that request's wait (only
that request's: a provider refusing a few calls at random still serves the
others, and sustained overload is the adaptive level's business).
Slots are released while waiting, so backoff never idles capacity. (This
retry loop is ours rather than tenacity's because those three rules act
between the attempts, on the slots and the provider's pause, where a generic
retrier would need a callback for each.)

The backoff grows with the provider's failures, not with one call's bad luck:
a retry's exponent is the smaller of the call's retries so far and the
provider's failures since its last success (other calls' included). When the
provider is down, every call fails and both grow together, so the waits grow
as usual; when it fails calls at random and answers the rest, a call that drew
five failures in a row still waits the first step only. With per-call
exponents alone, at 22% random failures about one call in 2,000 failed five
times in a row and waited 8-15 s, which alone could set the end of a run.
At that first step a failure that is not an overload (a 500, a timeout, a
dropped connection) is retried after a moment only (``glitch_delay``, 0.05 to
0.1 s): the provider is answering other calls, so a longer wait protects
nobody and only lengthens the conversation's chain of calls (a 200 ms turn
waited 0.25-0.5 s per glitch). The in-flight cap still bounds the load, an
overload still waits the full step or its Retry-After, and a provider that
fails every call is past the first step by its second failure.

How many calls a provider may have in flight adapts (``AdaptiveLimit``,
additive increase, multiplicative decrease): it starts at the provider's cap
(the global cap when the provider has none, as for a model outside the
registry), halves when the provider says it is overloaded (429, 503, 529) in
more than a quarter of its recent calls (a round trip's worth, never fewer
than the last 20: random refusals do not count), and climbs back by one per
window of successes, never above the cap nor below 1.
A provider that is pushed past what it serves then settles just under its
limit instead of burning retries, and one that is not runs at the full cap.

The sends to a provider are paced (``SendPacer``): at most one per round trip
divided by the current level, the round trip being the shortest time a recent
call held its slot. Answers to calls sent together come back together, and the
process then handles them one after another before it sends what they let go
next, so without pacing a replay moves in waves and each call waits for its
whole wave besides the provider. The in-flight cap already keeps a provider
below ``level / round trip`` calls a second, so pacing costs no throughput; it
only spreads a burst over a round trip.

Requests per minute are enforced by a pluggable ``RateLimiter``: the local
bucket here (aiolimiter) holds within one process; ``scoring.redis_limits`` has a
Redis limiter for several workers sharing one provider budget. In the same
way a ``SharedSlots`` (Redis there too) makes a provider's in-flight cap hold
across every worker process, not per process; the adaptive level only ever
keeps this process below that shared cap.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Generic, Protocol, TypeVar

from aiolimiter import AsyncLimiter

T = TypeVar("T")
log = logging.getLogger(__name__)


class TransientCallError(Exception):
    """A failure that may pass on the next try (429, 5xx, timeout, connection).

    ``sent=False``: it failed before anything reached the provider, so the
    request was neither seen nor billed, and is taken back out of the counts.
    Where that is not certain (a connection that broke mid-request) it stays True.
    """

    def __init__(
        self,
        kind: str,
        message: str = "",
        retry_after: float | None = None,
        status: int | None = None,
        sent: bool = True,
    ):
        self.kind = kind
        self.retry_after = retry_after
        self.status = status
        self.sent = sent
        super().__init__(message or kind)


class PermanentCallError(Exception):
    """A failure that retrying cannot fix (bad request, authentication, unknown model); ``sent`` as above,
    ``status`` the provider's HTTP status when it gave one."""

    def __init__(self, message: str = "", sent: bool = True, status: int | None = None):
        self.sent = sent
        self.status = status
        super().__init__(message)


class RetriesExhausted(Exception):
    """The last transient error, after ``max_attempts`` tries."""

    def __init__(self, last: TransientCallError, attempts: int):
        self.last = last
        self.attempts = attempts
        super().__init__(f"gave up after {attempts} attempts: {last.kind}: {last}")


# Statuses by which a provider says "too much, slow down": rate limited, unavailable,
# and Anthropic's "overloaded".
OVERLOAD_STATUSES: Final = frozenset({429, 503, 529})


# Tries per call before it is given up as failed (and its turn left out of the run). At a provider
# failing one request in five, six tries lose about one call in 10,000: a turn or two of a large run,
# seen in bench/replay_faults.py. Ten lose one in ten million; the backoff caps at max_delay, and the
# extra tries are only ever made by a call that keeps failing.
DEFAULT_MAX_ATTEMPTS: Final = 10


def is_overload(error: TransientCallError) -> bool:
    """Whether ``error`` means the provider is past what it will serve (so send less)."""
    return error.kind == "429" or error.status in OVERLOAD_STATUSES or "overloaded" in str(error).lower()


@dataclass(frozen=True)
class ProviderLimits:
    """Caps for one provider; ``max_in_flight`` None means only the global cap bounds it,
    ``rpm`` None means no per-minute limit."""

    max_in_flight: int | None = None
    rpm: int | None = None

    def __post_init__(self) -> None:
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1 or None")
        if self.rpm is not None and self.rpm < 1:
            raise ValueError("rpm must be >= 1 or None")


def in_flight_ceiling(limits: ProviderLimits, max_concurrency: int) -> int:
    """The most calls to a provider with ``limits`` one scheduler of ``max_concurrency`` may have in flight."""
    if limits.max_in_flight is None:
        return max_concurrency
    return min(limits.max_in_flight, max_concurrency)


def describe_limits(provider: str, limits: ProviderLimits, max_concurrency: int, concurrency_source: str) -> str:
    """What bounds the calls to ``provider``, in words, said where a run starts or is shown.

    ``concurrency_source`` names where ``max_concurrency`` was set (a command
    option, a setting), so the reader knows which knob to turn.
    """
    ceiling = in_flight_ceiling(limits, max_concurrency)
    if limits.max_in_flight is None:
        source = f"{concurrency_source} {max_concurrency}; not in the registry"
    elif limits.max_in_flight < max_concurrency:
        source = f"the registry's max_concurrency {limits.max_in_flight}, below {concurrency_source} {max_concurrency}"
    else:
        source = f"{concurrency_source} {max_concurrency}; the registry allows {limits.max_in_flight}"
    rpm = f" and {limits.rpm} requests per minute (registry)" if limits.rpm else ""
    return (
        f"Calls to {provider}: at most {ceiling} in flight ({source}){rpm}; "
        "halved while the provider reports overload, then raised back step by step."
    )


class AdaptiveLimit:
    """How many calls to one provider may be in flight now: additive increase, multiplicative decrease.

    The level starts at ``ceiling``. Sustained overload halves it (never below
    1); each window of successes as long as the current level raises it by one,
    up to the ceiling, so recovery takes about as many round trips as levels
    lost, like TCP's congestion window.

    Why "sustained": a provider that refuses a few calls at random (a 429 now
    and then, even when we are well under its limit) must not drive the level
    down, or a 10% fault rate would halve it every few round trips and the run
    would crawl. So overloads are counted over a window of ``level`` outcomes
    (about one round trip at the current level), but never fewer than
    ``MIN_WINDOW``, and the level is cut only once more than ``OVERLOAD_SHARE``
    of that window has been refused. Pushing past a provider's real limit gets
    most calls above it refused, which crosses the share within the window;
    random refusals do not. The floor matters at low levels: with a window of
    ``level`` alone, at level 4 a single 429 was "more than a fifth", so 10%
    random 429s cut a third of all windows there, faster than successes raised
    the level, and a run could slide down to level 1 (measured: the faulty
    replay of bench/replay_faults.py took 2.0-3.8x the fault-free one from run
    to run). With a window of at least 20 and a quarter of it, 10% random
    refusals cut at most about one window in a hundred (20 outcomes: 1.1%;
    32: 0.3%). After a cut the window restarts. Calls admitted before a cut
    that then report overload belong to the same episode (they were sent at
    the old level), so they count for nothing: ``epoch`` tells them apart.
    Without that, one burst of 32 simultaneous 429s would drive the level to 1.
    """

    OVERLOAD_SHARE: Final = 0.25
    MIN_WINDOW: Final = 20

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError(f"adaptive limit ceiling must be >= 1, got {ceiling}")
        self.ceiling = ceiling
        self.level = ceiling
        self.epoch = 0  # bumped on every cut
        self.cuts = 0
        self._successes = 0
        self._window_outcomes = 0  # outcomes of calls admitted this epoch, in the current window
        self._window_overloads = 0

    def set_ceiling(self, ceiling: int) -> None:
        """A new cap: an unreduced level follows it; a reduced one stays, at most at the cap."""
        if ceiling < 1:
            raise ValueError(f"adaptive limit ceiling must be >= 1, got {ceiling}")
        self.level = ceiling if self.level == self.ceiling else min(self.level, ceiling)
        self.ceiling = ceiling

    def _window(self) -> int:
        return max(self.level, self.MIN_WINDOW)

    def _close_window_if_full(self) -> None:
        if self._window_outcomes >= self._window():
            self._window_outcomes = 0
            self._window_overloads = 0

    def on_success(self) -> None:
        """A call admitted under this limit succeeded."""
        self._window_outcomes += 1
        self._close_window_if_full()
        if self.level >= self.ceiling:
            self._successes = 0
            return
        self._successes += 1
        if self._successes >= self.level:
            self.level += 1
            self._successes = 0

    def on_overload(self, admitted_epoch: int) -> bool:
        """A call admitted at ``admitted_epoch`` was refused as overload; True if the level was cut."""
        if admitted_epoch != self.epoch:
            return False
        self._window_outcomes += 1
        self._window_overloads += 1
        if self._window_overloads <= self.OVERLOAD_SHARE * self._window():
            self._close_window_if_full()
            return False
        self.level = max(1, self.level // 2)
        self.epoch += 1
        self.cuts += 1
        self._successes = 0
        self._window_outcomes = 0
        self._window_overloads = 0
        return True


class SendPacer:
    """When the next call to one provider may go out: sends at least ``round_trip / level`` apart.

    Why: with a steady provider, calls sent in one burst are answered in one
    burst, and one process handles those answers one after another (a few ms of
    CPU each: parsing, bookkeeping, building the next request) before the calls
    they release go out, together again. The replay then moves in waves, and a
    call waits for its whole wave on top of the provider's latency: at a steady
    200 ms and 32 calls in flight per process the replay reached 0.65-0.76 of
    what the concurrency allows, 0.78-0.86 with pacing (bench/replay_throughput.py
    on 2 cores, start-up heap frozen in both). Spacing the sends spreads a burst
    over one round trip; the answers then arrive one at a time and each is
    handled as it comes, which is what TCP pacing does for packets.

    It costs no throughput: a call holds its slot at least the round trip, so
    ``level`` slots cannot start calls faster than ``level / round_trip`` anyway.
    The round trip is therefore the shortest slot time among the recent
    successes (the last ``WINDOW`` at least), never more than any of them: the
    spacing errs short, never long. Before the first success nothing is paced,
    and a wait under ``MIN_WAIT`` is not worth a timer (calls of a few ms).
    Times come from the caller (the event loop's clock), so this class is pure.
    """

    WINDOW: Final = 32
    MIN_WAIT: Final = 0.001

    def __init__(self) -> None:
        self._current = math.inf  # shortest slot time in the window being filled
        self._previous = math.inf  # shortest in the window before it
        self._samples = 0  # successes in the window being filled
        self._next_at = -math.inf  # when the next send may go out

    @property
    def round_trip(self) -> float | None:
        """The shortest slot time of the recent successes; None before the first."""
        shortest = min(self._current, self._previous)
        return None if shortest == math.inf else shortest

    def observe(self, seconds: float) -> None:
        """A call held its slot ``seconds`` and succeeded."""
        self._current = min(self._current, max(0.0, seconds))
        self._samples += 1
        if self._samples >= self.WINDOW:
            self._previous, self._current, self._samples = self._current, math.inf, 0

    def reserve(self, now: float, level: int) -> float:
        """Book the next send at or after ``now``; return how long to wait for it (0: send now)."""
        round_trip = self.round_trip
        if round_trip is None:
            return 0.0
        at = max(now, self._next_at)
        self._next_at = at + round_trip / max(1, level)
        wait = at - now
        return wait if wait >= self.MIN_WAIT else 0.0


class WaitQueue(Generic[T]):
    """Calls waiting for something handed out one at a time: the highest priority first, then arrivals.

    The one order the replay queues calls in, wherever they queue: a
    provider's slots in this process (``_ProviderGate``) and its slots shared
    with other workers (``scoring.redis_limits``). A waiter that gives up
    (its future cancelled) stays in the heap and is dropped when it comes
    first, so giving up costs nothing here.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[T]]] = []  # (-priority, arrival, waiter)
        self._arrivals = itertools.count()

    def join(self, priority: int = 0) -> asyncio.Future[T]:
        """Queue a caller; await the future for what it is handed."""
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (-priority, next(self._arrivals), waiter))
        return waiter

    def waiting(self) -> bool:
        """Whether anyone still waits (first dropping those in front who gave up)."""
        while self._heap and self._heap[0][2].done():
            heapq.heappop(self._heap)
        return bool(self._heap)

    def serve(self, value: T) -> bool:
        """Hand ``value`` to the first in line; False when nobody waits (the caller keeps it)."""
        if not self.waiting():
            return False
        heapq.heappop(self._heap)[2].set_result(value)
        return True

    def fail(self, error: BaseException) -> bool:
        """Hand ``error`` to the first in line instead; False when nobody waits."""
        if not self.waiting():
            return False
        heapq.heappop(self._heap)[2].set_exception(error)
        return True


class _ProviderGate:
    """This process's in-flight slots for one provider, as many as its ``AdaptiveLimit`` allows.

    A semaphore whose size changes while calls hold it. Waiters are admitted
    whenever in-flight falls below the current level: the highest ``priority``
    first, and in arrival order among equals. The replay gives a call the
    length of the chain of calls still waiting on it, so the calls a
    conversation's next turn needs go before calls only its end result needs;
    in arrival order those on-the-side calls delayed every chain behind them
    and a run ended on a few chains at a fraction of the cap.
    """

    def __init__(self, limit: AdaptiveLimit) -> None:
        self.limit = limit
        self.pacer = SendPacer()
        self.in_flight = 0
        self._waiters: WaitQueue[None] = WaitQueue()

    async def acquire(self, priority: int = 0) -> int:
        """Wait for a slot; return the limit's epoch at admission."""
        if self.in_flight < self.limit.level and not self._waiters.waiting():
            self.in_flight += 1
            return self.limit.epoch
        waiter = self._waiters.join(priority)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # admitted and cancelled in the same step: pass the slot on
            raise  # still queued: the queue drops it when it comes first
        return self.limit.epoch

    def release(self) -> None:
        """Free a slot; the waiters are looked at once the releasing task's step has run.

        That step usually submits the next call of the same chain (a call's
        answer is what its successor waits for); waking at once would hand the
        slot to whoever already waits, however short their chain.
        """
        self.in_flight -= 1
        if self._waiters.waiting():
            asyncio.get_running_loop().call_soon(self.wake)

    def wake(self) -> None:
        """Admit waiters while there is room (after a release or a raised level)."""
        while self.in_flight < self.limit.level and self._waiters.serve(None):
            self.in_flight += 1


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

    async def acquire(self, key: str, limit: int, priority: int = 0) -> str:
        """Wait until fewer than ``limit`` calls to ``key`` are in flight anywhere; return a token.

        Of this process's waiting calls, the higher ``priority`` is served first (as at the provider gate).
        """

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
    paced_seconds: float = 0.0  # waited by calls for their turn to go out (``SendPacer``)


class Scheduler:
    """Runs call coroutines under limits, retrying transient failures.

    One scheduler serves one event loop; its semaphores are created lazily so
    it can be built outside the loop that will use it.
    """

    def __init__(
        self,
        max_concurrency: int = 32,
        default_limits: ProviderLimits = ProviderLimits(),
        limits: dict[str, ProviderLimits] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        base_delay: float = 0.5,
        max_delay: float = 60.0,
        glitch_delay: float = 0.1,
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
        self.glitch_delay = glitch_delay
        self.attempt_timeout = attempt_timeout
        self.rate_limiter: RateLimiter = rate_limiter or TokenBucketLimiter()
        self.shared_slots = shared_slots
        self._releasing: set[asyncio.Task[None]] = set()
        self.rng = rng or random.Random()
        self.stats = SchedulerStats()
        self._global: asyncio.Semaphore | None = None
        self._providers: dict[str, _ProviderGate] = {}
        # Per provider: transient failures since its last success (any call's), for the backoff's exponent.
        self._failures_since_success: Counter[str] = Counter()
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
        gate = self._providers.get(provider)
        if gate is not None:
            gate.limit.set_ceiling(self.ceiling(limits))
            gate.wake()

    def ceiling(self, limits: ProviderLimits) -> int:
        """The most calls to a provider with ``limits`` this process may have in flight."""
        return in_flight_ceiling(limits, self.max_concurrency)

    def levels(self) -> dict[str, tuple[int, int]]:
        """Per provider used so far: (current adaptive level, ceiling), for progress lines.

        Safe to call from another thread than the loop's (a progress reporter): it reads a copy.
        """
        return {provider: (gate.limit.level, gate.limit.ceiling) for provider, gate in list(self._providers.items())}

    def backoff_step(self, provider: str, retry: int) -> int:
        """The exponent for a call's ``retry``-th wait, after its failure was recorded: capped by how many
        failures in a row the provider has had (see the module's docstring)."""
        return max(0, min(retry, self._failures_since_success[provider] - 1))

    def backoff_delay(self, step: int, retry_after: float | None, overload: bool = True) -> float:
        """Exponential backoff with equal jitter at ``step`` (``backoff_step``); ``Retry-After`` is a floor.

        At step 0 a failure that is not an ``overload`` waits ``glitch_delay`` at most (module docstring).
        """
        ceiling = min(self.max_delay, self.base_delay * 2.0**step)
        if step == 0 and not overload:
            ceiling = min(ceiling, self.glitch_delay)
        delay = ceiling / 2 + self.rng.uniform(0, ceiling / 2)
        if retry_after is not None and retry_after > 0:
            delay = max(delay, min(retry_after, self.max_delay * 5))
        return delay

    def _slots(self, provider: str) -> tuple[asyncio.Semaphore, _ProviderGate, ProviderLimits]:
        if self._global is None:
            self._global = asyncio.Semaphore(self.max_concurrency)
        limits = self.limits.get(provider, self.default_limits)
        gate = self._providers.get(provider)
        if gate is None:
            gate = self._providers[provider] = _ProviderGate(AdaptiveLimit(self.ceiling(limits)))
        elif gate.limit.ceiling != self.ceiling(limits):
            gate.limit.set_ceiling(self.ceiling(limits))
            gate.wake()
        return self._global, gate, limits

    def _release(
        self, provider: str, provider_slots: _ProviderGate, global_slots: asyncio.Semaphore, shared: str | None
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

    async def submit(self, provider: str, call: Callable[[], Awaitable[T]], priority: int = 0) -> T:
        """Run ``call()`` once it fits under the limits; retry transient errors.

        Of the calls waiting for one provider, the higher ``priority`` goes first.

        Raises ``RetriesExhausted`` after ``max_attempts`` transient failures;
        a ``PermanentCallError`` (or any other exception) propagates at once.
        """
        global_slots, provider_slots, limits = self._slots(provider)
        loop = asyncio.get_running_loop()
        self.stats.submitted += 1
        retry = 0
        while True:
            epoch = await provider_slots.acquire(priority)
            shared: str | None = None
            holds_global = False
            try:
                if limits.rpm is not None:
                    await self.rate_limiter.acquire(provider, limits.rpm)
                if self.shared_slots is not None and limits.max_in_flight is not None:
                    shared = await self.shared_slots.acquire(provider, limits.max_in_flight, priority)
                await global_slots.acquire()
                holds_global = True
                wait = provider_slots.pacer.reserve(loop.time(), provider_slots.limit.level)
                if wait:
                    self.stats.paced_seconds += wait
                    await asyncio.sleep(wait)
            except BaseException:
                if holds_global:
                    global_slots.release()
                if shared is not None:
                    self._release_shared(provider, shared)
                provider_slots.release()
                raise
            self.stats.attempts += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            sent = loop.time()
            try:
                if self.attempt_timeout is not None:
                    result = await asyncio.wait_for(call(), self.attempt_timeout)
                else:
                    result = await call()
                provider_slots.pacer.observe(loop.time() - sent)
                provider_slots.limit.on_success()
                self._failures_since_success[provider] = 0
                return result
            except TimeoutError:
                error = TransientCallError("timeout", f"no answer within {self.attempt_timeout}s")
            except TransientCallError as exc:
                error = exc
            finally:
                self._release(provider, provider_slots, global_slots, shared)
            # Outside every slot from here on: waiting must not hold capacity.
            self.stats.errors[error.kind] += 1
            self._failures_since_success[provider] += 1
            overload = is_overload(error)
            if overload and provider_slots.limit.on_overload(epoch):
                log.info(
                    "%s is overloaded (%s): in-flight limit cut to %d of %d",
                    provider,
                    error.kind,
                    provider_slots.limit.level,
                    provider_slots.limit.ceiling,
                )
            if retry + 1 >= self.max_attempts:
                self.stats.gave_up += 1
                raise RetriesExhausted(error, retry + 1)
            # Retry-After delays this request only (``backoff_delay`` makes it a floor):
            # pausing the whole provider on one 429 idled every other slot for it.
            delay = self.backoff_delay(self.backoff_step(provider, retry), error.retry_after, overload)
            self.stats.retries += 1
            self.stats.backoff_seconds += delay
            retry += 1
            await asyncio.sleep(delay)
