"""The direct route decided without litellm (``route_without_litellm``) is always litellm's own answer
(``route_by_litellm``): the rule only ever says "direct" where litellm says so too, and it does say so for
the names OpenAI-compatible servers usually serve, so their first run need not import litellm."""

from __future__ import annotations

import pytest

from attunebench.replay import llm
from attunebench.replay.llm import load_litellm, route_by_litellm, route_without_litellm

SERVED_NAMES = (
    "fake-em",
    "local-em",
    "served",
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct",
    "mistral-7b-instruct-v0.3",
    "llama3.2:3b",
    "phi-4-mini",
    "my_model.v2",
    "modèle-été",
)
# Names litellm has rules for (listed, or a family by the name's form), and look-alikes of them.
OTHER_NAMES = (
    "gpt-4",
    "gpt-4o-mini",
    "gpt-5-custom",
    "gpt-6-local",
    "my-gpt-clone",
    "o3-mini",
    "o1",
    "o4-local",
    "responses/gpt-4o",
    "deepseek-chat",
    "claude-3-5-sonnet-20241022",
    "text-embedding-3-small",
    "ft:gpt-4o-mini:org::id",
    "",
)


@pytest.fixture(autouse=True)
def local_price_list(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.mark.parametrize("name", SERVED_NAMES + OTHER_NAMES)
def test_the_rule_says_direct_only_where_litellm_does(name):
    model = f"openai/{name}"
    if route_without_litellm(model):
        assert route_by_litellm(model) is True


@pytest.mark.parametrize("name", SERVED_NAMES)
def test_the_usual_served_names_are_decided_without_litellm(name):
    assert route_without_litellm(f"openai/{name}") is True


def test_no_model_litellm_lists_is_decided_without_it():
    # Names Attune itself described to litellm (no price) are not listed, for litellm's route as for the rule.
    listed = sorted(set(load_litellm().model_cost) - llm._registered_unlisted)
    assert listed and not any(route_without_litellm(f"openai/{name}") for name in listed)


def test_a_price_list_from_the_network_leaves_the_answer_to_litellm(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    assert route_without_litellm("openai/fake-em") is False
