"""The run page says what bounds a run's calls: the registry's caps, under the workers' concurrency."""

from __future__ import annotations

import pytest
from django.urls import reverse

from scoring.models import EvaluatedModel, EvaluationRun
from scoring.replay_service import run_limits

API = "http://127.0.0.1:9/v1"


@pytest.fixture
def runs(db, settings):
    settings.ATTUNE_REPLAY_CONCURRENCY = 32
    tight = EvaluatedModel.objects.create(
        name="acme/em", litellm_model="openai/em", api_base=API, max_concurrency=4, requests_per_minute=60
    )
    judge = EvaluatedModel.objects.create(
        name="acme/judge", litellm_model="openai/judge", api_base=API, max_concurrency=10
    )
    roomy = EvaluatedModel.objects.create(name="roomy/em", litellm_model="anthropic/claude", max_concurrency=100)
    return (
        EvaluationRun.objects.create(evaluated_model=tight, judge_model=judge),
        EvaluationRun.objects.create(evaluated_model=roomy),
        EvaluationRun.objects.create(
            evaluated_model=EvaluatedModel.objects.get_or_create(
                name="baseline:random", defaults={"kind": EvaluatedModel.Kind.OFFLINE}
            )[0]
        ),
    )


def test_each_provider_gets_the_tighter_registry_cap_under_the_worker_setting(runs):
    tight, roomy, offline = runs
    # EM (4) and judge (10) share one provider: min(4, 10) = 4, under the workers' 32.
    assert run_limits(tight) == [
        f"Calls to openai@{API}: at most 4 in flight (the registry's max_concurrency 4, below "
        "ATTUNE_REPLAY_CONCURRENCY 32) and 60 requests per minute (registry); halved while the provider "
        "reports overload, then raised back step by step."
    ]
    # min(100, 32) = 32: the workers' setting is what binds.
    assert run_limits(roomy)[0].startswith(
        "Calls to anthropic: at most 32 in flight (ATTUNE_REPLAY_CONCURRENCY 32; the registry allows 100);"
    )
    assert run_limits(offline) == []  # offline baselines call no provider


def test_the_run_page_shows_the_cap(runs, client, researcher):
    client.force_login(researcher)
    page = client.get(reverse("research:run", args=[runs[0].pk])).content.decode()
    assert "at most 4 in flight" in page and "60 requests per minute" in page
