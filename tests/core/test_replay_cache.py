"""The call cache: stable keys, backends, and the dry-run estimate built on the same prompts."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from attunebench.replay.cache import CachedCall, FileCache, LayeredCache, MemoryCache, make_key
from attunebench.replay.llm import EMSpec, spec_from_name
from attunebench.replay.protocol import ReplayConfig, planned_calls
from attunebench.replay.run import estimate
from devtools.replay_fixtures import marked_conversation

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "ü"}]


def test_key_is_sha256_of_model_params_messages_and_prompt_version():
    expected = hashlib.sha256(
        json.dumps(["m", {"seed": 1, "temperature": 0}, MESSAGES, "v1"], sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()
    assert make_key("m", {"temperature": 0, "seed": 1}, MESSAGES, "v1") == expected
    assert make_key("m", {"temperature": 0.1, "seed": 1}, MESSAGES, "v1") != expected
    assert make_key("m", {"temperature": 0, "seed": 1}, MESSAGES, "v2") != expected


def test_transport_settings_do_not_change_the_key():
    a = EMSpec(name="x", litellm_model="openai/x", api_base="http://a/v1", params={"temperature": 0, "timeout": 5})
    b = EMSpec(name="x", litellm_model="openai/x", api_base="http://b/v1", params={"temperature": 0, "timeout": 60})
    assert a.answer_params() == b.answer_params() == {"temperature": 0}


def test_file_cache_round_trips_and_treats_damage_as_a_miss(tmp_path):
    cache = FileCache(tmp_path)
    entry = CachedCall(
        model="m", prompt_version="v", response='{"a": 1}', prompt_tokens=3, completion_tokens=2, cost_usd=None
    )
    key = make_key("m", {}, MESSAGES, "v")
    assert asyncio.run(cache.get(key)) is None
    asyncio.run(cache.set(key, entry))
    assert asyncio.run(FileCache(tmp_path).get(key)) == entry
    path = tmp_path / key[:2] / f"{key}.json"
    path.write_text("{broken")
    assert asyncio.run(cache.get(key)) is None
    assert not list(tmp_path.rglob(".tmp-*"))


def test_layered_cache_fills_the_fast_layer_on_a_slow_hit():
    fast, slow = MemoryCache(), MemoryCache()
    entry = CachedCall(model="m", prompt_version="v", response="r")
    asyncio.run(slow.set("k", entry))
    layered = LayeredCache(fast, slow)
    assert asyncio.run(layered.get("k")) == entry
    assert len(fast) == 1 and fast.hits == 0 and slow.hits == 1
    assert asyncio.run(layered.get("k")) == entry and fast.hits == 1


def test_dry_run_counts_calls_and_prices_them():
    conversations = [marked_conversation(turns=2, conversation_id=f"c{i}") for i in range(3)]
    priced = EMSpec(name="p", litellm_model="openai/p", input_cost_per_million=1.0, output_cost_per_million=4.0)
    config = ReplayConfig(judge=priced)
    plan = estimate(conversations, priced, config)
    assert plan.calls == sum(planned_calls(c, judge=True) for c in conversations) == 3 * (2 * 5 + 1)
    assert plan.judge_calls == 6 and plan.em_calls == 27
    assert plan.cost_usd == pytest.approx((plan.prompt_tokens * 1.0 + plan.output_tokens * 4.0) / 1e6)
    free = estimate(conversations, spec_from_name("baseline:lexicon"), ReplayConfig())
    assert free.cost_usd == 0.0 and free.judge_calls == 0
    unknown = estimate(conversations, EMSpec(name="u", litellm_model="nowhere/unknown-model"), ReplayConfig())
    assert unknown.cost_usd is None and "unknown" in unknown.describe()


def test_one_price_lookup_for_calls_and_estimates():
    from attunebench.replay.llm import call_cost, load_litellm, price_per_token

    own = EMSpec(name="p", litellm_model="openai/p", input_cost_per_million=1.0, output_cost_per_million=4.0)
    assert price_per_token(own) == (1e-6, 4e-6)
    # 1000 prompt tokens at $1/M + 500 output tokens at $4/M = $0.001 + $0.002.
    assert call_cost(own, 1000, 500) == pytest.approx(0.003)
    half = EMSpec(name="h", litellm_model="openai/h", output_cost_per_million=4.0)
    assert price_per_token(half) == (0.0, 4e-6)  # a missing side of an override is free
    assert price_per_token(spec_from_name("baseline:random")) == (0.0, 0.0)
    listed = EMSpec(name="g", litellm_model="openai/gpt-4o-mini")  # found without its provider prefix
    entry = load_litellm().model_cost["gpt-4o-mini"]
    assert price_per_token(listed) == (entry["input_cost_per_token"], entry["output_cost_per_token"])
    unknown = EMSpec(name="u", litellm_model="nowhere/unknown-model")
    assert price_per_token(unknown) is None and call_cost(unknown, 10, 10) is None


def test_the_endpoint_and_the_repeat_are_part_of_the_key_and_spelt_one_way() -> None:
    from attunebench.replay.cache import normalise_endpoint

    plain = make_key("m", {}, MESSAGES, "v")
    assert make_key("m", {}, MESSAGES, "v", endpoint="", repeat=0) == plain  # the provider's own endpoint
    at_one = make_key("m", {}, MESSAGES, "v", endpoint=normalise_endpoint("http://127.0.0.1:9001/v1"))
    at_two = make_key("m", {}, MESSAGES, "v", endpoint=normalise_endpoint("http://127.0.0.1:9002/v1"))
    assert len({plain, at_one, at_two}) == 3
    assert make_key("m", {}, MESSAGES, "v", repeat=1) != plain
    for spelling in ("HTTP://LocalHost:80/v1/", "http://localhost/v1", "http://user:secret@localhost/v1"):
        assert normalise_endpoint(spelling) == "http://localhost/v1"
    assert normalise_endpoint("https://api.example.org:443/") == "https://api.example.org"
    assert normalise_endpoint(None) == normalise_endpoint("  ") == ""


def test_an_endpoint_never_carries_a_query_and_keeps_ipv6_brackets() -> None:
    from attunebench.replay.cache import normalise_endpoint

    assert normalise_endpoint("https://api.example.org/v1?key=SECRET") == "https://api.example.org/v1"
    assert normalise_endpoint("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"
    assert normalise_endpoint("http://host:notaport/v1") == "http://host:notaport/v1"  # kept, never a crash
