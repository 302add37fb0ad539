"""Sliding-window rate limits: at most N events in any window of W seconds, not per clock minute.

A fixed clock-minute counter lets a burst of N at 12:00:59 and another N at
12:01:00 both through; a sliding window never admits more than N in any W
seconds. With Redis the window is one sorted set per key, checked and updated
by one Lua script, so every web worker shares it and concurrent requests can't
both take the last place. Without Redis (the embedded demo, one process) the
same rule runs on an in-process log under a lock.

The clock is a parameter so tests can move time instead of waiting for it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

logger = logging.getLogger("attune.participant")

Clock = Callable[[], float]

# The sliding window in Redis, shared by the chat limits here and the providers' requests-per-minute limit
# (scoring.redis_limits). Atomically: forget events older than the window, then record this one if fewer
# than the limit remain. Returns '0' when admitted (a refused event is not recorded), else the seconds until
# the oldest event in the window leaves it. KEYS[1] = the window's sorted set; ARGV = now in seconds (blank:
# Redis's own clock, which every machine shares), window seconds, limit, a unique member.
SLIDING_WINDOW_ADMIT = """
local now = tonumber(ARGV[1])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
  return '0'
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tostring(math.max(tonumber(oldest[2]) + window - now, 0.001))
"""


class WindowLog(Protocol):
    def admit(self, key: str, now: float, window: float, limit: int) -> bool: ...


class MemoryWindowLog:
    """Per-process event log; bounded by the number of keys seen in one window (old ones are dropped)."""

    def __init__(self) -> None:
        self._events: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many keys the log holds now."""
        return len(self._events)

    def admit(self, key: str, now: float, window: float, limit: int) -> bool:
        with self._lock:
            for stale in [k for k, log in self._events.items() if not log or log[-1] <= now - window]:
                del self._events[stale]
            log = self._events.setdefault(key, deque())
            while log and log[0] <= now - window:
                log.popleft()
            if len(log) >= limit:
                return False
            log.append(now)
            return True


class RedisWindowLog:
    """The shared log: one sorted set per key, admitted atomically by a Lua script."""

    def __init__(self, url: str) -> None:
        import redis

        self._redis: Any = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
        self._admit = self._redis.register_script(SLIDING_WINDOW_ADMIT)
        self._warned = -60.0

    def admit(self, key: str, now: float, window: float, limit: int) -> bool:
        """Admitted when within the limit; while Redis cannot be reached every event is admitted (a limit
        against abuse must not lock participants out of a study) and a warning says so once a minute."""
        import redis

        try:
            return float(self._admit(keys=[key], args=[now, window, limit, f"{now}:{uuid.uuid4().hex}"])) == 0
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
            if time.monotonic() - self._warned >= 60.0:
                self._warned = time.monotonic()
                logger.warning("rate limits: Redis unreachable (%s); admitting everything until it is back", exc)
            return True


class SlidingWindowLimiter:
    """At most ``limit`` events per ``window`` seconds for each key."""

    def __init__(self, log: WindowLog, limit: int, window: float, prefix: str, clock: Clock = time.time) -> None:
        if limit < 1 or window <= 0:
            raise ValueError(f"a rate limit needs limit >= 1 and window > 0, got {limit} per {window} s")
        self.log, self.limit, self.window, self.prefix, self.clock = log, limit, window, prefix, clock

    def admit(self, key: str) -> bool:
        """Record one event for ``key`` and say whether it is within the limit (a refused one is not recorded)."""
        return self.log.admit(f"{self.prefix}:{key}", self.clock(), self.window, self.limit)


def window_log(redis_url: str | None) -> WindowLog:
    """The shared Redis log when Redis is configured, else this process's own."""
    return RedisWindowLog(redis_url) if redis_url else MemoryWindowLog()
