"""One persistent event loop per process, for synchronous callers (CLI, Celery tasks).

litellm caches its async HTTP clients; reusing them from a second
``asyncio.run`` (a new loop) fails with "Event loop is closed" — the usual
pattern inside Celery tasks. Instead every replay in a process runs on the
same loop, owned by a daemon thread; callers block on the result. The
scheduler, its limits and litellm's clients therefore live exactly as long as
the process. After a fork (Celery prefork) the child gets a fresh loop: the
parent's thread does not exist in the child.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="attune-replay-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result (re-raising its error)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run called from its own loop: await the coroutine instead")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def run_beating(self, coroutine: Coroutine[Any, Any, T], interval: float, beat: Callable[[], bool]) -> T:
        """Run ``coroutine`` on the loop; every ``interval`` seconds until it ends, call ``beat()`` here.

        ``beat`` runs in the calling thread (a worker renewing its lease in the
        database, say), so it never blocks the loop. When it returns False the
        coroutine is cancelled and ``Abandoned`` raised.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run_beating called from its own loop: await the coroutine instead")
        if interval <= 0:
            raise ValueError(f"beat interval must be positive, got {interval}")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            while True:
                try:
                    return future.result(interval)
                except concurrent.futures.TimeoutError:
                    if not beat():
                        raise Abandoned("the caller gave up on the coroutine") from None
        except BaseException:
            future.cancel()
            raise


class Abandoned(Exception):
    """``run_beating``'s ``beat`` said to stop: the coroutine was cancelled."""


_runner: LoopThread | None = None
_lock = threading.Lock()


def process_loop() -> LoopThread:
    """The process's loop thread, created on first use (and again after a fork)."""
    global _runner
    with _lock:
        if _runner is None or _runner.pid != os.getpid():
            _runner = LoopThread()
        return _runner


def run_sync(coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a coroutine on the process loop from synchronous code."""
    return process_loop().run(coroutine, timeout)


def run_sync_beating(coroutine: Coroutine[Any, Any, T], interval: float, beat: Callable[[], bool]) -> T:
    """``run_sync`` that calls ``beat()`` every ``interval`` seconds meanwhile (see ``LoopThread.run_beating``)."""
    return process_loop().run_beating(coroutine, interval, beat)


def start_sync(coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start a coroutine on the process loop and return at once: the caller does other work meanwhile and waits
    with ``result()`` (or stops it with ``cancel()``)."""
    return asyncio.run_coroutine_threadsafe(coroutine, process_loop().loop)
