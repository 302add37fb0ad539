"""Adaptive in-flight limits per provider: halve on sustained overload, climb back by one per window of successes.

"Sustained": more than a quarter (``OVERLOAD_SHARE``) of a window of ``level`` outcomes refused, the window
never shorter than ``MIN_WINDOW`` (20) outcomes.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from attunebench.replay.scheduler import (
    AdaptiveLimit,
    ProviderLimits,
    Scheduler,
    TransientCallError,
    is_overload,
)


def test_the_level_starts_at_the_ceiling_and_halves_on_sustained_overload():
    limit = AdaptiveLimit(32)
    assert (limit.level, limit.ceiling) == (32, 32)
    # At 32 a quarter of the window is 8 refusals: the 9th in one window cuts.
    assert [limit.on_overload(limit.epoch) for _ in range(9)] == [False] * 8 + [True]
    assert limit.level == 16
    # At 16 the window is still 20 outcomes, a quarter 5: the 6th refusal of the new window cuts.
    assert [limit.on_overload(limit.epoch) for _ in range(6)] == [False] * 5 + [True]
    assert limit.level == 8


def test_isolated_refusals_do_not_cut_the_level():
    # Level 10: a window is the 20 outcomes of MIN_WINDOW, a quarter of it 5 refusals. Ten windows of
    # 5 refusals + 15 successes (a 25% refusal rate, never more in one window) keep 10.
    limit = AdaptiveLimit(10)
    for _ in range(10):
        for _ in range(5):
            assert limit.on_overload(limit.epoch) is False
        for _ in range(15):
            limit.on_success()
    assert (limit.level, limit.cuts) == (10, 0)
    # Six refusals in one window is more than a quarter: 10 -> 5.
    assert [limit.on_overload(limit.epoch) for _ in range(6)] == [False] * 5 + [True]
    assert (limit.level, limit.cuts) == (5, 1)


def test_at_a_low_level_a_stray_refusal_does_not_cut_it():
    # Level 4 with a window of 4 outcomes would make one 429 "sustained": 10% random 429s then cut it
    # faster than successes raise it. The window stays 20 outcomes: a refusal in every 5 calls keeps 4.
    limit = AdaptiveLimit(4)
    for _ in range(20):
        assert limit.on_overload(limit.epoch) is False
        for _ in range(4):
            limit.on_success()
    assert (limit.level, limit.cuts) == (4, 0)


def test_overloads_from_calls_admitted_before_a_cut_do_not_cut_again():
    # 32 calls admitted at epoch 0 all come back 429: one episode, one halving (at the
    # 9th refusal, more than a quarter of 32); the other 23 were sent at the old level.
    limit = AdaptiveLimit(32)
    cuts = [limit.on_overload(0) for _ in range(32)]
    assert cuts.index(True) == 8 and cuts.count(True) == 1
    assert limit.level == 16 and limit.epoch == 1


def test_recovery_takes_a_window_of_successes_per_step():
    limit = AdaptiveLimit(8)
    for _ in range(5):
        limit.on_overload(0)  # 5 refusals are not more than a quarter of a 20-outcome window
    assert limit.level == 8
    limit.on_overload(0)  # 6 are: 8 -> 4
    for _ in range(3):
        limit.on_success()
    assert limit.level == 4  # 3 of the 4 successes the window at level 4 needs
    limit.on_success()
    assert limit.level == 5
    # 5 + 6 + 7 more successes climb 5 -> 6 -> 7 -> 8.
    for _ in range(5 + 6 + 7):
        limit.on_success()
    assert limit.level == 8


def test_the_level_never_exceeds_the_ceiling_nor_falls_below_one():
    limit = AdaptiveLimit(3)
    for _ in range(1000):
        limit.on_success()
    assert limit.level == 3
    for _ in range(12):
        limit.on_overload(limit.epoch)  # each 6th refusal is more than a quarter of 20: 3 -> 1 -> 1
    assert limit.level == 1
    for _ in range(1):
        limit.on_success()
    assert limit.level == 2  # a window at level 1 is one success


def test_a_new_ceiling_moves_an_unreduced_level_and_caps_a_reduced_one():
    limit = AdaptiveLimit(8)
    limit.set_ceiling(12)
    assert limit.level == 12  # was at the ceiling: follows it up
    for _ in range(6):
        limit.on_overload(limit.epoch)  # the 6th refusal is more than a quarter of 20: 12 -> 6
    limit.set_ceiling(20)
    assert limit.level == 6  # reduced: stays until successes raise it
    limit.set_ceiling(4)
    assert limit.level == 4
    with pytest.raises(ValueError, match="ceiling must be >= 1"):
        AdaptiveLimit(0)


def test_overload_is_429_503_529_or_a_provider_saying_overloaded():
    assert is_overload(TransientCallError("429", status=429))
    assert is_overload(TransientCallError("503", status=503))
    assert is_overload(TransientCallError("529", status=529))
    assert is_overload(TransientCallError("connection", "Overloaded: try again later"))
    assert not is_overload(TransientCallError("500", status=500))
    assert not is_overload(TransientCallError("timeout"))


def test_a_provider_without_a_cap_of_its_own_runs_at_the_global_cap():
    scheduler = Scheduler(max_concurrency=32)
    assert scheduler.ceiling(ProviderLimits()) == 32
    assert scheduler.ceiling(ProviderLimits(max_in_flight=8)) == 8
    assert scheduler.ceiling(ProviderLimits(max_in_flight=100)) == 32


def test_the_scheduler_halves_a_provider_on_a_429_burst_and_climbs_back():
    # No clock: calls wait on events, backoff is 0 s (base_delay 0), no Retry-After.
    scheduler = Scheduler(max_concurrency=8, base_delay=0.0)
    state = {"now": 0, "started": 0}
    first_wave = asyncio.Event()
    second_wave = asyncio.Event()
    refused: set[int] = set()

    def overloaded_once(i: int):
        async def call() -> int:
            if i not in refused:
                state["now"] += 1
                await first_wave.wait()
                state["now"] -= 1
                refused.add(i)
                raise TransientCallError("429", "rate limited", status=429)
            return i

        return call

    async def blocked() -> None:
        state["started"] += 1
        await second_wave.wait()

    async def main():
        wave = [asyncio.ensure_future(scheduler.submit("p", overloaded_once(i))) for i in range(8)]
        for _ in range(5):
            await asyncio.sleep(0)
        admitted = state["now"]
        first_wave.set()
        assert sorted(await asyncio.gather(*wave)) == list(range(8))
        after_first = scheduler.levels()["p"]
        wave2 = [asyncio.ensure_future(scheduler.submit("p", blocked)) for _ in range(8)]
        for _ in range(5):
            await asyncio.sleep(0)
        started_at_once = state["started"]
        second_wave.set()
        await asyncio.gather(*wave2)
        return admitted, after_first, started_at_once, scheduler.levels()["p"]

    admitted, after_first, started_at_once, final = asyncio.run(main())
    assert admitted == 8  # the level starts at the ceiling
    # One 429 burst cuts 8 -> 4 once (at its 6th refusal, more than a quarter of 20); the 8 retries then succeed: 4 successes climb
    # 4 -> 5, the other 4 are short of the 5 the next step needs.
    assert after_first == (5, 8)
    assert started_at_once == 5  # the second wave is admitted at the current level only
    # 8 more successes: 4 + 1 = 5 completes the window at 5 -> 6, then 6 more -> 7, 1 left over.
    assert final == (7, 8)
    assert scheduler.stats.errors["429"] == 8


def test_a_429_burst_from_the_provider_halves_once_and_its_retry_after_is_honoured():
    # (8 of 8 refused is sustained overload: more than a quarter of a 20-outcome window.)
    # Through litellm against the fake server, which answers the first 8 requests 429
    # with Retry-After 0.3 s and every later one normally.
    from attunebench.replay import prompts as P
    from attunebench.replay.aio import run_sync
    from attunebench.replay.llm import EMSpec, LiteLLMBackend
    from devtools.fake_llm_server import FakeConfig, FakeLLMServer
    from tests.core.replay_calls import draft_context

    with FakeLLMServer(FakeConfig(script=["429"] * 8, retry_after_s=0.3)) as server:
        spec = EMSpec(name="fake/em", litellm_model="openai/fake-em", api_base=server.url, params={"timeout": 10.0})
        assert spec.max_in_flight is None  # not in the registry: the scheduler's cap is the ceiling
        scheduler = Scheduler(max_concurrency=8, base_delay=0.01, max_delay=0.1)
        backend = LiteLLMBackend()
        ctx = draft_context()
        messages = P.build_messages(ctx)

        async def main():
            # All 8 are admitted in the loop's first pass, before any answer can arrive: one episode.
            calls = [scheduler.submit(spec.provider, lambda: backend.complete(spec, messages, ctx)) for _ in range(8)]
            clock = time.monotonic()
            done = await asyncio.gather(*calls)
            return done, time.monotonic() - clock

        completions, elapsed = run_sync(main())
        stats = server.stats()

    assert all('"response"' in c.text for c in completions)
    assert stats["requests"] == 16 and stats["errors"] == {"429": 8}
    # 8 -> 4 once; the 8 retries succeed: 4 successes climb 4 -> 5, 4 more are short of the next 5.
    assert scheduler.levels()[spec.provider] == (5, 8)
    assert elapsed >= 0.3  # each refused request waited its Retry-After, not our 0.01-0.1 s backoff
