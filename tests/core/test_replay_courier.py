"""The call courier (attunebench.replay.courier): calls that outlive their asker, answers journaled first.

A real courier server on a Unix socket, litellm's real client and the local
fake provider; the journal is an in-memory one with the same contract as the
Redis journal the workers use.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

import pytest

from attunebench.replay import prompts as P
from attunebench.replay.courier import (
    AttemptSuperseded,
    CourierBackend,
    CourierConnection,
    CourierServer,
    journal_key,
    journal_tag,
    recover_from,
)
from attunebench.replay.llm import Completion, EMSpec, LiteLLMBackend
from attunebench.replay.protocol import ReplayConfig, Replayer, ReplayResult
from attunebench.replay.scheduler import PermanentCallError, Scheduler, TransientCallError
from devtools.fake_llm_server import FakeConfig, FakeLLMServer, http_json, request_digest
from devtools.replay_fixtures import marked_conversation
from tests.clock import FakeClock
from tests.core.replay_calls import draft_context


class MemoryJournal:
    """The journal's contract in memory; ``answered`` is set when an answer is put."""

    def __init__(self) -> None:
        self.answers: dict[str, Completion] = {}
        self.in_flight: set[str] = set()
        self.kept: set[str] = set()  # answers whose worker was gone: kept for the next attempt
        self.sent: Counter[str] = Counter()  # requests sent, by attempt
        self.begun = asyncio.Event()
        self.answered = asyncio.Event()
        self.unreachable = 0  # how many more ``begin`` find the journal's Redis away
        self.superseded: set[str] = set()  # attempts another one has taken over

    async def begin(self, key: str, seconds: float) -> None:
        if journal_tag(key) in self.superseded:
            raise AttemptSuperseded(f"attempt {journal_tag(key)} was taken over by a later one")
        if self.unreachable:
            self.unreachable -= 1
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.in_flight.add(key)
        self.sent[journal_tag(key)] += 1
        self.begun.set()

    async def put(self, key: str, completion: Completion) -> None:
        self.answers[key] = completion
        self.in_flight.discard(key)
        self.answered.set()

    async def keep(self, key: str) -> None:
        self.kept.add(key)

    async def abandon(self, key: str) -> None:
        self.in_flight.discard(key)

    async def get(self, key: str) -> Completion | None:
        return self.answers.get(key)

    async def pending(self, key: str) -> bool:
        return key in self.in_flight


def spec_for(server: FakeLLMServer) -> EMSpec:
    return EMSpec(name="fake-em", litellm_model="openai/fake-em", api_base=server.url, params={"temperature": 0})


async def start_courier(path: Path, journal: MemoryJournal) -> tuple[CourierServer, asyncio.AbstractServer]:
    server = CourierServer(LiteLLMBackend(), journal)
    return server, await asyncio.start_unix_server(server.handle, str(path))


def connection_to(path: Path) -> CourierConnection:
    async def ensure() -> str:
        return str(path)

    return CourierConnection(ensure)


def test_a_call_through_the_courier_is_the_providers_answer_journaled_under_its_attempt(tmp_path):
    messages = P.build_messages(draft_context())
    with FakeLLMServer(FakeConfig()) as provider:
        spec = spec_for(provider)

        async def scenario() -> tuple[Completion, Completion, MemoryJournal]:
            journal = MemoryJournal()
            _server, listener = await start_courier(tmp_path / "c.sock", journal)
            async with listener:
                through = await CourierBackend(connection_to(tmp_path / "c.sock"), "rc7.a1").complete(
                    spec, messages, draft_context()
                )
            direct = await LiteLLMBackend().complete(spec, messages, draft_context())
            return through, direct, journal

        through, direct, journal = asyncio.run(scenario())
        # The same request, answered the same way (the fake model answers by what it was asked).
        assert through == direct and through.text and through.cost_usd is None
        assert journal.answers == {journal_key("rc7.a1", spec, messages): through} and not journal.in_flight
        assert not journal.kept  # delivered: it expires soon
        assert journal.sent == {"rc7.a1": 1}
        assert provider.digests()[request_digest(messages)] == 2  # one through the courier, one direct


def test_a_request_the_journal_cannot_mark_is_not_sent_nor_counted_and_is_retried(tmp_path):
    # Sent unmarked, a crash of its worker would have it paid again and never counted.
    with FakeLLMServer(FakeConfig()) as provider:
        spec = spec_for(provider)
        counted: list[int] = []

        async def on_send(requests: int) -> None:
            counted.append(requests)

        scheduler = Scheduler(base_delay=0.001, max_delay=0.01)

        async def scenario() -> tuple[ReplayResult, MemoryJournal]:
            journal = MemoryJournal()
            journal.unreachable = 3  # Redis is away for the first three requests, then back
            _server, listener = await start_courier(tmp_path / "c.sock", journal)
            backend = CourierBackend(connection_to(tmp_path / "c.sock"), "rc7.a1")
            replayer = Replayer(spec, backend, ReplayConfig(), scheduler=scheduler, on_send=on_send)
            async with listener:
                return await replayer.replay(marked_conversation(turns=2)), journal

        result, journal = asyncio.run(scenario())
        assert not result.failures and scheduler.stats.errors == {"journal": 3}
        # Counted as the provider saw them: the three refused requests were taken back out.
        assert result.stats.calls_made == sum(counted) == journal.sent["rc7.a1"] == provider.stats()["requests"]
        assert counted.count(-1) == 3
        assert sum(call.transport_attempts for call in result.calls) == provider.stats()["requests"]


def test_a_superseded_attempts_request_is_refused_unsent_and_not_retried(tmp_path):
    # Another attempt took the conversation over: what this one would send, that one pays for.
    messages = P.build_messages(draft_context())
    with FakeLLMServer(FakeConfig()) as provider:
        spec = spec_for(provider)

        async def scenario() -> BaseException:
            journal = MemoryJournal()
            journal.superseded.add("rc7.a1")
            _server, listener = await start_courier(tmp_path / "c.sock", journal)
            async with listener:
                with pytest.raises(PermanentCallError) as refused:
                    await CourierBackend(connection_to(tmp_path / "c.sock"), "rc7.a1").complete(
                        spec, messages, draft_context()
                    )
            assert not journal.sent and not journal.in_flight
            return refused.value

        refused = asyncio.run(scenario())
        assert isinstance(refused, PermanentCallError) and refused.sent is False
        assert "rc7.a1 was taken over by a later one" in str(refused)
        assert provider.stats()["requests"] == 0


def test_provider_errors_come_back_as_the_workers_own_errors_and_nothing_is_journaled(tmp_path):
    messages = P.build_messages(draft_context())
    with FakeLLMServer(FakeConfig(script=["429", "500"], retry_after_s=0.5)) as provider:
        spec = spec_for(provider)

        async def scenario() -> list[BaseException]:
            journal = MemoryJournal()
            _server, listener = await start_courier(tmp_path / "c.sock", journal)
            backend = CourierBackend(connection_to(tmp_path / "c.sock"), "rc7.a1")
            errors: list[BaseException] = []
            async with listener:
                for _ in range(2):
                    try:
                        await backend.complete(spec, messages, draft_context())
                    except Exception as exc:
                        errors.append(exc)
            assert not journal.answers and not journal.in_flight
            assert journal.sent == {"rc7.a1": 2}  # errors too: the provider saw them
            return errors

        rate_limited, server_error = asyncio.run(scenario())
    assert isinstance(rate_limited, TransientCallError) and rate_limited.kind == "429"
    assert rate_limited.retry_after == 0.5  # the provider's retry-after-ms, for the worker's backoff
    assert isinstance(server_error, TransientCallError) and server_error.kind == "500"


def test_a_courier_that_is_not_there_is_a_transient_error_and_a_bad_spec_a_permanent_one(tmp_path):
    messages = P.build_messages(draft_context())
    with FakeLLMServer(FakeConfig()) as provider:
        spec = spec_for(provider)

        async def nobody() -> None:
            await CourierBackend(connection_to(tmp_path / "absent.sock"), "t").complete(spec, messages, draft_context())

        with pytest.raises(TransientCallError, match="not reachable"):
            asyncio.run(nobody())

        async def bad_key_variable() -> None:
            journal = MemoryJournal()
            _server, listener = await start_courier(tmp_path / "c.sock", journal)
            unknown = EMSpec(name="x", litellm_model="openai/x", params={"api_key_env": "NO_SUCH_PROVIDER_KEY"},
                             allowed_key_env=frozenset({"NO_SUCH_PROVIDER_KEY"}))  # fmt: skip
            async with listener:
                await CourierBackend(connection_to(tmp_path / "c.sock"), "t").complete(
                    unknown, messages, draft_context()
                )

        with pytest.raises(PermanentCallError, match="NO_SUCH_PROVIDER_KEY is not set"):
            asyncio.run(bad_key_variable())


def test_a_call_whose_asker_died_is_finished_journaled_and_recovered_without_asking_again(tmp_path):
    messages = P.build_messages(draft_context())
    # The provider holds the draft until a second request is in flight: the asker is gone by then.
    held = FakeConfig(hold_until_in_flight=2, hold_call_types=[P.DRAFT], hold_timeout_s=60)
    with FakeLLMServer(held) as provider:
        spec = spec_for(provider)
        key = journal_key("rc9.a1", spec, messages)
        release = threading.Thread(
            target=http_json, args=(f"{provider.url}/chat/completions", {"model": "fake-em", "messages": messages})
        )

        journal = MemoryJournal()

        async def scenario() -> tuple[Completion | None, Completion | None, CourierServer]:
            server, listener = await start_courier(tmp_path / "c.sock", journal)
            async with listener:
                connection = connection_to(tmp_path / "c.sock")
                asking = asyncio.ensure_future(CourierBackend(connection, "rc9.a1").complete(spec, messages, None))  # type: ignore[arg-type]
                await journal.begun.wait()
                # The worker dies: its call is cancelled and its socket closed while the provider works.
                asking.cancel()
                connection.close()
                # The next attempt asks the journal while the dead worker's call is still in flight: it waits.
                recovering = asyncio.ensure_future(recover_from(journal, key, wait_s=60, poll_s=0.01))
                await asyncio.sleep(0)
                assert not recovering.done() and await journal.pending(key)
                release.start()  # the provider answers both held requests
                recovered = await recovering
                await journal.answered.wait()
                while not server.idle():  # the courier finds its worker gone and keeps the answer
                    await asyncio.sleep(0.01)
                return recovered, await journal.get(key), server

        recovered, journaled, server = asyncio.run(scenario())
        release.join(10)
        assert recovered is not None and recovered == journaled and recovered.text
        assert server.calls == 1 and server.idle()
        assert journal.kept == {key}  # undelivered: kept for a day, not the few minutes of a delivered one
        # Paid once by the dead attempt's courier (plus the releasing request): never asked again.
        assert provider.digests()[request_digest(messages)] == 2
        assert provider.stats()["abandoned"] == 0  # the courier kept its connection to the provider


def test_recovery_finds_nothing_for_a_request_nobody_made_and_stops_waiting_at_its_deadline():
    journal = MemoryJournal()
    assert asyncio.run(recover_from(journal, "rc1.a1/nobody", wait_s=5)) is None  # not pending: no wait

    clock = FakeClock(0.0)

    async def advance(seconds: float) -> None:
        clock.now += seconds

    journal.in_flight.add("rc1.a1/stuck")  # a courier that died too: its mark outlives it until it expires
    found = asyncio.run(recover_from(journal, "rc1.a1/stuck", wait_s=3, poll_s=1, clock=clock, sleep=advance))
    assert found is None and clock.now == 3


def test_an_answer_journaled_between_the_two_reads_of_a_recovery_is_still_taken():
    # The answer lands right after the recovery read it (nothing yet), before the next read: the courier's
    # put writes the answer and clears the in-flight mark at once. Reading the mark first, then the answer,
    # the recovery sees the mark clear on its next round and the answer with it, instead of giving up.
    class LateJournal(MemoryJournal):
        async def get(self, key: str) -> Completion | None:
            found = self.answers.get(key)
            if found is None and key in self.in_flight:
                await self.put(key, Completion(text="{}", prompt_tokens=3, completion_tokens=2, cost_usd=0.01))
            return found

    journal = LateJournal()
    journal.in_flight.add("rc3.a1/request")
    found = asyncio.run(recover_from(journal, "rc3.a1/request", wait_s=60, poll_s=0))
    assert found == Completion(text="{}", prompt_tokens=3, completion_tokens=2, cost_usd=0.01)
