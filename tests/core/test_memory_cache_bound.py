"""The in-memory call cache is bounded: a worker process keeps one for its whole life."""

from __future__ import annotations

import asyncio

import pytest

from attunebench.replay.cache import CachedCall, MemoryCache


def entry(text: str) -> CachedCall:
    return CachedCall(model="m", prompt_version="v", response=text)


def test_the_least_recently_used_entry_goes_first():
    async def scenario() -> tuple[list[str | None], int]:
        cache = MemoryCache(maxsize=2)
        await cache.set("a", entry("A"))
        await cache.set("b", entry("B"))
        await cache.get("a")  # "a" is now the more recently used; "b" is next out
        await cache.set("c", entry("C"))
        found = [(await cache.get(k) or entry("-")).response for k in ("a", "b", "c")]
        return found, len(cache)

    found, size = asyncio.run(scenario())
    assert found == ["A", "-", "C"] and size == 2


def test_setting_a_key_again_refreshes_it_without_growing():
    async def scenario() -> tuple[bool, bool, int]:
        cache = MemoryCache(maxsize=2)
        await cache.set("a", entry("A"))
        await cache.set("b", entry("B"))
        await cache.set("a", entry("A2"))  # "b" becomes the oldest
        await cache.set("c", entry("C"))
        a = await cache.get("a")
        return a is not None and a.response == "A2", await cache.get("b") is None, len(cache)

    assert asyncio.run(scenario()) == (True, True, 2)


def test_default_bound_and_a_bad_size():
    assert MemoryCache().maxsize == 10_000
    with pytest.raises(ValueError, match="at least 1"):
        MemoryCache(maxsize=0)
