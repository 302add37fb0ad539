"""Models outside litellm's price list are described to it once (public ``register_model``), without a price."""

from __future__ import annotations

from attunebench.replay import llm
from attunebench.replay.llm import EMSpec, load_litellm, price_per_token, register_unlisted


def test_an_unlisted_model_is_registered_once_and_its_cost_stays_unknown():
    litellm = load_litellm()
    spec = EMSpec(name="ad-hoc", litellm_model="openai/attune-test-unlisted-model", api_base="http://127.0.0.1:9/v1")
    assert spec.litellm_model not in litellm.model_cost
    assert price_per_token(spec) is None

    register_unlisted(litellm, spec.litellm_model)
    register_unlisted(litellm, spec.litellm_model)  # a second call changes nothing

    assert litellm.model_cost[spec.litellm_model]["litellm_provider"] == "openai"
    assert spec.litellm_model in llm._registered_unlisted
    # Registration gives litellm something to find, not a price: the cost is still unknown (null), never 0.
    assert price_per_token(spec) is None


def test_a_listed_model_is_left_as_litellm_knows_it():
    litellm = load_litellm()
    listed = next(
        name
        for name, entry in litellm.model_cost.items()
        if entry.get("litellm_provider") == "openai" and entry.get("input_cost_per_token") and "/" not in name
    )
    spec = EMSpec(name="listed", litellm_model=f"openai/{listed}")
    before = dict(litellm.model_cost[listed])

    register_unlisted(litellm, spec.litellm_model)

    assert spec.litellm_model not in llm._registered_unlisted
    assert litellm.model_cost[listed] == before
    price = price_per_token(spec)
    assert price is not None and price[0] == before["input_cost_per_token"]
