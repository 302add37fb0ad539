"""Which route a model's calls take, and that both routes ask an OpenAI-compatible server the same thing.

An ``openai/...`` model at an api_base of its own that litellm has no rules
for is called through the OpenAI SDK; ``"client": "litellm"``, models litellm
knows and every other provider go through litellm. The call cache and the
journal key a request by what is asked, not by the route, so both routes must
send the server the same request and treat its failures alike.
"""

from __future__ import annotations

import logging

import pytest

from attunebench.replay import prompts as P
from attunebench.replay.aio import run_sync
from attunebench.replay.llm import EMSpec, LiteLLMBackend, uses_openai_sdk, warm_up
from attunebench.replay.scheduler import PermanentCallError, Scheduler
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from tests.core.replay_calls import ROUTES, draft_call, draft_context, take_route

EVERY_ANSWER_PARAM = {
    "temperature": 0.3,
    "seed": 4,
    "max_tokens": 500,
    "stop": ["\n\n"],
    "top_p": 0.9,
    "top_k": 40,
    "frequency_penalty": 0.1,
    "presence_penalty": 0.2,
    "response_format": {"type": "json_object"},
    "reasoning_effort": "low",
    "max_completion_tokens": 600,
}


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(FakeConfig()) as running:
        yield running


@pytest.fixture(params=sorted(ROUTES))
def route(request, monkeypatch) -> dict[str, str]:
    """The model parameters of one route: a test that takes it runs on each."""
    return take_route(request.param, monkeypatch)


def _sent(server, spec: EMSpec) -> dict:
    """The fields other than the messages that the server received for one call of ``spec``."""
    ctx = draft_context()
    server.reset()
    completion = run_sync(LiteLLMBackend().complete(spec, P.build_messages(ctx), ctx))
    assert completion.text and server.stats()["requests"] == 1
    return server.stats()["last_request_fields"]


@pytest.mark.parametrize(
    ("litellm_model", "api_base", "params", "direct"),
    [
        ("openai/served", "http://127.0.0.1:9/v1", {}, True),
        ("openai/meta-llama/Llama-3.1-8B-Instruct", "http://127.0.0.1:9/v1", {}, True),
        ("openai/served", "http://127.0.0.1:9/v1", {"client": "litellm"}, False),
        # Models litellm has rules for, at a gateway: it renames or drops parameters for them.
        ("openai/o3-mini", "http://127.0.0.1:9/v1", {}, False),
        ("openai/gpt-4o-mini", "http://127.0.0.1:9/v1", {}, False),
        ("openai/gpt-5-custom", "http://127.0.0.1:9/v1", {}, False),  # not listed, but a family with rules
        ("openai/gpt-4o-mini", None, {}, False),  # OpenAI itself
        ("hosted_vllm/served", "http://127.0.0.1:9/v1", {}, False),
        ("anthropic/claude-x", None, {}, False),
    ],
)
def test_only_a_model_litellm_has_no_rules_for_at_its_own_server_skips_litellm(litellm_model, api_base, params, direct):
    spec = EMSpec(name="m", litellm_model=litellm_model, api_base=api_base, params=params)
    assert uses_openai_sdk(spec) is direct


def test_an_offline_baseline_takes_neither_route():
    assert uses_openai_sdk(EMSpec(name="baseline:uniform", kind="offline", api_base="http://x/v1")) is False


def test_an_unknown_client_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"m: client must be one of litellm, not 'sdk'"):
        EMSpec(name="m", litellm_model="openai/served", params={"client": "sdk"})


def test_every_route_sends_the_server_the_same_request(server, monkeypatch):
    direct = EMSpec(name="m", litellm_model="openai/fake-em", api_base=server.url, params=EVERY_ANSWER_PARAM)
    through_litellm = EMSpec(
        name="m",
        litellm_model="openai/fake-em",
        api_base=server.url,
        params={**EVERY_ANSWER_PARAM, "client": "litellm"},
    )
    assert uses_openai_sdk(direct) and not uses_openai_sdk(through_litellm)
    sent = _sent(server, direct)
    # The served name without litellm's provider prefix, and every answer parameter as given (top_k, which
    # OpenAI's own API lacks, in the body as OpenAI-compatible servers read it): litellm has no rules for the
    # model, so it sends them as given too.
    assert sent == {"model": "fake-em", **EVERY_ANSWER_PARAM}
    assert _sent(server, through_litellm) == sent
    take_route("openai-sdk", monkeypatch)  # the same model behind a proxy: through the OpenAI SDK
    assert _sent(server, direct) == sent


def test_the_route_is_not_part_of_the_cache_key(server):
    from attunebench.replay.courier import request_key

    messages = P.build_messages(draft_context())
    base = {"name": "m", "litellm_model": "openai/fake-em", "api_base": server.url}
    direct = EMSpec(**base, params={"temperature": 0})
    through_litellm = EMSpec(**base, params={"temperature": 0, "client": "litellm"})
    # An answer paid through one route is found by the other: switching routes never pays for it again.
    assert request_key(direct, messages) == request_key(through_litellm, messages)


def _at_fake(server, route: dict) -> EMSpec:
    return EMSpec(name="m", litellm_model="openai/fake-em", api_base=server.url, params={"timeout": 10.0, **route})


@pytest.mark.parametrize("broken", ["html", "empty"])
def test_a_200_that_is_no_chat_completion_is_a_passing_failure_on_every_route(server, route, broken):
    """A gateway's maintenance page or an empty answer is retried like a 500, never taken for an answer or
    allowed to stop the replay."""
    server.reset()
    server.configure(script=[broken])
    scheduler = Scheduler(base_delay=0.01, max_delay=0.05, max_attempts=3)
    completion = draft_call(_at_fake(server, route), scheduler)
    assert '"response"' in completion.text
    assert server.stats()["requests"] == 2 and server.stats()["errors"] == {broken: 1}
    assert sum(scheduler.stats.errors.values()) == 1  # the broken answer was one failed try, then retried


def test_an_error_object_under_status_200_is_the_servers_refusal_on_every_route(server, route):
    server.reset()
    server.configure(script=["error-json"])
    with pytest.raises(PermanentCallError, match="upstream unavailable"):
        draft_call(_at_fake(server, route), Scheduler(base_delay=0.01, max_delay=0.05, max_attempts=3))
    assert server.stats()["requests"] == 1  # not asked again


def test_a_warm_up_sends_nothing_and_a_failed_sdk_warm_up_is_logged(server, caplog, monkeypatch):
    from attunebench.replay import openai_compatible

    spec = EMSpec(name="m", litellm_model="openai/fake-em", api_base=server.url, params={"timeout": 10.0})
    server.reset()
    run_sync(warm_up([spec]))  # the direct route's: nothing to send
    take_route("openai-sdk", monkeypatch)  # behind a proxy: the OpenAI SDK's warm-up
    run_sync(warm_up([spec]))
    assert server.stats()["requests"] == 0

    async def broken() -> None:
        raise RuntimeError("no TLS roots")

    monkeypatch.setattr(openai_compatible, "warm_up", broken)
    caplog.set_level(logging.WARNING, logger="attune.replay")
    run_sync(warm_up([spec]))
    assert "OpenAI SDK warm-up failed (the first call will be slower): no TLS roots" in caplog.text
    assert _sent(server, spec)["model"] == "fake-em"  # the calls go on
