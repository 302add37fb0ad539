"""Provider caps hold across worker processes through Redis (scoring.redis_limits).

Two real processes call the fake OpenAI-compatible server through litellm, as
two Celery workers replaying one run would; the server counts how many
requests it is answering at once.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings

from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from scoring.redis_limits import (
    REDIS_ALIVE_PREFIX,
    REDIS_RPM_PREFIX,
    REDIS_SLOTS_PREFIX,
    RedisInFlightSlots,
    RedisRateLimiter,
)
from tests.clock import FakeClock

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real Redis)")

ROOT = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent("""
    import asyncio
    import sys

    from attunebench.replay import prompts as P
    from attunebench.replay.aio import run_sync
    from attunebench.replay.llm import EMSpec, LiteLLMBackend
    from attunebench.replay.scheduler import Scheduler
    from scoring.redis_limits import RedisInFlightSlots

    redis_url, api_base, cap, calls, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    spec = EMSpec(name="fake/em", litellm_model="openai/fake-em", api_base=api_base, max_in_flight=cap)
    scheduler = Scheduler(max_concurrency=100, limits={spec.provider: spec.limits},
                          shared_slots=RedisInFlightSlots(redis_url) if shared == "shared" else None)
    backend = LiteLLMBackend()

    async def one(i):
        ctx = P.CallContext(call_type=P.DRAFT, conversation_id=f"c{i}", category="Work", subtopic="Stress and burnout",
                            mode="default", turns=(P.VisibleTurn(1, f"Message {i}", None),), turn_number=1)
        return await scheduler.submit(spec.provider, lambda: backend.complete(spec, P.build_messages(ctx), ctx))

    async def main():
        return await asyncio.gather(*(one(i) for i in range(calls)))

    print("ready", flush=True)
    sys.stdin.readline()  # every worker starts sending at the same moment, however slow its start-up was
    answers = run_sync(main())
    print("answered", sum(1 for a in answers if a.text))
""")


def _run_workers(server: FakeLLMServer, tmp_path: Path, shared: str, workers: int = 2, cap: int = 3, calls: int = 6):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), settings.REDIS_URL, server.url, str(cap), str(calls), shared],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    for process in processes:  # a barrier: all have imported litellm and built their scheduler
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = [p.communicate(timeout=120) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=False):
        assert process.returncode == 0, err
        assert f"answered {calls}" in out, (out, err)
    return server.stats()


def _forget(key: str) -> None:
    import redis

    redis.Redis.from_url(settings.REDIS_URL).delete(REDIS_SLOTS_PREFIX + key)


def test_in_flight_cap_holds_across_worker_processes(tmp_path):
    # The server holds the first requests until as many as the cap allows are there at once, so the two
    # workers' calls overlap however late a busy machine schedules one of them.
    with FakeLLMServer(FakeConfig(latency_ms=200, hold_until_in_flight=3)) as server:
        provider = f"openai@{server.url}"
        _forget(provider)
        stats = _run_workers(server, tmp_path, "shared")
        assert stats["requests"] == 12
        # Cap 3 for the provider, whichever worker sends: never more at the provider.
        assert stats["peak_in_flight"] == 3

        # Every slot was given back.
        assert asyncio.run(RedisInFlightSlots(settings.REDIS_URL).held(provider)) == 0

        # Without the shared slots each process applies the cap on its own: twice as many.
        server.configure(hold_until_in_flight=6)
        server.reset()
        assert _run_workers(server, tmp_path, "local")["peak_in_flight"] == 6


HOLDER = textwrap.dedent("""
    import sys, time
    from attunebench.replay.aio import run_sync
    from scoring.redis_limits import RedisInFlightSlots

    # A slow heartbeat (a 3-minute liveness key): however starved this process is
    # while the test looks, its slots cannot lapse by accident.
    slots = RedisInFlightSlots(sys.argv[1], heartbeat_s=60)

    async def take_two():
        for _ in range(2):
            await slots.acquire(sys.argv[2], 2)

    run_sync(take_two())
    print(slots.owner, flush=True)
    time.sleep(600)
""")


def test_a_killed_workers_slots_come_back_when_its_heartbeat_stops(tmp_path):
    import redis

    key = f"test-dead-{time.time_ns()}"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), settings.REDIS_URL, key], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        owner = holder.stdout.readline().strip()
        alive_key = REDIS_ALIVE_PREFIX + owner
        assert client.exists(alive_key)

        async def while_alive():
            survivor = RedisInFlightSlots(settings.REDIS_URL)
            held = await survivor.held(key)
            token = await survivor.try_acquire(key, 2)
            if token is not None:
                await survivor.release(key, token)
            return held, token is not None

        held_before, taken_while_alive = asyncio.run(while_alive())
        assert held_before == 2
        assert taken_while_alive is False  # the holder's heartbeat is live: its two slots stand

        holder.kill()  # SIGKILL: no chance to give the slots back
        holder.wait()
        # Nobody beats for the dead process any more: its liveness key runs out after three
        # beats (180 s here). Expire it now, as those three missed beats would.
        ttl_ms = client.pttl(alive_key)
        assert 0 < ttl_ms <= 180_000
        client.pexpire(alive_key, 1)
        while client.exists(alive_key):  # Redis expires a key of 1 ms on its next look
            time.sleep(0.001)

        async def after_death():
            survivor = RedisInFlightSlots(settings.REDIS_URL, poll_s=0.01)
            token = await asyncio.wait_for(survivor.acquire(key, 2), timeout=30)
            held = await survivor.held(key)
            await survivor.release(key, token)
            return held

        held_after = asyncio.run(after_death())
    finally:
        holder.kill()
        _forget(key)
    assert held_after == 1  # the dead worker's two slots were dropped; only the survivor's counts


def test_slots_come_back_when_their_lease_ends():
    key = f"test-lease-{time.time_ns()}"

    async def scenario():
        slots = RedisInFlightSlots(settings.REDIS_URL, lease_s=0.5, poll_s=0.01)
        clock = time.perf_counter()  # before the lease starts (on Redis's clock), so the wait cannot look shorter
        await slots.acquire(key, 1)  # never released: only the lease frees it
        token = await asyncio.wait_for(slots.acquire(key, 1), timeout=30)
        waited = time.perf_counter() - clock
        await slots.release(key, token)
        return waited

    try:
        waited = asyncio.run(scenario())
    finally:
        _forget(key)
    assert waited >= 0.45  # held until the 0.5 s lease ran out (a lower bound: a busy machine only adds)


def _script_runs() -> int:
    """Lua script runs the Redis server has served so far (every slot attempt is one)."""
    import redis

    stats = redis.Redis.from_url(settings.REDIS_URL).info("commandstats")
    return sum(stats.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))


def _serve_waiters(queued: list[tuple[str, int]], hold_s: float, poll_s: float) -> tuple[list[str], int]:
    """Queue (name, priority) waiters, one after another, for the one slot of a provider while it is
    held; free it after ``hold_s``. Returns the order they were served in and the slot attempts made
    (Redis's own count of script runs) while it was held."""
    key = f"test-queue-{time.time_ns()}"

    async def scenario():
        slots = RedisInFlightSlots(settings.REDIS_URL, poll_s=poll_s)
        held = await slots.acquire(key, 1)
        served: list[str] = []

        async def wait(name: str, priority: int) -> None:
            token = await slots.acquire(key, 1, priority)
            served.append(name)
            await slots.release(key, token)

        waiting = []
        for name, priority in queued:
            waiting.append(asyncio.ensure_future(wait(name, priority)))
            await asyncio.sleep(0)  # each queues before the next arrives
        before = _script_runs()
        await asyncio.sleep(hold_s)
        attempts = _script_runs() - before
        await slots.release(key, held)
        await asyncio.wait_for(asyncio.gather(*waiting), 30)
        return served, attempts

    try:
        return asyncio.run(scenario())
    finally:
        _forget(key)


def test_a_process_s_waiters_get_slots_in_arrival_order_and_one_of_them_polls():
    names = [str(i) for i in range(20)]
    served, attempts = _serve_waiters([(name, 0) for name in names], hold_s=0.3, poll_s=0.02)
    assert served == names
    # One poller, a try at least 10 ms after the last refusal: at most 31 tries in 0.3 s (a busy machine
    # only makes fewer). Each waiter polling on its own made 200 or more.
    assert attempts <= 31


def test_a_process_s_waiters_are_served_by_priority_then_arrival():
    queued = [("side-a", 0), ("chain-short", 3), ("chain-long", 9), ("side-b", 0)]
    served, _ = _serve_waiters(queued, hold_s=0.0, poll_s=0.01)
    assert served == ["chain-long", "chain-short", "side-a", "side-b"]


def test_the_scheduler_s_priority_holds_when_other_workers_hold_the_shared_slots():
    # Cap 3: another worker holds two slots, so this one's gate admits three calls but only one gets a
    # slot; the other two wait for Redis in the order the scheduler gives them, the longer chain first.
    from attunebench.replay.scheduler import ProviderLimits, Scheduler

    key = f"test-sched-{time.time_ns()}"

    async def scenario():
        other = RedisInFlightSlots(settings.REDIS_URL, poll_s=0.01)
        theirs = [await other.acquire(key, 3) for _ in range(2)]
        scheduler = Scheduler(
            max_concurrency=8,
            limits={key: ProviderLimits(max_in_flight=3)},
            shared_slots=RedisInFlightSlots(settings.REDIS_URL, poll_s=0.01),
        )
        release = asyncio.Event()
        order: list[str] = []

        async def holder() -> None:
            await release.wait()

        def call(name: str):
            async def run() -> None:
                order.append(name)

            return run

        held = asyncio.ensure_future(scheduler.submit(key, holder))
        while await other.held(key) < 3:  # the holder has the third slot
            await asyncio.sleep(0.01)
        side = asyncio.ensure_future(scheduler.submit(key, call("side"), 0))
        for _ in range(3):
            await asyncio.sleep(0)  # through the gate, queued for a shared slot first
        chain = asyncio.ensure_future(scheduler.submit(key, call("chain"), 7))
        for _ in range(3):
            await asyncio.sleep(0)
        for token in theirs:
            await other.release(key, token)
        await asyncio.wait_for(asyncio.gather(side, chain), 30)
        release.set()
        await held
        return order

    try:
        order = asyncio.run(scenario())
    finally:
        _forget(key)
    assert order == ["chain", "side"]


def test_a_waiter_that_gives_up_leaves_the_queue_and_its_slot_goes_to_the_next():
    key = f"test-giveup-{time.time_ns()}"

    async def scenario():
        slots = RedisInFlightSlots(settings.REDIS_URL, poll_s=0.01)
        held = await slots.acquire(key, 1)
        quitter = asyncio.ensure_future(slots.acquire(key, 1))
        await asyncio.sleep(0)
        patient = asyncio.ensure_future(slots.acquire(key, 1))
        await asyncio.sleep(0)
        quitter.cancel()
        await slots.release(key, held)
        token = await asyncio.wait_for(patient, 30)
        in_use = await slots.held(key)
        await slots.release(key, token)
        return quitter.cancelled(), in_use, await slots.held(key)

    try:
        quitter_cancelled, in_use, after = asyncio.run(scenario())
    finally:
        _forget(key)
    assert quitter_cancelled and in_use == 1 and after == 0  # nothing is held for the one who left


def test_a_redis_error_reaches_the_waiting_call_and_the_next_one_tries_again():
    import redis

    slots = RedisInFlightSlots("redis://127.0.0.1:1/0", poll_s=0.01)  # nothing listens on port 1

    async def scenario():
        outcomes = []
        for _ in range(2):  # the poller ended with the first waiter's error; a second call starts another
            try:
                await asyncio.wait_for(slots.acquire("test-unreachable", 1), 60)
            except redis.exceptions.ConnectionError as exc:
                outcomes.append(type(exc).__name__)
        return outcomes

    assert asyncio.run(scenario()) == ["ConnectionError", "ConnectionError"]


@pytest.fixture
def rpm_key():
    """A provider key of its own for one test; its window is removed from Redis afterwards."""
    import redis

    key = f"test-rpm-{time.time_ns()}"
    yield key
    redis.Redis.from_url(settings.REDIS_URL).delete(REDIS_RPM_PREFIX + key)


def test_requests_per_minute_are_shared_across_limiters(rpm_key):
    clock = FakeClock(1_000_020.0)

    async def scenario():
        first = RedisRateLimiter(settings.REDIS_URL, clock=clock)
        second = RedisRateLimiter(settings.REDIS_URL, clock=clock)
        for limiter in (first, second, first):
            assert await limiter.try_acquire(rpm_key, 3) == 0
        # The budget of 3 is used up, whichever process asks next; the wait is until the first leaves the window.
        assert await second.try_acquire(rpm_key, 3) == pytest.approx(60.0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(second.acquire(rpm_key, 3), timeout=0.3)

    asyncio.run(scenario())


def test_the_minute_slides_so_no_burst_passes_at_a_clock_minute_boundary(rpm_key):
    # Three requests at 12:00:59 use the budget of the minute up to 12:01:59: a counter per clock minute
    # would let three more through at 12:01:00 (six in two seconds); the window lets the next one through
    # only when the first of the three is a minute old, and one at a time after that.
    clock = FakeClock(3_600_059.0)

    async def scenario():
        limiter = RedisRateLimiter(settings.REDIS_URL, clock=clock)
        for offset in (0.0, 0.2, 0.4):
            clock.now = 3_600_059.0 + offset
            assert await limiter.try_acquire(rpm_key, 3) == 0
        clock.now = 3_600_060.5  # the next clock minute
        assert await limiter.try_acquire(rpm_key, 3) == pytest.approx(58.5)
        clock.now = 3_600_119.0  # the first request is now exactly a minute old
        assert await limiter.try_acquire(rpm_key, 3) == 0
        assert await limiter.try_acquire(rpm_key, 3) == pytest.approx(0.2)  # the second leaves at 12:01:59.2
        clock.now = 3_600_119.25
        assert await limiter.try_acquire(rpm_key, 3) == 0

    asyncio.run(scenario())


def test_without_a_test_clock_the_window_runs_on_redis_time(rpm_key):
    async def scenario():
        limiter = RedisRateLimiter(settings.REDIS_URL)
        assert await limiter.try_acquire(rpm_key, 1) == 0
        wait = await limiter.try_acquire(rpm_key, 1)
        assert 0 < wait <= 60.0  # until the first request, taken a moment ago, is a minute old

    asyncio.run(scenario())
