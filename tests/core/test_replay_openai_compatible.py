"""Which route a model's calls take, and that both routes ask an OpenAI-compatible server the same thing.

An ``openai/...`` model at an api_base of its own is called through the OpenAI
SDK; ``"client": "litellm"`` and every other provider go through litellm. The
call cache and the journal key a request by what is asked, not by the route,
so both routes must send the server the same request.
"""

from __future__ import annotations

import pytest

from attunebench.replay import prompts as P
from attunebench.replay.aio import run_sync
from attunebench.replay.llm import EMSpec, LiteLLMBackend
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from tests.core.replay_calls import draft_context

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
}


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(FakeConfig()) as running:
        yield running


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
        ("openai/served", "http://127.0.0.1:9/v1", {"client": "litellm"}, False),
        ("openai/gpt-4o-mini", None, {}, False),  # OpenAI itself: litellm knows its models' parameters
        ("hosted_vllm/served", "http://127.0.0.1:9/v1", {}, False),
        ("anthropic/claude-x", None, {}, False),
    ],
)
def test_only_an_openai_model_at_its_own_server_skips_litellm(litellm_model, api_base, params, direct):
    spec = EMSpec(name="m", litellm_model=litellm_model, api_base=api_base, params=params)
    assert spec.openai_compatible_server is direct


def test_an_offline_baseline_takes_neither_route():
    assert EMSpec(name="baseline:uniform", kind="offline", api_base="http://x/v1").openai_compatible_server is False


def test_an_unknown_client_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"m: client must be one of litellm, not 'sdk'"):
        EMSpec(name="m", litellm_model="openai/served", params={"client": "sdk"})


def test_both_routes_send_the_server_the_same_request(server):
    direct = EMSpec(name="m", litellm_model="openai/fake-em", api_base=server.url, params=EVERY_ANSWER_PARAM)
    through_litellm = EMSpec(
        name="m",
        litellm_model="openai/fake-em",
        api_base=server.url,
        params={**EVERY_ANSWER_PARAM, "client": "litellm"},
    )
    assert direct.openai_compatible_server and not through_litellm.openai_compatible_server
    sent = _sent(server, direct)
    # The served name without litellm's provider prefix, and every answer parameter as given (top_k, which
    # OpenAI's own API lacks, in the body as OpenAI-compatible servers read it).
    assert sent == {"model": "fake-em", **EVERY_ANSWER_PARAM}
    assert _sent(server, through_litellm) == sent


def test_the_route_is_not_part_of_the_cache_key(server):
    from attunebench.replay.courier import request_key

    messages = P.build_messages(draft_context())
    base = {"name": "m", "litellm_model": "openai/fake-em", "api_base": server.url}
    direct = EMSpec(**base, params={"temperature": 0})
    through_litellm = EMSpec(**base, params={"temperature": 0, "client": "litellm"})
    # An answer paid through one route is found by the other: switching routes never pays for it again.
    assert request_key(direct, messages) == request_key(through_litellm, messages)
