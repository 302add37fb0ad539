"""Waiting in tests for something another thread or process does: poll it, with a generous deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, state: Callable[[], Any] | None = None, every: float = 0.1
) -> None:
    """Poll ``predicate`` until it holds; a generous deadline, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}" + (f"; state: {state()}" if state else ""))
