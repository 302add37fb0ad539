"""The sliding-window chat limit, on a clock the test moves (in-process log, and Redis when configured)."""

from __future__ import annotations

import os
import uuid

import pytest

from collection.rate_limits import MemoryWindowLog, RedisWindowLog, SlidingWindowLimiter, WindowLog
from tests.clock import FakeClock


def _logs() -> list[pytest.param]:
    params = [pytest.param(MemoryWindowLog, id="memory")]
    url = os.environ.get("REDIS_URL")
    params.append(
        pytest.param(
            (lambda: RedisWindowLog(url)) if url else None,
            id="redis",
            marks=pytest.mark.skipif(not url, reason="needs REDIS_URL (a real Redis)"),
        )
    )
    return params


@pytest.mark.parametrize("make_log", _logs())
def test_the_window_slides_instead_of_resetting_on_the_minute(make_log) -> None:
    log: WindowLog = make_log()
    clock = FakeClock(1_000.0)
    limiter = SlidingWindowLimiter(log, limit=2, window=60.0, prefix=f"test:{uuid.uuid4().hex}", clock=clock)
    assert limiter.admit("p1")  # t = 1000
    clock.now = 1_059.0
    assert limiter.admit("p1")  # t = 1059: two in the last 60 s
    clock.now = 1_059.5
    assert not limiter.admit("p1")  # a third within 60 s of the first is refused (a clock minute would reset at 1020)
    clock.now = 1_060.5
    assert limiter.admit("p1")  # the event at 1000 has left the window (1000 <= 1060.5 - 60)
    assert not limiter.admit("p1")  # 1059 and 1060.5 are still inside
    assert limiter.admit("p2")  # another key has its own window
    clock.now = 1_121.0
    assert limiter.admit("p1") and limiter.admit("p1")  # everything before 1061 has expired


@pytest.mark.parametrize("make_log", _logs())
def test_a_refused_event_does_not_extend_the_wait(make_log) -> None:
    clock = FakeClock(0.0)
    limiter = SlidingWindowLimiter(make_log(), limit=1, window=10.0, prefix=f"test:{uuid.uuid4().hex}", clock=clock)
    assert limiter.admit("k")
    for t in (1.0, 5.0, 9.0):  # hammering while refused is not recorded
        clock.now = t
        assert not limiter.admit("k")
    clock.now = 10.0
    assert limiter.admit("k")  # free exactly one window after the admitted event


def test_the_memory_log_forgets_keys_whose_window_has_passed() -> None:
    log = MemoryWindowLog()
    for i in range(100):
        assert log.admit(f"k{i}", now=float(i), window=1.0, limit=1)
    assert len(log) <= 2  # only keys with an event in the last second are kept


def test_a_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit >= 1"):
        SlidingWindowLimiter(MemoryWindowLog(), limit=0, window=60.0, prefix="x")
