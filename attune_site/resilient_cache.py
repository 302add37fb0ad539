"""Django's Redis cache that degrades instead of failing when Redis is away.

Nothing Attune keeps in the cache is the only copy: sessions are written through to the database
(``cached_db``), reply locks and dashboard results are rebuilt, rate-limit windows restart. So while Redis
cannot be reached every read is a miss and every write is dropped, a warning says so (once a minute per
process, not once per request), and participant and research pages keep answering. Only connection and
timeout errors are treated so; any other error (a bug) is raised as before.

Two rules keep an outage cheap and harmless:

- after a failure Redis is taken as down for ``SKIP_S`` seconds (per process): a Redis that hangs rather than
  refuses would otherwise cost every cache call its socket timeout;
- a write that was dropped (a set, delete, add or increment) leaves the value Redis held before, which would
  come back with Redis: a session a participant or researcher ended during the outage (logged out, flushed)
  would be read again from the old entry. The key is remembered, and deleted as soon as Redis answers again,
  so the next read falls through to the database, which holds the truth.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger("attune.cache")

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
WARN_EVERY_S = 60.0
SKIP_S = 5.0
STALE_AT_MOST = 10_000  # keys remembered per process; beyond that the oldest are forgotten (and logged)

T = TypeVar("T")


class ResilientRedisCache(RedisCache):
    _last_warning = 0.0
    _down_until = 0.0
    _stale: dict[tuple[Any, Any], None] = {}  # (key, version) of writes dropped while Redis was away, in order
    clock: Callable[[], float] = staticmethod(time.monotonic)  # tests move time instead of waiting for it

    def _unreachable(self, operation: str, exc: BaseException | None) -> None:
        now = self.clock()
        if exc is not None:
            ResilientRedisCache._down_until = now + SKIP_S
        if now - ResilientRedisCache._last_warning >= WARN_EVERY_S:
            ResilientRedisCache._last_warning = now
            logger.warning(
                "cache: Redis unreachable (%s on %s); reads are misses and writes are dropped until it is back",
                type(exc).__name__ if exc is not None else "down a moment ago",
                operation,
            )

    def _call(self, operation: str, fallback: T, call: Callable[[], T], written: list[tuple[Any, Any]]) -> T:
        """``call()``, or ``fallback`` while Redis is away; ``written`` are the keys the call would change."""
        if self.clock() < ResilientRedisCache._down_until:
            self._remember(written)
            self._unreachable(operation, None)
            return fallback
        try:
            if ResilientRedisCache._stale:
                self._forget_stale()
            return call()
        except UNREACHABLE as exc:
            self._remember(written)
            self._unreachable(operation, exc)
            return fallback

    def _remember(self, written: list[tuple[Any, Any]]) -> None:
        stale = ResilientRedisCache._stale
        for item in written:
            stale[item] = None
        while len(stale) > STALE_AT_MOST:
            del stale[next(iter(stale))]
            logger.warning("cache: more than %d writes dropped; the oldest will not be undone", STALE_AT_MOST)

    def _forget_stale(self) -> None:
        """Redis is back: delete what it held for the keys whose writes were dropped (the database decides)."""
        stale = list(ResilientRedisCache._stale)
        by_version: dict[Any, list[Any]] = {}
        for key, version in stale:
            by_version.setdefault(version, []).append(key)
        for version, keys in by_version.items():
            super().delete_many(keys, version)  # raises while Redis is still away: kept for the next try
        for item in stale:
            ResilientRedisCache._stale.pop(item, None)
        logger.info("cache: Redis is back; %d value(s) written while it was away were cleared", len(stale))

    def add(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> bool:
        # a lock that cannot be kept is not held against anyone
        return bool(
            self._call(
                "add",
                True,
                lambda: super(ResilientRedisCache, self).add(key, value, timeout, version),
                [(key, version)],
            )
        )

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._call("get", default, lambda: super(ResilientRedisCache, self).get(key, default, version), [])

    def set(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> None:
        self._call(
            "set", None, lambda: super(ResilientRedisCache, self).set(key, value, timeout, version), [(key, version)]
        )

    def touch(self, key: Any, timeout: Any = None, version: Any = None) -> bool:
        return bool(
            self._call("touch", False, lambda: super(ResilientRedisCache, self).touch(key, timeout, version), [])
        )

    def delete(self, key: Any, version: Any = None) -> bool:
        return bool(
            self._call("delete", False, lambda: super(ResilientRedisCache, self).delete(key, version), [(key, version)])
        )

    def get_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        return dict(self._call("get_many", {}, lambda: super(ResilientRedisCache, self).get_many(keys, version), []))

    def has_key(self, key: Any, version: Any = None) -> bool:
        return bool(self._call("has_key", False, lambda: super(ResilientRedisCache, self).has_key(key, version), []))

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> Any:
        return self._call(
            "incr", delta, lambda: super(ResilientRedisCache, self).incr(key, delta, version), [(key, version)]
        )

    def set_many(self, data: Any, timeout: Any = None, version: Any = None) -> list[Any]:
        keys = list(data)
        written = [(key, version) for key in keys]
        return list(
            self._call(
                "set_many", keys, lambda: super(ResilientRedisCache, self).set_many(data, timeout, version), written
            )
        )

    def delete_many(self, keys: Any, version: Any = None) -> None:
        keys = list(keys)
        written = [(key, version) for key in keys]
        self._call("delete_many", None, lambda: super(ResilientRedisCache, self).delete_many(keys, version), written)

    def clear(self) -> None:
        self._call("clear", None, lambda: super(ResilientRedisCache, self).clear(), [])
