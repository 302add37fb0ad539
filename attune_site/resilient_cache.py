"""Django's Redis cache that degrades instead of failing when Redis is away.

Nothing Attune keeps in the cache is the only copy: sessions are written through to the database
(``cached_db``), reply locks and dashboard results are rebuilt, rate-limit windows restart. So while Redis
cannot be reached every read is a miss and every write is dropped, a warning says so (once a minute per
process, not once per request), and participant and research pages keep answering. Only connection and
timeout errors are treated so; any other error (a bug) is raised as before.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger("attune.cache")

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
WARN_EVERY_S = 60.0


class ResilientRedisCache(RedisCache):
    _last_warning = 0.0

    def _unreachable(self, operation: str, exc: BaseException) -> None:
        now = time.monotonic()
        if now - ResilientRedisCache._last_warning >= WARN_EVERY_S:
            ResilientRedisCache._last_warning = now
            logger.warning(
                "cache: Redis unreachable (%s on %s); reads are misses and writes are dropped until it is back",
                type(exc).__name__,
                operation,
            )

    def add(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> bool:
        try:
            return bool(super().add(key, value, timeout, version))
        except UNREACHABLE as exc:
            self._unreachable("add", exc)
            return True  # a lock that cannot be kept is not held against anyone

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        try:
            return super().get(key, default, version)
        except UNREACHABLE as exc:
            self._unreachable("get", exc)
            return default

    def set(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> None:
        try:
            super().set(key, value, timeout, version)
        except UNREACHABLE as exc:
            self._unreachable("set", exc)

    def touch(self, key: Any, timeout: Any = None, version: Any = None) -> bool:
        try:
            return bool(super().touch(key, timeout, version))
        except UNREACHABLE as exc:
            self._unreachable("touch", exc)
            return False

    def delete(self, key: Any, version: Any = None) -> bool:
        try:
            return bool(super().delete(key, version))
        except UNREACHABLE as exc:
            self._unreachable("delete", exc)
            return False

    def get_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        try:
            return dict(super().get_many(keys, version))
        except UNREACHABLE as exc:
            self._unreachable("get_many", exc)
            return {}

    def has_key(self, key: Any, version: Any = None) -> bool:
        try:
            return bool(super().has_key(key, version))
        except UNREACHABLE as exc:
            self._unreachable("has_key", exc)
            return False

    def incr(self, key: Any, delta: int = 1, version: Any = None) -> Any:
        try:
            return super().incr(key, delta, version)
        except UNREACHABLE as exc:
            self._unreachable("incr", exc)
            return delta

    def set_many(self, data: Any, timeout: Any = None, version: Any = None) -> list[Any]:
        try:
            return list(super().set_many(data, timeout, version))
        except UNREACHABLE as exc:
            self._unreachable("set_many", exc)
            return list(data)

    def delete_many(self, keys: Any, version: Any = None) -> None:
        try:
            super().delete_many(keys, version)
        except UNREACHABLE as exc:
            self._unreachable("delete_many", exc)

    def clear(self) -> None:
        try:
            super().clear()
        except UNREACHABLE as exc:
            self._unreachable("clear", exc)
