"""Replays leave headroom for live participants: at a provider the participant chat also calls, a run takes at
most ATTUNE_REPLAY_PROVIDER_SHARE of the evaluated model's caps (default 80 %)."""

from __future__ import annotations

import pytest

from attunebench.replay.scheduler import ProviderLimits
from collection.models import OriginalModel
from scoring.models import EvaluatedModel
from scoring.replay_service import participant_providers, registry_spec

SHARED = "http://127.0.0.1:9/v1"


@pytest.fixture
def evaluated(db):
    return EvaluatedModel.objects.create(
        name="fake-em", litellm_model="openai/fake-em", api_base=SHARED, max_concurrency=10, requests_per_minute=100
    )


@pytest.fixture
def live_chat(settings, db):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    return OriginalModel.objects.create(name="chat", litellm_model="openai/chat-model", api_base=SHARED)


def test_a_provider_shared_with_the_live_chat_gets_eighty_percent_of_the_caps(evaluated, live_chat):
    assert registry_spec(evaluated).limits == ProviderLimits(max_in_flight=8, rpm=80)


def test_the_share_is_configurable_and_never_leaves_less_than_one(evaluated, live_chat, settings):
    settings.ATTUNE_REPLAY_PROVIDER_SHARE = 0.05
    assert registry_spec(evaluated).limits == ProviderLimits(max_in_flight=1, rpm=5)


def test_another_provider_or_an_offline_chat_keeps_the_full_caps(evaluated, live_chat, settings):
    OriginalModel.objects.filter(pk=live_chat.pk).update(api_base="http://127.0.0.1:10/v1")
    assert registry_spec(evaluated).limits == ProviderLimits(max_in_flight=10, rpm=100)
    OriginalModel.objects.filter(pk=live_chat.pk).update(api_base=SHARED)
    settings.ATTUNE_ALLOW_LIVE_MODELS = False  # participants chat with the offline model: nothing to share
    assert participant_providers() == set()
    assert registry_spec(evaluated).limits == ProviderLimits(max_in_flight=10, rpm=100)


def test_a_fallback_or_the_rewrite_model_at_the_provider_counts_too(evaluated, live_chat, settings):
    OriginalModel.objects.filter(pk=live_chat.pk).update(
        api_base="http://127.0.0.1:10/v1", fallback_litellm_model="openai/backup", fallback_api_base=SHARED
    )
    assert registry_spec(evaluated).limits == ProviderLimits(max_in_flight=8, rpm=80)
    OriginalModel.objects.filter(pk=live_chat.pk).update(fallback_litellm_model="")
    settings.ATTUNE_ALTERNATE_MODEL, settings.ATTUNE_ALTERNATE_API_BASE = "openai/rewriter", SHARED
    assert registry_spec(evaluated).limits == ProviderLimits(max_in_flight=8, rpm=80)
