"""The replay engine's model calls against the local fake OpenAI-compatible server.

No real provider is ever reached: every spec points at the fake server's
api_base on 127.0.0.1. Every test that makes a model runs on each route it can take:
the direct route (the default for ``openai/...`` at an api_base: our own HTTP
connection, or the OpenAI SDK for a server behind a proxy) and litellm
(``"client": "litellm"``, the route of every other provider).
"""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attunebench.replay import direct_call
from attunebench.replay import prompts as P
from attunebench.replay.aio import run_sync
from attunebench.replay.cache import FileCache, MemoryCache
from attunebench.replay.llm import EMSpec, LiteLLMBackend, warm_up
from attunebench.replay.protocol import ReplayConfig, Replayer, planned_calls
from attunebench.replay.scheduler import RetriesExhausted, Scheduler
from devtools.fake_llm_server import FakeConfig, FakeLLMServer, http_json, root_url
from devtools.replay_fixtures import marked_conversation
from tests.core.replay_calls import ROUTES, draft_call, draft_context, take_route


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(FakeConfig(timeout_hang_s=3.0)) as running:
        yield running


@pytest.fixture(autouse=True)
def clean_server(server):
    server.configure(
        script=[],
        error_rate=0.0,
        malformed_rate=0.0,
        messy_rate=0.0,
        latency_ms=0.0,
        retry_after_s=1.0,
        timeout_hang_s=3.0,
    )
    server.reset()
    yield


@pytest.fixture(params=sorted(ROUTES))
def route(request, monkeypatch) -> dict[str, str]:
    """The model parameters of one route (every test that makes a model runs on each)."""
    return take_route(request.param, monkeypatch)


@pytest.fixture
def em(server, route):
    """Makes a model at the fake server, on this test's route."""

    def make(name: str = "fake/em", litellm_model: str = "openai/fake-em", **overrides) -> EMSpec:
        params = {"temperature": 0, "seed": 1, "timeout": overrides.pop("timeout", 10.0), **route}
        return EMSpec(name=name, litellm_model=litellm_model, api_base=server.url, params=params, **overrides)

    return make


def test_injected_429_500_and_timeout_are_retried_until_success(server, em):
    # The hung request is held far longer than the client waits: only the client's timeout can end it.
    server.configure(script=["429", "500", "timeout"], retry_after_s=0.4, timeout_hang_s=30.0)
    # max_delay 0.1: a Retry-After is honoured up to 5 x max_delay (0.5 s), so the 0.4 s is never cut short.
    scheduler = Scheduler(base_delay=0.01, max_delay=0.1, max_attempts=5)
    clock = time.perf_counter()
    # The client's timeout applies to every request, so it is long beside what a loaded machine takes to answer
    # one; only the scripted hang reaches it.
    completion = draft_call(em(timeout=3.0), scheduler)
    elapsed = time.perf_counter() - clock
    assert '"response"' in completion.text
    stats = server.stats()
    assert stats["requests"] == 4 and stats["completions"] == 1
    assert stats["errors"] == {"429": 1, "500": 1, "timeout": 1}
    assert dict(scheduler.stats.errors) == {"429": 1, "500": 1, "timeout": 1}
    # The 429's Retry-After (0.4 s) is honoured although our own backoff would be ~0.01 s,
    # and the timeout took the client's 3 s.
    assert elapsed >= 0.4 + 3.0


def test_a_call_reports_usage_and_is_priced_from_it_with_the_registry_price(server, em):
    completion = draft_call(em(input_cost_per_million=1.0, output_cost_per_million=2.0), Scheduler())
    assert '"response"' in completion.text
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    # $1 per million prompt tokens, $2 per million completion tokens.
    assert completion.cost_usd == pytest.approx((completion.prompt_tokens + 2 * completion.completion_tokens) / 1e6)
    assert server.stats()["requests"] == 1  # the client made no retries of its own


def test_a_listed_model_without_a_registry_price_is_priced_from_litellm_price_list(server, em):
    # litellm's bundled price list has gpt-4o-mini at $0.15 / $0.60 per million tokens.
    spec = em(name="mini", litellm_model="openai/gpt-4o-mini")
    completion = draft_call(spec, Scheduler())
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    expected = completion.prompt_tokens * 0.15e-6 + completion.completion_tokens * 0.60e-6
    assert completion.cost_usd == pytest.approx(expected)


def test_a_process_that_replayed_exits_without_unclosed_session_warnings(tmp_path, route):
    script = tmp_path / "replay_once.py"
    script.write_text(
        textwrap.dedent(f"""
        ROUTE = {route!r}
        from attunebench.replay import direct_call
        if not {direct_call.suits("http://127.0.0.1/")!r}:  # this test's route is the OpenAI SDK's
            direct_call.suits = lambda api_base: False
        from attunebench.replay.aio import run_sync
        from attunebench.replay.llm import EMSpec, LiteLLMBackend, warm_up
        from attunebench.replay.protocol import ReplayConfig, Replayer
        from devtools.fake_llm_server import FakeConfig, FakeLLMServer
        from devtools.replay_fixtures import marked_conversation

        with FakeLLMServer(FakeConfig()) as server:
            spec = EMSpec(name="fake/em", litellm_model="openai/fake-em", api_base=server.url, params=ROUTE)
            run_sync(warm_up([spec]))  # as eval and the call courier do before their first call
            result = run_sync(Replayer(spec, LiteLLMBackend(), ReplayConfig()).replay(marked_conversation(turns=1)))
            print("turns", len(result.output.turns))
    """)
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert "turns 1" in done.stdout
    assert "Unclosed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "WARNING" not in done.stderr, done.stderr  # nor a warm-up left behind on another event loop


def test_a_warm_up_sends_nothing_and_the_calls_after_it_are_answered(server, em):
    spec = em()
    run_sync(warm_up([spec, spec]))
    assert server.stats()["requests"] == 0
    completion = draft_call(spec, Scheduler())
    assert completion.text and server.stats()["requests"] == 1


def test_a_failed_warm_up_is_logged_and_the_replay_goes_on(caplog):
    caplog.set_level(logging.WARNING, logger="attune.replay")
    run_sync(warm_up([EMSpec(name="nowhere", litellm_model="no-such-provider/model")]))
    assert "litellm warm-up of no-such-provider/model failed" in caplog.text


def test_persistent_errors_give_up_after_max_attempts(server, em):
    server.configure(error_rate=1.0, error_kinds=["503"])
    scheduler = Scheduler(base_delay=0.001, max_attempts=3)
    with pytest.raises(RetriesExhausted):
        draft_call(em(), scheduler)
    assert server.stats()["requests"] == 3


def test_a_whole_replay_survives_a_dead_provider(server, em):
    server.configure(error_rate=1.0, error_kinds=["500"])
    conversation = marked_conversation(turns=2)
    replayer = Replayer(em(), LiteLLMBackend(), ReplayConfig(), scheduler=Scheduler(base_delay=0.001, max_attempts=2))
    result = run_sync(replayer.replay(conversation))
    assert result.output.turns == [] and result.output.post_conversation is None
    failed = result.output.model_dump()["failed_calls"]
    assert {f["call"] for f in failed} == {P.DRAFT, P.POST}
    assert all("gave up after 2 attempts" in f["error"] for f in failed)


def test_a_request_that_never_left_is_not_counted_as_made(server, em, monkeypatch):
    # The key's variable is unset: every call fails before anything is sent, and nothing is counted as sent.
    monkeypatch.delenv("NO_SUCH_PROVIDER_KEY", raising=False)
    model = em()
    keyed = dataclasses.replace(
        model,
        params={**model.params, "api_key_env": "NO_SUCH_PROVIDER_KEY"},
        allowed_key_env=frozenset({"NO_SUCH_PROVIDER_KEY"}),
    )
    sent: list[int] = []

    async def on_send(requests: int) -> None:
        sent.append(requests)

    replayer = Replayer(keyed, LiteLLMBackend(), ReplayConfig(), scheduler=Scheduler(), on_send=on_send)
    result = run_sync(replayer.replay(marked_conversation(turns=2)))
    assert result.failures and all("NO_SUCH_PROVIDER_KEY is not set" in f.error for f in result.failures)
    assert server.stats()["requests"] == 0
    assert result.stats.calls_made == result.stats.paid_requests == replayer.totals.calls_made == 0
    assert sent and sum(sent) == 0  # each write-ahead count was taken back
    assert all(call.transport_attempts == 0 for call in result.calls)


def test_malformed_replies_are_retried_and_messy_ones_repaired(server, em):
    conversation = marked_conversation(turns=2)
    server.configure(script=["malformed", "malformed"], messy_rate=1.0)
    replayer = Replayer(em(), LiteLLMBackend(), ReplayConfig(mode="verbose"), scheduler=Scheduler())
    result = run_sync(replayer.replay(conversation))
    stats = server.stats()
    planned = planned_calls(conversation, judge=False)
    assert result.failures == []
    assert [t.turnNumber for t in result.output.turns] == [1, 2]
    assert stats["malformed"] == 2 and stats["messy"] == planned
    assert stats["requests"] == planned + 2  # exactly one extra request per malformed reply


def test_rerun_with_the_same_cache_makes_zero_calls(server, em, tmp_path):
    conversation = marked_conversation(turns=3)
    spec = em(input_cost_per_million=1.0, output_cost_per_million=2.0)
    judge = em(name="fake/judge", litellm_model="openai/fake-judge")
    config = ReplayConfig(judge=judge, panas_strategy="delta")
    cache = FileCache(tmp_path / "calls")

    first = run_sync(Replayer(spec, LiteLLMBackend(), config, cache=cache).replay(conversation))
    made = server.stats()["requests"]
    assert made == planned_calls(conversation, judge=True)
    server.reset()

    # A new replayer and backend, as a new process would have, reading the same cache.
    replayer = Replayer(spec, LiteLLMBackend(), config, cache=FileCache(tmp_path / "calls"))
    second = run_sync(replayer.replay(conversation))
    assert server.stats()["requests"] == 0
    assert replayer.totals.calls_made == 0 and replayer.totals.calls_cached == made
    drop = {"run_timestamp", "duration_seconds", "usage"}
    assert first.output.model_dump(exclude=drop) == second.output.model_dump(exclude=drop)
    # The judge has no price: the output's cost is unknown (null), never a crash.
    assert first.output.api_cost is None


def test_cost_is_accounted_from_spec_prices(server, em):
    conversation = marked_conversation(turns=1)
    spec = em(input_cost_per_million=1.0, output_cost_per_million=2.0)
    cache = MemoryCache()
    replayer = Replayer(spec, LiteLLMBackend(), ReplayConfig(), cache=cache)
    result = run_sync(replayer.replay(conversation))
    usage = result.output.model_dump()["usage"]
    expected = (usage["prompt_tokens"] * 1.0 + usage["completion_tokens"] * 2.0) / 1e6
    assert result.output.api_cost == pytest.approx(expected)
    assert replayer.totals.cost_spent == pytest.approx(expected)
    # Cached answers keep their cost in the output, but cost nothing new.
    again = Replayer(spec, LiteLLMBackend(), ReplayConfig(), cache=cache)
    rerun = run_sync(again.replay(conversation))
    assert rerun.output.api_cost == pytest.approx(expected) and again.totals.cost_spent == 0


def test_unpriced_models_give_null_cost_without_failing(server, em):
    result = run_sync(Replayer(em(), LiteLLMBackend(), ReplayConfig()).replay(marked_conversation(turns=1)))
    assert result.failures == [] and result.output.api_cost is None


def test_separate_event_loops_do_not_break_litellm_clients(server, em):
    # The "Event loop is closed" pitfall: replays in a sync context share one process loop.
    conversation = marked_conversation(turns=1)
    backend = LiteLLMBackend()
    for _ in range(2):
        result = run_sync(Replayer(em(), backend, ReplayConfig()).replay(conversation))
        assert result.failures == []


def test_server_control_and_stats_over_http(server, em):
    base = root_url(server.url)
    assert http_json(f"{base}/stats")["requests"] == 0
    http_json(f"{base}/control", {"latency_ms": 50})
    clock = time.perf_counter()
    draft_call(em(), Scheduler())
    assert time.perf_counter() - clock >= 0.05
    assert http_json(f"{base}/stats")["by_call_type"] == {"draft": 1}
    http_json(f"{base}/stats/reset", {})
    assert http_json(f"{base}/stats")["requests"] == 0


def test_concurrent_replays_respect_the_global_cap(server, em):
    server.configure(latency_ms=30)
    conversations = [marked_conversation(turns=2, conversation_id=f"c{i}") for i in range(6)]
    scheduler = Scheduler(max_concurrency=4)
    replayer = Replayer(em(max_in_flight=100), LiteLLMBackend(), ReplayConfig(), scheduler=scheduler)
    results = run_sync(replayer.replay_many(conversations))
    assert [r.conversation_id for r in results] == [f"c{i}" for i in range(6)]
    assert scheduler.peak_in_flight == 4
    assert server.stats()["requests"] == sum(planned_calls(c, judge=False) for c in conversations)


def test_a_request_whose_client_leaves_is_abandoned_unanswered_and_a_later_answer_is_counted(server, em):
    """What the benchmarks count as paid: answers, not requests a client gave up on (a timeout, a killed worker)."""
    import json
    import socket

    from devtools.fake_llm_server import request_digest

    server.configure(latency_ms=60_000)  # the answer would come a minute later: only the client's leaving ends it
    messages = P.build_messages(draft_context())
    body = json.dumps({"model": "fake-em", "messages": messages}).encode()
    host, port = server.url.split("//", 1)[1].split("/", 1)[0].split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        deadline = time.monotonic() + 60
        while server.stats()["in_flight"] != 1:
            assert time.monotonic() < deadline, "the request never reached the server"
            time.sleep(0.01)
    deadline = time.monotonic() + 60
    while server.stats()["in_flight"] != 0:  # the close cancels the request at once, not after its minute
        assert time.monotonic() < deadline, "the server kept answering a client that had left"
        time.sleep(0.01)
    stats = server.stats()
    assert (stats["requests"], stats["abandoned"], stats["completions"]) == (1, 1, 0)
    assert stats["last_answer_at"] is None and server.digests() == {}

    server.configure(latency_ms=0)
    draft_call(em(), Scheduler())
    stats = server.stats()
    assert (stats["requests"], stats["abandoned"], stats["completions"]) == (2, 1, 1)
    assert stats["last_answer_at"] is not None and server.digests() == {request_digest(messages): 1}
