"""A worker's call courier process outlives the worker (scoring.call_courier), against real Redis.

The worker here is a stand-in shell that starts the courier as its child, as
``CourierProcess`` does from a worker; ``kill -9`` of the shell is the crash.
The courier must finish the call it was given, journal the answer in Redis for
the next attempt, and then exit on its own.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
import redis
from django.conf import settings

from attunebench.replay import prompts as P
from attunebench.replay.courier import AttemptSuperseded, CourierBackend, CourierConnection, journal_key
from attunebench.replay.llm import EMSpec
from devtools.fake_llm_server import FakeConfig, FakeLLMServer, http_json, request_digest
from scoring.call_courier import (
    REDIS_SENT_PREFIX,
    REDIS_URL_ENV,
    CourierProcess,
    RedisJournal,
    SentCounts,
    journal_recovery,
)
from tests.core.replay_calls import draft_context
from tests.polling import wait_for

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real Redis)")

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"  # a zombie has exited


def test_a_couriers_call_survives_its_worker_s_kill_9_and_is_journaled_for_the_next_attempt(tmp_path):
    messages = P.build_messages(draft_context())
    socket_path = str(tmp_path / "courier.sock")
    held = FakeConfig(hold_until_in_flight=2, hold_call_types=[P.DRAFT], hold_timeout_s=60)
    with FakeLLMServer(held) as provider:
        spec = EMSpec(name="fake-em", litellm_model="openai/fake-em", api_base=provider.url, params={"temperature": 0})
        key = journal_key("rc41.a1", spec, messages)
        # The stand-in worker: starts the courier as its child, prints the courier's pid, and waits.
        worker = subprocess.Popen(
            [
                "sh",
                "-c",
                '"$0" -m scoring.call_courier --socket "$1" --parent $$ & echo $!; wait',
                sys.executable,
                socket_path,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), REDIS_URL_ENV: settings.REDIS_URL},
        )
        assert worker.stdout is not None
        courier_pid = int(worker.stdout.readline())
        journal = RedisJournal(settings.REDIS_URL)

        async def ensure() -> str:
            while not Path(socket_path).exists():  # the courier imports litellm, then listens
                await asyncio.sleep(0.05)
            return socket_path

        async def taken_by_the_courier() -> None:
            while not await journal.pending(key):
                await asyncio.sleep(0.01)

        async def ask_then_die() -> None:
            connection = CourierConnection(ensure)
            asking = asyncio.ensure_future(CourierBackend(connection, "rc41.a1").complete(spec, messages, None))  # type: ignore[arg-type]
            # The courier has taken the call and waits on the provider (bounded: a hang fails the test).
            await asyncio.wait_for(taken_by_the_courier(), 60)
            worker.send_signal(signal.SIGKILL)  # the worker dies with its call in flight
            worker.wait()
            asking.cancel()
            connection.close()

        asyncio.run(ask_then_die())
        assert alive(courier_pid)  # the courier is still waiting for the provider's answer
        release = threading.Thread(
            target=http_json, args=(f"{provider.url}/chat/completions", {"model": "fake-em", "messages": messages})
        )
        release.start()  # the provider answers

        # The next attempt (another worker) finds the answer the dead one paid for, and asks nobody.
        recovered = asyncio.run(journal_recovery(RedisJournal(settings.REDIS_URL), ["rc41.a1"])(spec, messages))
        release.join(10)
        assert recovered is not None and recovered.text
        assert provider.digests()[request_digest(messages)] == 2  # the courier's request and the releasing one
        assert provider.stats()["abandoned"] == 0
        # With its worker gone and nothing in flight, the courier exits and removes its socket.
        wait_for(lambda: not alive(courier_pid), 30, "the orphaned courier to exit")
        assert not Path(socket_path).exists()


def test_a_worker_starts_its_courier_once_and_again_if_it_died():
    async def scenario() -> tuple[str, str, str]:
        courier = CourierProcess(settings.REDIS_URL)
        first = await courier.ensure()
        assert await courier.ensure() == first  # running: the same one
        assert courier.process is not None
        pid = courier.process.pid
        courier.process.kill()
        courier.process.wait()
        again = await courier.ensure()  # died: a new one, listening
        assert courier.process.pid != pid
        _reader, writer = await asyncio.open_unix_connection(again)
        writer.close()
        courier.stop()
        assert courier.process.poll() is not None and not Path(again).parent.exists()
        return first, again, str(pid)

    first, again, _pid = asyncio.run(scenario())
    assert first != again
    assert not Path(first).parent.exists()  # the dead one's private folder went with it


def test_the_journal_counts_each_attempts_requests_and_a_count_it_lost_track_of_is_unknown():
    spec = EMSpec(name="fake-em", litellm_model="openai/fake-em", params={"temperature": 0})
    tags = [f"rc9.{uuid.uuid4().hex}.a{n}" for n in (1, 2, 3)]
    counts = SentCounts(settings.REDIS_URL)
    counts.start(tags[0], [])
    counts.start(tags[1], [])

    async def send(tag: str, n: int) -> None:
        journal = RedisJournal(settings.REDIS_URL)
        for i in range(n):
            await journal.begin(journal_key(tag, spec, [{"role": "user", "content": str(i)}]), 30)

    asyncio.run(send(tags[0], 3))
    assert counts.total(tags[:2]) == 3  # the second attempt started its count and sent nothing
    counts.start(tags[0], [])  # starting again never resets what was counted
    assert counts.total(tags[:1]) == 3 and counts.total([]) == 0
    assert counts.total(tags) is None  # the third never started one: unknown, not zero
    # A count whose key vanished mid-attempt (Redis emptied) stays unknown: never a smaller number.
    asyncio.run(send(tags[2], 2))
    assert counts.total(tags[2:]) is None
    redis.Redis.from_url(settings.REDIS_URL).delete(REDIS_SENT_PREFIX + tags[0])
    asyncio.run(send(tags[0], 1))
    assert counts.total(tags[:1]) is None
    assert SentCounts("redis://127.0.0.1:1/0").total(tags[1:2]) is None  # Redis away: unknown


def test_an_attempt_taken_over_sends_nothing_more_and_its_count_is_final():
    spec = EMSpec(name="fake-em", litellm_model="openai/fake-em", params={"temperature": 0})
    old, new = (f"rc9.{uuid.uuid4().hex}.a{n}" for n in (1, 2))
    counts = SentCounts(settings.REDIS_URL)
    late = journal_key(old, spec, [{"role": "user", "content": "after"}])

    async def scenario() -> None:
        journal = RedisJournal(settings.REDIS_URL)
        counts.start(old, [])
        await journal.begin(journal_key(old, spec, [{"role": "user", "content": "before"}]), 30)
        counts.start(new, [old])  # the new attempt claims the conversation
        with pytest.raises(AttemptSuperseded, match="taken over"):
            await journal.begin(late, 30)
        assert not await journal.pending(late)  # nothing marked in flight

    asyncio.run(scenario())
    assert counts.total([old]) == 1 and counts.total([new]) == 0
