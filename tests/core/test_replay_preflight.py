"""Preflight and failure kinds: each failure a new user meets, against local servers, says what and where.

The probe is driven against the fake OpenAI-compatible provider (a good one, one that wants a key, one that
ignores the answer format), a closed port, and a model name litellm does not know. The failure watch is driven
with the errors the replay sees, and a replay against a closed port stops early with its reason.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from attunebench.replay import failures as F
from attunebench.replay.llm import EMSpec
from attunebench.replay.preflight import live_reason, probe, unknown_model_problem
from attunebench.replay.protocol import ReplayConfig
from attunebench.replay.run import make_replayer
from attunebench.replay.scheduler import PermanentCallError, Scheduler, TransientCallError
from attunebench.synth import synth_conversations
from devtools.fake_llm_server import FakeConfig, FakeLLMServer

CONVERSATION = synth_conversations(1, seed=3)[0]


def closed_port_url() -> str:
    """An address on this machine where nothing listens (a port bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def local(url: str, **params: object) -> EMSpec:
    return EMSpec(name="openai/fake-em", litellm_model="openai/fake-em", api_base=url, params=params)


def run_probe(spec: EMSpec, role: str = "model") -> object:
    return asyncio.run(probe(spec, CONVERSATION, role=role))


def test_a_good_server_passes_with_one_draft_call():
    with FakeLLMServer() as server:
        result = run_probe(local(server.url))
        assert result.ok and "draft call in the expected format" in result.message
        assert server.stats()["by_call_type"] == {"draft": 1}  # one real AttuneBench call, nothing more


def test_a_judge_is_probed_with_the_judges_own_call():
    with FakeLLMServer() as server:
        result = run_probe(local(server.url), role="judge")
        assert result.ok and result.line().startswith("judge openai/fake-em:")
        assert server.stats()["by_call_type"] == {"judge": 1}


def test_a_closed_port_says_connection_refused_and_where():
    url = closed_port_url()
    for spec in (local(url), local(url, client="litellm")):  # the OpenAI SDK route and litellm's
        result = run_probe(spec)
        assert not result.ok and result.reason == F.CONNECTION
        assert result.message == f"connection refused at {url}"


def test_a_wrong_key_says_401_and_which_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    with FakeLLMServer(FakeConfig(api_key="sk-right")) as server:
        named = run_probe(local(server.url, api_key_env="OPENAI_API_KEY"))
        unnamed = run_probe(local(server.url))
    host = server.url.split("//")[1].split("/")[0]
    assert not named.ok and named.reason == F.CLIENT_ERROR
    assert named.message == f"401 from {host}: check OPENAI_API_KEY"
    assert unnamed.message.startswith(f"401 from {host}: the server wants a key") and "api_key_env" in unnamed.message
    assert "sk-wrong" not in named.message


def test_an_answer_in_the_wrong_format_names_the_missing_field_and_shows_the_answer():
    with FakeLLMServer(FakeConfig(answer_text='{"reply_text": "hello there"}')) as server:
        missing = run_probe(local(server.url))
        server.configure(answer_text="Sure! I am happy to help with that.")
        prose = run_probe(local(server.url))
    assert not missing.ok and missing.reason == F.UNUSABLE
    assert missing.message == (
        'the answer to a draft call has no "response" field (first 200 characters: \'{"reply_text": "hello there"}\')'
    )
    assert "contains no JSON object" in prose.message and "Sure! I am happy to help" in prose.message


def test_a_model_name_typo_is_caught_before_any_call_with_close_names():
    typo = unknown_model_problem(EMSpec(name="gpt-4o-minii")) or ""
    assert typo.startswith('model "gpt-4o-minii" is not known to litellm; did you mean gpt-4o-mini')
    result = run_probe(EMSpec(name="nosuchmodel"))
    assert not result.ok and result.message.startswith('model "nosuchmodel" is not known to litellm')
    # A provider prefix, a known name or a server of one's own are not second-guessed by name.
    assert unknown_model_problem(EMSpec(name="openai/my-finetune")) is None
    assert unknown_model_problem(EMSpec(name="gpt-4o-mini")) is None
    assert unknown_model_problem(local("http://127.0.0.1:1/v1")) is None


def test_the_live_model_reason_names_where_the_calls_would_go():
    assert "litellm sends its calls to api.openai.com" in live_reason(EMSpec(name="gpt-4o-mini"))
    assert "https://llm.example.org/v1 is not on this machine" in live_reason(
        EMSpec(name="x", litellm_model="openai/x", api_base="https://llm.example.org/v1")
    )


def test_failures_are_put_under_four_kinds():
    assert F.reason_of(TransientCallError("connection", "refused")) == F.CONNECTION
    assert F.reason_of(TransientCallError("429", "slow down", status=429)) == F.CLIENT_ERROR
    assert F.reason_of(PermanentCallError("bad key", status=401)) == F.CLIENT_ERROR
    assert F.reason_of(TransientCallError("500", "oops", status=500)) == F.SERVER_ERROR
    assert F.reason_of(TransientCallError("timeout", "late")) == F.SERVER_ERROR
    assert F.reason_of(TransientCallError("invalid-answer", "<html>")) == F.UNUSABLE
    # Run files written before the kind was recorded are read from their error text.
    assert F.reason_of_record({"kind": "unusable_reply", "error": "x"}) == F.UNUSABLE
    assert F.reason_of_record({"error": "gave up after 10 attempts: connection: refused"}) == F.CONNECTION
    assert F.reason_of_record({"reason": F.SERVER_ERROR, "error": "connection"}) == F.SERVER_ERROR


def test_the_watch_stops_only_when_the_first_attempts_all_fail_alike():
    watch = F.FailureWatch(stop_after=3)
    watch.attempt_failed(F.CONNECTION, "draft: refused")
    watch.attempt_failed(F.CONNECTION, "draft: refused")
    with pytest.raises(F.StoppedEarly) as stopped:
        watch.attempt_failed(F.CONNECTION, "draft: refused\nat port 1")
    assert stopped.value.reason == F.CONNECTION and stopped.value.attempts == 3
    assert "draft: refused at port 1" in str(stopped.value)  # one line
    with pytest.raises(F.StoppedEarly):  # every later attempt ends too
        watch.attempt_failed(F.UNUSABLE, "x")

    worked = F.FailureWatch(stop_after=2)
    worked.succeeded()
    for _ in range(5):
        worked.attempt_failed(F.CONNECTION, "refused")  # a replay that once worked is never stopped
    mixed = F.FailureWatch(stop_after=2)
    mixed.attempt_failed(F.CONNECTION, "refused")
    mixed.attempt_failed(F.UNUSABLE, "prose")
    mixed.attempt_failed(F.UNUSABLE, "prose")  # two reasons: no single cause, it goes on
    overloaded = F.FailureWatch(stop_after=2)
    for _ in range(5):
        overloaded.attempt_failed(F.CLIENT_ERROR, "429", TransientCallError("429", "slow down", status=429))
    never = F.FailureWatch(stop_after=0)
    for _ in range(50):
        never.attempt_failed(F.CONNECTION, "refused")
    mixed.call_failed(F.UNUSABLE)
    mixed.unconnected = 4
    assert mixed.describe() == " | failed: unusable answer 1 | 4 attempts never connected | last error: prose"


def test_a_replay_against_a_closed_port_stops_early_and_counts_no_call_made():
    url = closed_port_url()
    watch = F.FailureWatch(stop_after=6)
    replayer = make_replayer(
        local(url), ReplayConfig(), concurrency=2, scheduler=Scheduler(max_concurrency=2), watch=watch
    )

    async def main() -> None:
        await replayer.replay_many(synth_conversations(3, seed=4))

    with pytest.raises(F.StoppedEarly) as stopped:
        asyncio.run(main())
    assert stopped.value.reason == F.CONNECTION
    # The requests never reached anyone: they are counted apart, not as calls made.
    assert replayer.totals.calls_made == 0 and replayer.totals.calls_unconnected >= 6


def test_failed_calls_are_grouped_by_kind_with_one_example_each():
    groups = F.group_failures(
        [
            ("c1", {"turnNumber": 2, "call": "draft", "error": "gave up: connection: refused", "reason": F.CONNECTION}),
            ("c2", {"turnNumber": None, "call": "post", "error": "unusable", "reason": F.UNUSABLE}),
            ("c3", {"turnNumber": 1, "call": "draft", "error": "refused again", "reason": F.CONNECTION}),
        ]
    )
    assert [(g.reason, g.count) for g in groups] == [(F.CONNECTION, 2), (F.UNUSABLE, 1)]
    assert groups[0].example == "c1 turn 2 draft: gave up: connection: refused"
    assert groups[1].example == "c2 post-conversation post: unusable"
    text = F.describe_groups(groups)
    assert text.startswith("Failed calls by kind (3 in all):") and F.ADVICE[F.CONNECTION] in text
