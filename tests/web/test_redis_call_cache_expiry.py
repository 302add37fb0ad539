"""The Redis copy of the call cache expires (Redis is also the broker); the database keeps the durable copy and
puts an expired answer back in Redis the next time a replay asks for it."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from attunebench.replay.cache import CachedCall, LayeredCache
from scoring.replay_service import REDIS_CACHE_PREFIX, REDIS_CACHE_TTL_SECONDS, DatabaseCallCache, RedisCallCache

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL")

ANSWER = CachedCall(model="openai/fake-em", prompt_version="v", response='{"ok": true}', prompt_tokens=3)


def redis_client():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


def test_an_answer_written_to_redis_expires_within_a_week():
    asyncio.run(RedisCallCache(settings.REDIS_URL).set("expiry-test-1", ANSWER))
    ttl = redis_client().ttl(REDIS_CACHE_PREFIX + "expiry-test-1")
    assert 0 < ttl <= REDIS_CACHE_TTL_SECONDS == 7 * 24 * 3600


@pytest.mark.django_db(transaction=True)
def test_an_expired_answer_comes_back_from_the_database_with_a_new_expiry():
    async def write_then_read_after_expiry() -> CachedCall | None:
        layered = LayeredCache(RedisCallCache(settings.REDIS_URL), DatabaseCallCache())
        await layered.set("expiry-test-2", ANSWER)
        redis_client().delete(REDIS_CACHE_PREFIX + "expiry-test-2")  # as if it had expired
        return await layered.get("expiry-test-2")

    assert asyncio.run(write_then_read_after_expiry()) == ANSWER
    assert 0 < redis_client().ttl(REDIS_CACHE_PREFIX + "expiry-test-2") <= REDIS_CACHE_TTL_SECONDS
