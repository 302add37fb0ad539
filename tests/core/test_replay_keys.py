"""Which key a model call may carry: named provider variables only, never ambient ones.

The calls go through litellm to the local fake OpenAI-compatible server, which
records every bearer token it is handed.
"""

from __future__ import annotations

import pytest

from attunebench.replay.llm import (
    DEFAULT_PROVIDER_KEY_ENV,
    HIDDEN,
    NO_KEY,
    EMSpec,
    key_env_problem,
    params_problem,
    scrub_params,
)
from attunebench.replay.scheduler import PermanentCallError, Scheduler
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from tests.core.replay_calls import ROUTES, draft_call, take_route

ALLOWED = frozenset(DEFAULT_PROVIDER_KEY_ENV)


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(FakeConfig()) as running:
        yield running


@pytest.fixture(params=sorted(ROUTES))
def route(request, monkeypatch) -> dict[str, str]:
    """The model parameters of one route: a test that takes it runs on each."""
    return take_route(request.param, monkeypatch)


def _spec(server, **params) -> EMSpec:
    return EMSpec(
        name="fake/em", litellm_model="openai/fake-em", api_base=server.url, params={"timeout": 10.0, **params}
    )


def test_an_ambient_provider_key_is_never_sent_to_a_models_own_api_base(server, monkeypatch, route):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-must-not-leave")
    server.reset()
    draft_call(_spec(server, **route), Scheduler(max_attempts=1))
    assert server.stats()["bearer_tokens"] == {NO_KEY: 1}


def test_a_named_provider_key_is_sent_to_the_api_base(server, monkeypatch, route):
    monkeypatch.setenv("GROQ_API_KEY", "gsk-configured")
    server.reset()
    draft_call(_spec(server, api_key_env="GROQ_API_KEY", **route), Scheduler(max_attempts=1))
    assert server.stats()["bearer_tokens"] == {"gsk-configured": 1}


@pytest.mark.parametrize("name", ["ATTUNE_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SECRET_TOKEN", "HOME"])
def test_a_spec_naming_anything_but_a_provider_key_is_refused(name):
    with pytest.raises(ValueError, match=f"fake/em: api_key_env '{name}'"):
        EMSpec(name="fake/em", litellm_model="openai/fake-em", params={"api_key_env": name})


def test_own_secrets_are_refused_even_when_a_list_names_them():
    problem = key_env_problem("ATTUNE_SECRET_KEY", {"ATTUNE_SECRET_KEY"})
    assert problem is not None and "application's own secrets" in problem
    assert key_env_problem("database_url", {"database_url"}) is not None  # case does not get round it
    assert key_env_problem("OPENAI_API_KEY", ALLOWED) is None


def test_the_key_variable_is_checked_again_at_call_time(server, monkeypatch):
    """A spec built with a wider list (or altered later) still cannot read an own secret when it calls."""
    monkeypatch.setenv("ATTUNE_SECRET_KEY", "django-secret")
    spec = _spec(server)
    object.__setattr__(spec, "params", {"timeout": 10.0, "api_key_env": "ATTUNE_SECRET_KEY"})
    server.reset()
    with pytest.raises(PermanentCallError, match="application's own secrets"):
        spec.api_key()
    assert server.stats()["requests"] == 0


def test_stored_secrets_are_refused_and_hidden():
    for key in ("api_key", "client_secret", "password", "access_token"):
        problem = params_problem({key: "x"}, ALLOWED)
        assert problem is not None and problem.startswith(f"{key}: API keys come from the environment only")
    assert params_problem({"max_tokens": 50, "temperature": 0, "api_key_env": "OPENAI_API_KEY"}, ALLOWED) is None
    shown = scrub_params({"api_key": "sk-1", "max_tokens": 50, "api_key_env": "OPENAI_API_KEY"})
    assert shown == {"api_key": HIDDEN, "max_tokens": 50, "api_key_env": "OPENAI_API_KEY"}
