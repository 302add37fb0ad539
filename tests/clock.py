"""A clock the tests set by hand, for the rate limits: time moves only when a test moves it."""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
