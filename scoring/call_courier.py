"""The call courier process of a Celery worker, and its Redis journal (``attunebench.replay.courier``).

Each worker process starts one courier when it starts
(``replay_service.prepare_model_calls``; ``CourierProcess.ensure`` starts it
again if it is gone) and sends it every provider call. The
courier runs in its own session, so a ``kill -9`` of the worker (or a signal
to the worker's process group) leaves it running: it finishes the calls it
was given, journals their answers in Redis, and exits once its worker is gone
and nothing is in flight. The attempt that replays the dead worker's
conversations takes those answers from the journal (``journal_recovery``)
instead of paying for them again.

The courier needs no Django: ``python -m scoring.call_courier --socket PATH
--parent PID`` with the Redis URL in ``ATTUNE_COURIER_REDIS_URL`` (not on the
command line, where any local user could read it). Its socket lives in a
folder only its user can open; provider keys travel over it as the worker
read them.

An answer stays in the journal for ``delivered_ttl_s`` once handed to its
worker (long enough for a worker that died right after to be noticed and its
conversation requeued), and for a day when the worker was already gone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from attunebench.replay.courier import (
    AttemptSuperseded,
    CourierServer,
    completion_from_dict,
    completion_to_dict,
    journal_key,
    journal_tag,
    recover_from,
)
from attunebench.replay.heap import freeze_startup_heap
from attunebench.replay.llm import Completion, EMSpec, LiteLLMBackend, load_litellm, warm_up

log = logging.getLogger("attune.replay")

PROJECT_ROOT = Path(__file__).resolve().parents[1]

REDIS_JOURNAL_PREFIX = "attune:journal:"
REDIS_PENDING_PREFIX = "attune:journal-pending:"
REDIS_SENT_PREFIX = "attune:journal-sent:"
REDIS_FENCE_PREFIX = "attune:journal-superseded:"
#: How long an attempt's count of requests sent, and the mark that it was superseded, are kept: tiny keys,
#: kept well past the day a stalled conversation may wait to be requeued by hand.
COUNT_TTL_S = 7 * 24 * 3600
#: A count that lost track (its key vanished mid-attempt: Redis emptied or restarted) reads as this, never
#: as a smaller number.
UNKNOWN_COUNT = "unknown"
REDIS_URL_ENV = "ATTUNE_COURIER_REDIS_URL"
#: How long an answer its worker never got stays in the journal: long enough for a stalled conversation to
#: be requeued by hand.
UNDELIVERED_TTL_S = 24 * 3600
#: How long a worker waits for its courier to listen (it imports litellm first).
START_TIMEOUT_S = 60.0
SOCKET_DIR_PREFIX = "attune-courier-"
#: How often an orphaned courier checks whether it may exit.
EXIT_CHECK_S = 0.5
#: A courier nobody has been connected to for this long, with nothing in flight, exits even if its worker
#: lives (the worker dropped it: it starts another when it needs one).
UNUSED_EXIT_S = 60.0


# One request of an attempt: refused if the attempt was superseded; else marked in flight and counted.
# KEYS: the pending mark, the attempt's count, its superseded mark. ARGV: the mark's ms, the count's TTL.
_BEGIN = """
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], 1, 'PX', ARGV[1])
local count = redis.call('GET', KEYS[2])
if count and count ~= ARGV[3] then
  redis.call('INCR', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[3])
end
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
"""


class RedisJournal:
    """``CompletionJournal`` in Redis: every worker (on any machine) reads what any courier wrote.

    ``delivered_ttl_s`` is how long an answer is kept after ``put``: every
    answer is journaled, so keeping them all for a day would hold a day of a
    study's replies in Redis; only an undelivered one (``keep``) is kept that long.
    """

    def __init__(self, url: str, delivered_ttl_s: float = 600.0) -> None:
        self.url = url
        self.delivered_ttl_s = delivered_ttl_s
        self.counts = SentCounts(url)  # what ``begin`` counted, for the worker's synchronous code
        self._client: Any = None
        self._begin: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            import redis.asyncio as aioredis

            # Bounded, as the call cache's client: a Redis that stops answering is an error, not a hang.
            self._client = aioredis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=5)
        return self._client

    async def begin(self, key: str, seconds: float) -> None:
        if self._begin is None:
            self._begin = self._redis().register_script(_BEGIN)
        tag = journal_tag(key)
        keys = [REDIS_PENDING_PREFIX + key, REDIS_SENT_PREFIX + tag, REDIS_FENCE_PREFIX + tag]
        if not await self._begin(keys=keys, args=[max(1, int(seconds * 1000)), COUNT_TTL_S, UNKNOWN_COUNT]):
            raise AttemptSuperseded(f"attempt {tag} was taken over by a later one")

    async def put(self, key: str, completion: Completion) -> None:
        async with self._redis().pipeline(transaction=True) as pipe:
            data = json.dumps(completion_to_dict(completion))
            pipe.set(REDIS_JOURNAL_PREFIX + key, data, px=max(1, int(self.delivered_ttl_s * 1000)))
            pipe.delete(REDIS_PENDING_PREFIX + key)
            await pipe.execute()

    async def keep(self, key: str) -> None:
        await self._redis().expire(REDIS_JOURNAL_PREFIX + key, UNDELIVERED_TTL_S)

    async def abandon(self, key: str) -> None:
        await self._redis().delete(REDIS_PENDING_PREFIX + key)

    async def get(self, key: str) -> Completion | None:
        raw = await self._redis().get(REDIS_JOURNAL_PREFIX + key)
        if raw is None:
            return None
        try:
            return completion_from_dict(json.loads(raw))
        except (ValueError, TypeError):
            return None

    async def pending(self, key: str) -> bool:
        return bool(await self._redis().exists(REDIS_PENDING_PREFIX + key))


class SentCounts:
    """How many requests each attempt's couriers sent, as ``RedisJournal.begin`` counted them.

    The database's write-ahead count (``RunConversation.paid_sent``) is one
    high for a request counted by a worker that died before handing it to its
    courier; for attempts that ended without a store, these counts are the
    provider's own. An attempt's count is opened at zero when it starts, so a
    missing count means unknown (expired, never opened) rather than nothing
    sent, and ``begin`` marks a count whose key vanished mid-attempt as unknown
    instead of starting it again from one: the caller then keeps the
    database's count. The attempt that takes a conversation over supersedes
    the earlier ones, whose couriers then send nothing more for them, so the
    counts it reads are final. Synchronous: the worker calls it while claiming
    and storing.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._client: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=5)
        return self._client

    def start(self, tag: str | None, superseded: Sequence[str]) -> None:
        """A new attempt: count ``tag``'s requests from zero (None: it has no courier) and refuse ``superseded``'s
        from now on."""
        if tag is None and not superseded:
            return
        try:
            with self._redis().pipeline(transaction=True) as pipe:
                for old in superseded:
                    pipe.set(REDIS_FENCE_PREFIX + old, 1, ex=COUNT_TTL_S)
                if tag is not None:
                    pipe.set(REDIS_SENT_PREFIX + tag, 0, nx=True, ex=COUNT_TTL_S)
                pipe.execute()
        except Exception as exc:
            log.warning("call journal: attempt %s's counts not started (database counts are kept): %s", tag, exc)

    def total(self, tags: Sequence[str]) -> int | None:
        """Requests the couriers sent for all of ``tags``, or None if any count is unknown."""
        if not tags:
            return 0
        try:
            counts = self._redis().mget([REDIS_SENT_PREFIX + tag for tag in tags])
        except Exception as exc:
            log.warning("call journal: request counts unreadable (the database's count is kept): %s", exc)
            return None
        if any(count is None or not count.isdigit() for count in counts):
            return None
        return sum(int(count) for count in counts)


def journal_recovery(
    journal: RedisJournal, interrupted_tags: Sequence[str]
) -> Callable[[EMSpec, list[dict[str, str]]], Awaitable[Completion | None]]:
    """A replayer's ``recover`` hook: the answer one of the interrupted attempts paid for, if any.

    A request still in flight at a dead worker's courier is waited for (up to
    the model's timeout), so it is not sent twice. If Redis is away the hook
    says so and returns None: the request is then sent, paid again, rather
    than the replay failing.
    """

    async def recover(spec: EMSpec, messages: list[dict[str, str]]) -> Completion | None:
        for tag in reversed(interrupted_tags):
            try:
                found = await recover_from(journal, journal_key(tag, spec, messages), wait_s=spec.timeout + 30)
            except Exception as exc:
                log.warning("call journal unreadable (the request is sent again): %s", exc)
                return None
            if found is not None:
                return found
        return None

    return recover


class CourierProcess:
    """A worker process's courier: started on first use, started again if it died.

    ``delivered_ttl_s``: see ``RedisJournal``; the worker sets it from its lease
    time, since a dead worker's conversation is requeued within about 1.5 leases.
    """

    def __init__(self, redis_url: str, delivered_ttl_s: float = 600.0) -> None:
        self.redis_url = redis_url
        self.delivered_ttl_s = delivered_ttl_s
        self.process: subprocess.Popen[bytes] | None = None
        self.path: str | None = None
        self._lock: asyncio.Lock | None = None

    async def ensure(self) -> str:
        """The socket path of a running courier, starting one if needed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.process is None or self.process.poll() is not None or self.path is None:
                self._remove_folder()  # a courier that died left its folder behind
                self.path = str(Path(tempfile.mkdtemp(prefix=SOCKET_DIR_PREFIX)) / "courier.sock")
                self.process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "scoring.call_courier",
                        "--socket",
                        self.path,
                        "--parent",
                        str(os.getpid()),
                        "--delivered-ttl",
                        str(self.delivered_ttl_s),
                    ],
                    cwd=PROJECT_ROOT,  # importable however the worker was started (or installed)
                    env={**os.environ, REDIS_URL_ENV: self.redis_url},
                    start_new_session=True,  # a signal to the worker's group must not cut its calls short
                )
                await self._wait_listening()
            return self.path

    def stop(self) -> None:
        """End the courier now (a worker shutting down cleanly has no call in flight)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._remove_folder()

    def _remove_folder(self) -> None:
        if self.path is not None:
            shutil.rmtree(Path(self.path).parent, ignore_errors=True)

    async def _wait_listening(self) -> None:
        assert self.process is not None and self.path is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError):
                _reader, writer = await asyncio.open_unix_connection(self.path)
                writer.close()
                return
            if self.process.poll() is not None:
                raise OSError(f"the call courier exited at start (status {self.process.returncode})")
            if time.monotonic() > deadline:
                raise OSError(f"the call courier did not listen on {self.path} within {START_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.05)


def _parent_alive(parent: int) -> bool:
    return os.getppid() == parent


async def serve(socket_path: str, redis_url: str, parent: int, delivered_ttl_s: float) -> None:
    """Serve the worker until it is gone and no call is in flight (or until SIGTERM)."""
    # litellm's import (seconds of CPU) and its first-call set-up before listening, so the worker's first
    # calls do not wait for them; then the start-up heap leaves the collector's passes, as in the worker
    # (attune_site/celery.py).
    load_litellm()
    await warm_up()
    freeze_startup_heap()
    server = CourierServer(LiteLLMBackend(), RedisJournal(redis_url, delivered_ttl_s))
    listener = await asyncio.start_unix_server(server.handle, socket_path, limit=64 * 1024 * 1024)
    os.chmod(socket_path, 0o600)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    unused_since = time.monotonic()
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), EXIT_CHECK_S)
            if server.clients or not server.idle():
                unused_since = time.monotonic()
                continue
            if not _parent_alive(parent):
                log.info("call courier: worker %s is gone, nothing in flight; %s calls made", parent, server.calls)
                break
            if time.monotonic() - unused_since > UNUSED_EXIT_S:
                log.info("call courier: unused for %.0f s; %s calls made", UNUSED_EXIT_S, server.calls)
                break
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
            folder = Path(socket_path).parent
            if folder.name.startswith(SOCKET_DIR_PREFIX):  # the private folder ``CourierProcess`` made for it
                folder.rmdir()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Make a replay worker's provider calls so they outlive it")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--parent", type=int, required=True, help="the worker's pid: exit once it is gone")
    parser.add_argument("--delivered-ttl", type=float, default=600.0, help="seconds a delivered answer is kept")
    options = parser.parse_args(argv)
    redis_url = os.environ.get(REDIS_URL_ENV, "")
    if not redis_url:
        parser.error(f"{REDIS_URL_ENV} is not set: the courier journals its answers in Redis")
    # The worker's level (litellm logs every call at INFO: a fifth of the courier's CPU when it was on).
    level = os.environ.get("ATTUNE_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    asyncio.run(serve(options.socket, redis_url, options.parent, options.delivered_ttl))


if __name__ == "__main__":
    main()
