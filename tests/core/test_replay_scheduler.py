"""The call scheduler: caps, requests per minute, backoff with jitter honouring Retry-After."""

from __future__ import annotations

import asyncio
import itertools
import random
import time

import pytest

from attunebench.replay.scheduler import (
    PermanentCallError,
    ProviderLimits,
    RetriesExhausted,
    Scheduler,
    SendPacer,
    TokenBucketLimiter,
    TransientCallError,
    WaitQueue,
)


def test_global_and_provider_caps_hold():
    scheduler = Scheduler(max_concurrency=5, limits={"slow": ProviderLimits(max_in_flight=2)})
    state = {"all": 0, "slow": 0, "peak_all": 0, "peak_slow": 0}

    async def call(provider):
        state["all"] += 1
        state[provider] = state.get(provider, 0) + 1
        state["peak_all"] = max(state["peak_all"], state["all"])
        if provider == "slow":
            state["peak_slow"] = max(state["peak_slow"], state["slow"])
        await asyncio.sleep(0.02)
        state["all"] -= 1
        state[provider] -= 1
        return provider

    async def main():
        jobs = [scheduler.submit(p, lambda p=p: call(p)) for p in ["slow"] * 10 + ["fast"] * 10]
        return await asyncio.gather(*jobs)

    assert asyncio.run(main()) == ["slow"] * 10 + ["fast"] * 10
    assert state["peak_slow"] == 2
    assert state["peak_all"] == 5


def test_a_saturated_provider_does_not_hold_global_slots():
    # Provider caps are taken before the global cap: "slow" calls waiting for their provider must not
    # stop "fast" calls from using the remaining global capacity. The slow calls last until the fast ones
    # are done, so if waiting slow calls held the two free global slots the fast calls could never run.
    scheduler = Scheduler(max_concurrency=3, limits={"slow": ProviderLimits(max_in_flight=1)})
    fast_done = asyncio.Event()
    running = {"fast": 0, "fast_peak": 0}

    async def fast() -> None:
        running["fast"] += 1
        running["fast_peak"] = max(running["fast_peak"], running["fast"])
        await asyncio.sleep(0)
        running["fast"] -= 1

    async def main() -> None:
        slow = [asyncio.ensure_future(scheduler.submit("slow", fast_done.wait)) for _ in range(5)]
        while scheduler.in_flight < 1:  # until the first slow call holds its slots; the others wait for theirs
            await asyncio.sleep(0)
        # (A generous deadline: reached only if the fast calls are stuck behind the slow ones.)
        await asyncio.wait_for(asyncio.gather(*(scheduler.submit("fast", fast) for _ in range(4))), 10)
        assert scheduler.in_flight == 1  # one slow call, still running
        fast_done.set()
        await asyncio.gather(*slow)

    asyncio.run(main())
    assert running["fast_peak"] == 2  # the two global slots the slow provider left free


def test_transient_errors_are_retried_with_growing_jittered_delays():
    scheduler = Scheduler(base_delay=0.01, max_delay=1.0, max_attempts=5, rng=random.Random(3))
    attempts = []

    async def flaky():
        attempts.append(time.perf_counter())
        if len(attempts) < 4:
            raise TransientCallError(["500", "timeout", "connection"][len(attempts) - 1])
        return "ok"

    assert asyncio.run(scheduler.submit("p", flaky)) == "ok"
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # Equal jitter: retry n waits between half and all of base * 2**n. The waits really happen (a sleep
    # never ends early); how much longer a busy machine takes is not this test's business.
    for n, gap in enumerate(gaps):
        assert gap >= 0.01 * 2**n / 2 - 0.002
    assert (
        sum(0.01 * 2**n / 2 for n in range(3)) <= scheduler.stats.backoff_seconds <= sum(0.01 * 2**n for n in range(3))
    )
    assert scheduler.stats.retries == 3
    assert dict(scheduler.stats.errors) == {"500": 1, "timeout": 1, "connection": 1}


def test_backoff_delay_bounds_and_retry_after_floor():
    scheduler = Scheduler(base_delay=0.5, max_delay=8.0, rng=random.Random(0))
    for retry in range(8):
        ceiling = min(8.0, 0.5 * 2**retry)
        delay = scheduler.backoff_delay(retry, None)
        assert ceiling / 2 <= delay <= ceiling
    assert scheduler.backoff_delay(0, 3.0) == 3.0  # Retry-After dominates a short backoff
    assert scheduler.backoff_delay(5, 0.1) >= 4.0  # and never shortens a long one


def test_a_glitch_at_the_first_step_is_retried_after_a_moment_and_an_overload_is_not():
    scheduler = Scheduler(base_delay=0.5, max_delay=8.0, glitch_delay=0.1, rng=random.Random(0))
    for _ in range(50):
        assert 0.05 <= scheduler.backoff_delay(0, None, overload=False) <= 0.1
        assert 0.25 <= scheduler.backoff_delay(0, None, overload=True) <= 0.5
        # Past the first step the provider is failing in a row: the usual doubling, glitch or not.
        assert 0.5 <= scheduler.backoff_delay(1, None, overload=False) <= 1.0
    assert scheduler.backoff_delay(0, 0.7, overload=False) == 0.7  # a Retry-After is still a floor
    # A base shorter than the glitch wait is never lengthened by it.
    assert Scheduler(base_delay=0.01, glitch_delay=0.1).backoff_delay(0, None, overload=False) <= 0.01


def test_a_healthy_providers_random_500s_are_retried_quickly_and_its_429s_wait_the_first_step():
    # Two calls to a provider that answers other calls between their failures, so each wait is at step 0.
    def run(error: TransientCallError) -> Scheduler:
        scheduler = Scheduler(base_delay=0.4, glitch_delay=0.02, rng=random.Random(3))
        tries: list[int] = []

        async def succeed():
            return "other"

        async def flaky():
            tries.append(1)
            assert await scheduler.submit("p", succeed) == "other"
            if len(tries) < 3:
                raise error
            return "ok"

        assert asyncio.run(scheduler.submit("p", flaky)) == "ok"
        assert scheduler.stats.retries == 2
        return scheduler

    assert run(TransientCallError("500", status=500)).stats.backoff_seconds <= 2 * 0.02
    assert run(TransientCallError("timeout")).stats.backoff_seconds <= 2 * 0.02
    assert run(TransientCallError("429", status=429)).stats.backoff_seconds >= 2 * 0.2


def test_retry_after_delays_only_the_refused_request():
    # A provider that refuses one call at random still serves the others: the
    # Retry-After is that request's floor, not a pause of the whole provider.
    scheduler = Scheduler(base_delay=0.001, max_attempts=3)
    events: list[str] = []

    async def rate_limited_once():
        events.append("limited:start")
        if events.count("limited:start") == 1:
            raise TransientCallError("429", retry_after=0.3)
        return "ok"

    async def other_call():
        events.append("other:done")
        return "other"

    async def other():
        await asyncio.sleep(0)  # arrives after the first call was refused
        return await scheduler.submit("p", other_call)

    async def main():
        return await asyncio.gather(scheduler.submit("p", rate_limited_once), other())

    first, second = asyncio.run(main())
    assert (first, second) == ("ok", "other")
    # The other call ran while the refused one waited out its Retry-After.
    assert events == ["limited:start", "other:done", "limited:start"]


def test_retries_are_bounded_and_permanent_errors_are_not_retried():
    scheduler = Scheduler(base_delay=0.001, max_attempts=3)
    calls = []

    async def always_busy():
        calls.append(1)
        raise TransientCallError("503")

    with pytest.raises(RetriesExhausted, match="3 attempts"):
        asyncio.run(scheduler.submit("p", always_busy))
    assert len(calls) == 3 and scheduler.stats.gave_up == 1

    async def bad_request():
        calls.append(2)
        raise PermanentCallError("invalid model")

    with pytest.raises(PermanentCallError):
        asyncio.run(Scheduler().submit("p", bad_request))
    assert calls.count(2) == 1


def test_attempt_timeout_is_a_transient_error():
    scheduler = Scheduler(attempt_timeout=0.05, base_delay=0.001, max_attempts=2)
    with pytest.raises(RetriesExhausted, match="timeout"):
        asyncio.run(scheduler.submit("p", lambda: asyncio.sleep(1)))
    assert scheduler.stats.errors["timeout"] == 2


def test_requests_per_minute_are_spread_out():
    # 600 rpm = 10 per second; the bucket holds 60 (a tenth of a minute) so the
    # first 60 go at once and the next 10 wait, about one second in all.
    limiter = TokenBucketLimiter()

    async def main():
        clock = time.perf_counter()
        waiters = [asyncio.ensure_future(limiter.acquire("p", 600)) for _ in range(70)]
        for _ in range(3):
            await asyncio.sleep(0)
        at_once = sum(waiter.done() for waiter in waiters)
        await asyncio.wait_for(asyncio.gather(*waiters), 60)  # (a deadline against a hang only)
        return at_once, time.perf_counter() - clock

    at_once, elapsed = asyncio.run(main())
    assert at_once >= 60  # the bucket's 60 (one more only if a stalled machine let the bucket drain meanwhile)
    assert elapsed >= 0.9  # the last 10 at 10 a second (a busy machine can only take longer)


def test_rpm_limit_applies_through_the_scheduler():
    scheduler = Scheduler(limits={"p": ProviderLimits(max_in_flight=50, rpm=60)})  # bucket of 6, 1/s
    sent: list[int] = []

    async def main():
        clock = time.perf_counter()
        calls = [
            asyncio.ensure_future(scheduler.submit("p", lambda: asyncio.sleep(0, sent.append(1)))) for _ in range(8)
        ]
        for _ in range(5):
            await asyncio.sleep(0)
        at_once = len(sent)
        await asyncio.wait_for(asyncio.gather(*calls), 60)  # (a deadline against a hang only)
        return at_once, time.perf_counter() - clock

    at_once, elapsed = asyncio.run(main())
    assert at_once >= 6 and len(sent) == 8  # the bucket's 6 at once
    assert elapsed >= 1.7  # the last two at one a second


async def _at_once(scheduler: Scheduler, provider: str, calls: int, expected: int) -> int:
    """How many of ``calls`` calls to ``provider`` run at once: each holds its slots until they are let go,
    once ``expected`` run (or after 10 s, if fewer can) and 0.1 s more for any call beyond the cap to start.

    Waiting for a number of calls rather than for a time means a slow machine cannot fail the test (a wrong,
    higher cap could slip through only on a machine that takes over 0.1 s to start a call).
    """
    loop = asyncio.get_running_loop()
    let_go = asyncio.Event()
    jobs = [asyncio.ensure_future(scheduler.submit(provider, let_go.wait)) for _ in range(calls)]
    deadline = loop.time() + 10
    while scheduler.in_flight < expected and loop.time() < deadline:
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.1)
    running = scheduler.in_flight
    let_go.set()
    await asyncio.gather(*jobs)
    return running


def test_slots_are_held_for_the_whole_call():
    scheduler = Scheduler(max_concurrency=1)
    starts: list[float] = []

    async def call():
        starts.append(time.perf_counter())
        await asyncio.sleep(0.1)

    async def main():
        await asyncio.gather(*(scheduler.submit("p", call) for _ in range(2)))

    asyncio.run(main())
    assert starts[1] - starts[0] >= 0.09


def test_a_cancelled_waiter_gives_back_its_provider_slot():
    scheduler = Scheduler(max_concurrency=2, limits={"p": ProviderLimits(max_in_flight=2)})

    async def main():
        # Two calls to another provider fill the global cap; a call to "p" then holds a
        # "p" slot while it waits for a global one, and is cancelled there.
        q_done = asyncio.Event()
        holders = [asyncio.ensure_future(scheduler.submit("q", q_done.wait)) for _ in range(2)]
        while scheduler.in_flight < 2:
            await asyncio.sleep(0)
        waiter = asyncio.ensure_future(scheduler.submit("p", lambda: asyncio.sleep(0)))
        for _ in range(3):
            await asyncio.sleep(0)  # it takes its "p" slot and waits for a global one
        assert not waiter.done() and scheduler.in_flight == 2
        waiter.cancel()
        q_done.set()
        await asyncio.gather(*holders, waiter, return_exceptions=True)
        return waiter.cancelled(), await _at_once(scheduler, "p", calls=4, expected=2)

    assert asyncio.run(main()) == (True, 2)  # both "p" slots are free again


def test_a_changed_cap_applies_to_later_calls_without_a_new_scheduler():
    # A worker's scheduler lives across runs: lowering or raising a provider's cap
    # in the registry must take effect for the next calls.
    scheduler = Scheduler(max_concurrency=20, limits={"p": ProviderLimits(max_in_flight=4)})

    async def main():
        running = [await _at_once(scheduler, "p", calls=12, expected=4)]
        scheduler.use_limits("p", ProviderLimits(max_in_flight=2))
        running.append(await _at_once(scheduler, "p", calls=12, expected=2))
        scheduler.use_limits("p", ProviderLimits(max_in_flight=6))
        running.append(await _at_once(scheduler, "p", calls=12, expected=6))
        return running

    assert asyncio.run(main()) == [4, 2, 6]


def test_backoff_follows_the_providers_failures_not_one_unlucky_calls():
    """A call that keeps failing while the provider answers other calls waits the first step each time;
    the same call against a provider that answers nobody waits longer and longer."""
    base = 0.01

    def run(provider_answers_others: bool) -> Scheduler:
        scheduler = Scheduler(max_concurrency=4, base_delay=base, max_delay=10.0, max_attempts=6, rng=random.Random(5))
        tries = []

        async def succeed():
            return "other"

        async def unlucky():
            tries.append(1)
            if provider_answers_others:
                # Another call to the same provider succeeds before this one fails again.
                assert await scheduler.submit("p", succeed) == "other"
            if len(tries) < 6:
                raise TransientCallError("500")
            return "ok"

        assert asyncio.run(scheduler.submit("p", unlucky)) == "ok"
        assert scheduler.stats.retries == 5
        return scheduler

    healthy = run(provider_answers_others=True)
    # Five waits, each of the first step (equal jitter: at most base).
    assert healthy.stats.backoff_seconds <= 5 * base
    down = run(provider_answers_others=False)
    # Steps 0..4: each wait at least half of base * 2**n.
    assert down.stats.backoff_seconds >= sum(base * 2**n / 2 for n in range(5))
    assert down.backoff_step("p", 3) == 0  # a success resets the count: the call that finished succeeded


def test_waiting_calls_go_in_priority_order_then_in_arrival_order():
    # One slot, held; four calls queue behind it. The replay gives a call the length of the
    # chain still waiting on it, so the longer chain must go first and equals keep their order.
    scheduler = Scheduler(max_concurrency=1)
    order: list[str] = []

    async def main():
        release = asyncio.Event()

        async def holder():
            await release.wait()

        def call(name):
            async def run():
                order.append(name)

            return run

        held = asyncio.ensure_future(scheduler.submit("p", holder))
        await asyncio.sleep(0)  # the holder takes the slot
        queued = [
            asyncio.ensure_future(scheduler.submit("p", call(name), priority))
            for name, priority in [("side-a", 0), ("chain-short", 3), ("chain-long", 9), ("side-b", 0)]
        ]
        for _ in range(3):
            await asyncio.sleep(0)  # every call is queued before the slot frees
        release.set()
        await asyncio.gather(held, *queued)

    asyncio.run(main())
    assert order == ["chain-long", "chain-short", "side-a", "side-b"]


def test_a_cancelled_queued_call_never_runs_and_later_calls_still_do():
    scheduler = Scheduler(max_concurrency=1)
    ran: list[str] = []

    async def main():
        release = asyncio.Event()
        held = asyncio.ensure_future(scheduler.submit("p", release.wait))
        await asyncio.sleep(0)

        async def cancelled_call():
            ran.append("cancelled")

        waiter = asyncio.ensure_future(scheduler.submit("p", cancelled_call, 5))
        await asyncio.sleep(0)
        waiter.cancel()
        release.set()
        await asyncio.gather(held, waiter, return_exceptions=True)
        return await asyncio.wait_for(scheduler.submit("p", lambda: asyncio.sleep(0, "ran")), 5)

    assert asyncio.run(main()) == "ran"
    assert ran == []


# -- pacing: sends a round trip over the level apart -------------------------------------------------


def test_nothing_is_paced_before_a_round_trip_is_known():
    pacer = SendPacer()
    assert pacer.round_trip is None
    assert [pacer.reserve(10.0, 4) for _ in range(5)] == [0.0] * 5


def test_sends_released_together_go_out_a_round_trip_over_the_level_apart():
    pacer = SendPacer()
    pacer.observe(0.2)
    # 0.2 s / level 4 = 0.05 s between sends: the fifth goes one round trip after the first.
    assert [pacer.reserve(10.0, 4) for _ in range(5)] == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    # Asked again 0.12 s later: the booked sends run to 10.2, so the next goes at 10.25.
    assert pacer.reserve(10.12, 4) == pytest.approx(0.13)
    # After a quiet spell the next send goes at once: pacing only ever spreads a burst.
    assert pacer.reserve(20.0, 4) == 0.0
    # A halved level (overload) doubles the spacing.
    assert pacer.reserve(20.0, 2) == pytest.approx(0.05)
    assert pacer.reserve(20.0, 2) == pytest.approx(0.15)


def test_the_round_trip_is_the_shortest_slot_time_of_the_recent_successes():
    pacer = SendPacer()
    for seconds in (0.30, 0.21, 0.25):
        pacer.observe(seconds)
    assert pacer.round_trip == pytest.approx(0.21)  # never more than any recent call held its slot
    # Still the shortest while it is among the last WINDOW successes...
    for _ in range(SendPacer.WINDOW - 3):
        pacer.observe(0.4)
    assert pacer.round_trip == pytest.approx(0.21)
    # ...and forgotten once the window after its own is full of slower calls: the provider got slower.
    for _ in range(SendPacer.WINDOW):
        pacer.observe(0.4)
    assert pacer.round_trip == pytest.approx(0.4)
    pacer.observe(0.1)  # a faster call counts at once
    assert pacer.round_trip == pytest.approx(0.1)


def test_a_wait_under_a_millisecond_is_not_worth_a_timer():
    pacer = SendPacer()
    pacer.observe(0.0024)  # calls of 2.4 ms at level 8: 0.3 ms apart
    waits = [pacer.reserve(5.0, 8) for _ in range(6)]
    # 0, 0.3, 0.6 and 0.9 ms go at once; from the fifth (1.2 ms) the spacing is kept.
    assert waits[:4] == [0.0] * 4
    assert waits[4:] == pytest.approx([0.0012, 0.0015])


def test_the_scheduler_spreads_a_burst_over_a_round_trip_and_still_fills_the_cap():
    scheduler = Scheduler(max_concurrency=4)
    started: list[float] = []
    before: list[float] = []

    async def main():
        loop = asyncio.get_running_loop()
        await scheduler.submit("p", lambda: asyncio.sleep(0.04))  # a round trip of at least 40 ms
        all_in = asyncio.Event()

        async def held():
            started.append(loop.time())
            if len(started) == 4:
                all_in.set()
            await all_in.wait()  # each holds its slot until all four are out: the cap is reached

        before.append(loop.time())
        await asyncio.wait_for(asyncio.gather(*(scheduler.submit("p", held) for _ in range(4))), 10)

    asyncio.run(main())
    # The k-th send was booked at least k x 40 ms / 4 after the burst began, and goes at its time or at most
    # the pacer's MIN_WAIT (1 ms) before it. Lower bounds only: a busy machine can delay a send, never hasten one
    # (gaps between two sends are not bounded: a delayed send can be followed closely by the next one's).
    for k, at in enumerate(sorted(started)):
        assert at - before[0] >= k * 0.01 - 0.001 - 1e-6, (k, at - before[0])
    assert scheduler.peak_in_flight == 4


def test_a_call_cancelled_while_it_waits_its_turn_to_go_out_gives_its_slots_back():
    scheduler = Scheduler(max_concurrency=1)
    ran: list[str] = []

    async def main():
        # A round trip >= 0.5 s at level 1: long beside any stall of a busy machine between the next two sends.
        await scheduler.submit("p", lambda: asyncio.sleep(0.5))
        await scheduler.submit("p", lambda: asyncio.sleep(0))  # goes at once and books the next 0.5 s on

        async def paced():
            ran.append("paced")

        waiting = asyncio.ensure_future(scheduler.submit("p", paced))
        for _ in range(3):
            await asyncio.sleep(0)  # it holds the slot and waits for its turn
        assert scheduler.stats.paced_seconds > 0 and not ran
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        return await asyncio.wait_for(scheduler.submit("p", lambda: asyncio.sleep(0, "next")), 5)

    assert asyncio.run(main()) == "next"
    assert ran == [] and scheduler.in_flight == 0


def test_a_wait_queue_serves_by_priority_then_arrival_and_skips_those_who_gave_up():
    async def main():
        queue: WaitQueue[str] = WaitQueue()
        side_a, short, long_, side_b = (queue.join(p) for p in (0, 3, 9, 0))
        long_.cancel()  # gave up while queued
        served = [queue.serve(v) for v in ("first", "second", "third")]
        refused = queue.fail(RuntimeError("nobody")), queue.serve("left over"), queue.waiting()
        return (short.result(), side_a.result(), side_b.result()), served, refused

    results, served, refused = asyncio.run(main())
    assert results == ("first", "second", "third")  # chain-short (3), then the two at 0 in arrival order
    assert served == [True, True, True]
    assert refused == (False, False, False)  # nobody waits: the caller keeps what it offered
