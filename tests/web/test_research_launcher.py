"""Run launcher: dry-run estimate, launch through the replay service, progress fragment, cancel and resume."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def lexicon():
    from scoring.models import EvaluatedModel

    return EvaluatedModel.objects.get(name="baseline:lexicon")


def test_estimate_counts_the_protocol_calls_and_costs_nothing_offline(client_, sample_conversations):
    from scoring.models import EvaluationRun

    response = client_.post(
        "/research/runs/estimate/",
        {"models": [lexicon().pk], "modes": ["default", "verbose"], "panas_strategy": "absolute"},
    )
    page = response.content.decode()
    assert 'id="estimate-result"' in page and "$0.0000" in page
    assert EvaluationRun.objects.count() == 0


def test_launch_runs_each_model_and_mode_to_done(client_, sample_conversations, django_capture_on_commit_callbacks):
    from scoring.models import EvaluationRun

    with django_capture_on_commit_callbacks(execute=True):
        response = client_.post(
            "/research/runs/",
            {
                "models": [lexicon().pk],
                "modes": ["default"],
                "panas_strategy": "delta",
                "topic_categories": ["Grief", "Work"],
            },
        )
    assert response.status_code == 302
    run = EvaluationRun.objects.get()
    assert run.status == EvaluationRun.Status.DONE and run.panas_strategy == "delta"
    assert run.conversations_total == run.conversations_done == 4  # two Grief and two Work conversations
    fragment = client_.get(f"/research/runs/{run.pk}/progress/").content.decode()
    assert 'data-percent="100"' in fragment and "hx-trigger" not in fragment
    assert run.conversation_scores.count() == 4


def test_active_run_polls_and_can_be_cancelled_then_resumed(
    client_, sample_conversations, django_capture_on_commit_callbacks
):
    from scoring.models import EvaluationRun

    run = EvaluationRun.objects.create(evaluated_model=lexicon(), mode="default", conversations_total=15)
    fragment = client_.get(f"/research/runs/{run.pk}/progress/").content.decode()
    assert 'hx-trigger="every 1s"' in fragment and 'data-percent="0"' in fragment
    response = client_.post(f"/research/runs/{run.pk}/cancel/", {"next": "https://elsewhere.example/phish"})
    assert response.status_code == 302 and response["Location"] == "/research/runs/"  # never off-site
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.CANCELLED
    with django_capture_on_commit_callbacks(execute=True):
        response = client_.post(f"/research/runs/{run.pk}/resume/", {"next": f"/research/runs/{run.pk}/"})
    assert response["Location"] == f"/research/runs/{run.pk}/"
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and run.progress_percent == 100


def test_human_raters_are_not_offered_to_the_launcher(client_, sample_conversations, rater):
    from research.human_baseline import human_model

    human_model(rater)
    page = client_.get("/research/runs/").content.decode()
    assert "baseline:lexicon" in page and "human:ravi" not in page
