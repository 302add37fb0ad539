"""Provider limits shared by every worker process, kept in Redis.

The replay scheduler (``attunebench.replay.scheduler``) holds a provider's
caps within one process. Several Celery workers, on one machine or many,
replay the same run at once, so the caps a researcher sets on an evaluated
model (requests per minute, requests in flight) must hold across all of
them: these two classes are the scheduler's ``RateLimiter`` and
``SharedSlots`` for that case. They need only Redis, not Django.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable
from typing import Any

from attunebench.replay.scheduler import WaitQueue
from collection.rate_limits import SLIDING_WINDOW_ADMIT

log = logging.getLogger("attune.replay")

REDIS_RPM_PREFIX = "attune:rpm:"
REDIS_SLOTS_PREFIX = "attune:inflight:"
# A slot whose release was lost (Redis unreachable at that moment) is free
# again after this. A dead worker's slots come back sooner, through its
# heartbeat. Longer than the default call timeout (120 s), so a live call
# keeps its slot; a call allowed to run longer could briefly exceed the cap.
DEFAULT_LEASE_S = 180.0


def _client(url: str) -> Any:
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(url)


class RedisRateLimiter:
    """Requests per minute per provider across processes: a sliding window of the last minute's requests.

    Never more than ``rpm`` requests in any 60 seconds, counted over every
    worker: one sorted set per provider, checked and updated by one script
    (the participants' chat limits use the same one), so two workers cannot
    both take the last place. (A counter per clock minute would let ``rpm``
    through at 12:00:59 and ``rpm`` more at 12:01:00, a double burst that
    providers answer with 429s.) A refused request waits exactly until the
    oldest one in the window leaves it. Time is Redis's own clock, so workers
    on machines whose clocks disagree still share one window; ``clock``
    replaces it in tests, which move time instead of waiting for it.
    """

    WINDOW_S = 60.0

    def __init__(self, url: str, clock: Callable[[], float] | None = None) -> None:
        self.url = url
        self.clock = clock
        self._redis: Any = None
        self._admit: Any = None

    async def try_acquire(self, key: str, rpm: int) -> float:
        """Take a place in ``key``'s window if one is free: 0.0, else the seconds until one frees up."""
        if self._redis is None:
            self._redis = _client(self.url)
            self._admit = self._redis.register_script(SLIDING_WINDOW_ADMIT)
        now = "" if self.clock is None else repr(self.clock())
        waited = await self._admit(keys=[f"{REDIS_RPM_PREFIX}{key}"], args=[now, self.WINDOW_S, rpm, uuid.uuid4().hex])
        return float(waited)

    async def acquire(self, key: str, rpm: int) -> None:
        while True:
            wait = await self.try_acquire(key, rpm)
            if wait <= 0:
                return
            # A little jitter so workers refused together do not all come back at the same instant.
            await asyncio.sleep(wait + random.uniform(0, 0.05))


REDIS_ALIVE_PREFIX = "attune:alive:"
DEFAULT_HEARTBEAT_S = 5.0

# Atomically: drop expired leases and slots whose owner process stopped
# heartbeating, then take a slot if fewer than ARGV[1] are held. Members are
# "<owner>:<token>". Redis's own clock, so workers on machines with skewed
# clocks agree. (Reads the owners' heartbeat keys: standalone Redis, not Cluster.)
_TAKE_SLOT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local owner = string.match(member, '^([^:]+):')
  if owner and redis.call('EXISTS', ARGV[4] .. owner) == 0 then
    redis.call('ZREM', KEYS[1], member)
  end
end
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], t + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
  return 1
end
return 0
"""

_COUNT_HELD = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
return redis.call('ZCOUNT', KEYS[1], '(' .. t, '+inf')
"""


class RedisInFlightSlots:
    """A provider's in-flight cap across every worker process: slots in a sorted set.

    Each call holds a member "<owner>:<token>" scored with a lease expiry. The
    owning process keeps a heartbeat key alive (every ``heartbeat_s``, expiring
    after three beats); a worker killed mid-call stops beating, and the next
    process that asks for a slot drops the dead worker's slots. The lease is a
    last resort, for a release that never reached Redis.

    Waiting is polling, with jitter: a process only waits when the provider is
    saturated, where a few milliseconds more cost nothing against the model's
    latency. One task per process and provider polls; the process's waiting
    calls queue, the highest priority first and then in arrival order (the
    scheduler's order: a conversation's next turn before calls only its end
    result needs), and are handed the slots it takes.
    (With every waiter polling, each of a worker's 16 or so waiting calls
    tried every 10-30 ms, each try walking the provider's slots: 7% of the
    worker's CPU in bench/replay_distributed.py, and Redis's load grew with
    every waiting call of every worker.)
    """

    def __init__(
        self, url: str, lease_s: float = DEFAULT_LEASE_S, poll_s: float = 0.02, heartbeat_s: float = DEFAULT_HEARTBEAT_S
    ) -> None:
        self.url = url
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.owner = uuid.uuid4().hex
        self._redis: Any = None
        self._take: Any = None
        self._count: Any = None
        self._heartbeat: asyncio.Task[None] | None = None
        # Per provider key: this process's waiters, the task polling for them, and the cap the latest
        # waiter asked for (a cap changed in the registry applies to the next attempt).
        self._waiters: dict[str, WaitQueue[str]] = {}
        self._pollers: dict[str, asyncio.Task[None]] = {}
        self._limits: dict[str, int] = {}

    def _connect(self) -> None:
        if self._redis is None:
            self._redis = _client(self.url)
            self._take = self._redis.register_script(_TAKE_SLOT)
            self._count = self._redis.register_script(_COUNT_HELD)

    async def _beat(self) -> None:
        await self._redis.set(REDIS_ALIVE_PREFIX + self.owner, 1, px=int(self.heartbeat_s * 3000))

    async def _keep_beating(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._beat()
            except Exception as exc:  # Redis away for a moment: say so and keep beating
                log.warning(
                    "in-flight slots: heartbeat to Redis failed (%s); other workers may take this "
                    "worker's slots if it stays down",
                    exc,
                )

    async def _alive(self) -> None:
        """Heartbeat on before the first slot is taken, then in the background for this process."""
        if self._heartbeat is None or self._heartbeat.done():
            await self._beat()
            self._heartbeat = asyncio.get_running_loop().create_task(self._keep_beating())

    async def try_acquire(self, key: str, limit: int) -> str | None:
        """One atomic attempt: the slot's token, or None when ``limit`` live slots are held."""
        self._connect()
        await self._alive()
        token = f"{self.owner}:{uuid.uuid4().hex}"
        if await self._take(keys=[REDIS_SLOTS_PREFIX + key], args=[limit, self.lease_s, token, REDIS_ALIVE_PREFIX]):
            return token
        return None

    async def acquire(self, key: str, limit: int, priority: int = 0) -> str:
        """Wait for one of ``limit`` slots of ``key`` anywhere; return its token.

        The caller queues and this process's poller tries Redis for it (at
        once when nobody waits before it): the slots this process gets go to
        the highest ``priority`` first, then in arrival order.
        """
        self._limits[key] = limit
        queue = self._waiters.get(key)
        if queue is None:
            queue = self._waiters[key] = WaitQueue()
        waiter = queue.join(priority)
        poller = self._pollers.get(key)
        if poller is None or poller.done():
            self._pollers[key] = asyncio.get_running_loop().create_task(self._poll(key))
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                await asyncio.shield(self._give_back(key, waiter.result()))  # handed a slot as it gave up
            raise  # still queued: the queue drops it when it comes first

    async def _poll(self, key: str) -> None:
        """Take slots for this process's waiters of ``key`` until none is left.

        A slot taken goes to the first in line and the next try follows at
        once (a release may have freed several); a refusal waits a poll. A
        Redis error is the first in line's error, as its own try would have
        raised it; the others go on waiting.
        """
        waiters = self._waiters[key]
        while waiters.waiting():
            try:
                token = await self.try_acquire(key, self._limits[key])
            except Exception as exc:
                waiters.fail(exc)
                await asyncio.sleep(self.poll_s * (0.5 + random.random()))
                continue
            if token is None:
                await asyncio.sleep(self.poll_s * (0.5 + random.random()))
            elif not waiters.serve(token):
                await self._give_back(key, token)  # everyone gave up while the slot was being taken

    async def _give_back(self, key: str, token: str) -> None:
        """Release a slot nobody will use; if Redis is away, say so: the slot's lease frees it later."""
        try:
            await self.release(key, token)
        except Exception as exc:
            log.warning("in-flight slots: could not give back an unused slot (its lease will free it): %s", exc)

    async def release(self, key: str, token: str) -> None:
        self._connect()
        await self._redis.zrem(REDIS_SLOTS_PREFIX + key, token)

    async def held(self, key: str) -> int:
        """Slots held now (leases not yet expired; a dead owner's count until someone asks)."""
        self._connect()
        return int(await self._count(keys=[REDIS_SLOTS_PREFIX + key]))
