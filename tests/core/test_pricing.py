"""One pricing rule for every model call (attunebench.pricing): litellm's own cost calculation, prompt tokens
served from the provider's cache at their rate, the registry's price as an override, unknown as None."""

from __future__ import annotations

import pytest

from attunebench import pricing
from attunebench.pricing import PriceOverride
from attunebench.replay.llm import EMSpec, call_cost, load_litellm, register_unlisted


def test_cached_prompt_tokens_are_charged_at_the_cache_read_price():
    # gpt-4o-mini in litellm's bundled list: input 1.5e-7, cache read 7.5e-8, output 6e-7 USD per token.
    # 1000 prompt tokens of which 800 cached, 100 completion tokens:
    #   200 × 1.5e-7 + 800 × 7.5e-8 + 100 × 6e-7 = 3e-5 + 6e-5 + 6e-5 = 1.5e-4
    entry = load_litellm().model_cost["gpt-4o-mini"]
    assert (entry["input_cost_per_token"], entry["cache_read_input_token_cost"], entry["output_cost_per_token"]) == (
        1.5e-7,
        7.5e-8,
        6e-7,
    )
    assert pricing.call_cost("gpt-4o-mini", 1000, 100, cached_prompt_tokens=800) == pytest.approx(1.5e-4)
    # Nothing cached: 1000 × 1.5e-7 + 100 × 6e-7 = 1.5e-4 + 6e-5 = 2.1e-4
    assert pricing.call_cost("gpt-4o-mini", 1000, 100) == pytest.approx(2.1e-4)
    # The provider prefix is accepted: the same price.
    assert pricing.call_cost("openai/gpt-4o-mini", 1000, 100, cached_prompt_tokens=800) == pytest.approx(1.5e-4)


def test_the_registry_price_overrides_the_list_and_a_missing_side_is_free():
    # 1 USD and 4 USD per million: 1000 × 1e-6 + 500 × 4e-6 = 0.001 + 0.002 = 0.003, cached tokens at the one
    # input price the registry holds.
    override = PriceOverride(1.0, 4.0)
    assert pricing.call_cost("gpt-4o-mini", 1000, 500, cached_prompt_tokens=800, override=override) == pytest.approx(
        0.003
    )
    assert pricing.call_cost("nowhere/unknown", 1000, 500, override=PriceOverride(None, 4.0)) == pytest.approx(0.002)
    assert PriceOverride.of(None, None) is None


def test_an_unknown_or_merely_described_model_has_no_price():
    assert pricing.call_cost("nowhere/unknown-model", 10, 10) is None
    # A model described to litellm without a price (so it stops searching) is not free: still unknown.
    register_unlisted(load_litellm(), "openai/attune-described-only")
    assert pricing.listed_name("openai/attune-described-only") is None
    assert pricing.call_cost("openai/attune-described-only", 10, 10) is None


def test_the_replay_prices_calls_by_the_same_rule():
    listed = EMSpec(name="m", litellm_model="openai/gpt-4o-mini")
    assert call_cost(listed, 1000, 100, 800) == pricing.call_cost(
        "openai/gpt-4o-mini", 1000, 100, cached_prompt_tokens=800
    )
    own = EMSpec(
        name="own", litellm_model="openai/gpt-4o-mini", input_cost_per_million=1.0, output_cost_per_million=4.0
    )
    assert call_cost(own, 1000, 500, 800) == pytest.approx(0.003)
    assert call_cost(EMSpec(name="baseline:x", kind="offline"), 1000, 500) == 0.0


def test_usage_reports_cached_tokens_in_either_shape():
    class Details:
        cached_tokens = 7

    class OpenAIUsage:
        prompt_tokens_details = Details()

    class AnthropicUsage:
        prompt_tokens_details = None
        cache_read_input_tokens = 5

    assert pricing.cached_prompt_tokens(OpenAIUsage()) == 7
    assert pricing.cached_prompt_tokens(AnthropicUsage()) == 5
    assert pricing.cached_prompt_tokens({"prompt_tokens": 3}) == 0 and pricing.cached_prompt_tokens(None) == 0
