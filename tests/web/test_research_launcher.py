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
    from research.raters.human_baseline import human_model

    human_model(rater)
    page = client_.get("/research/runs/").content.decode()
    assert "baseline:lexicon" in page and "human:ravi" not in page


def test_the_launcher_estimate_is_the_replay_dry_run_plan(sample_conversations, settings):
    # One rule: each run's calls and cost are the core dry run's for the same conversations and config.
    from attunebench.replay.protocol import ReplayConfig, planned_calls
    from attunebench.replay.run import estimate
    from research.runs import launcher
    from scoring import replay_service
    from scoring.models import EvaluatedModel

    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    priced = EvaluatedModel.objects.create(
        name="priced", litellm_model="openai/priced", input_cost_per_million=1.0, output_cost_per_million=4.0
    )
    judge = EvaluatedModel.objects.create(
        name="judge", litellm_model="openai/judge", input_cost_per_million=2.0, output_cost_per_million=2.0
    )
    request = launcher.LaunchRequest(
        models=[lexicon(), priced],
        modes=["default", "verbose"],
        panas_strategy="delta",
        judge=judge,
        dataset_version=None,
    )
    result = launcher.estimate(request)

    documents = list(replay_service.load_canonical(request.conversations().values_list("pk", flat=True)).values())
    judge_spec = replay_service.registry_spec(judge)
    expected_total = 0.0
    for row in result.per_run:
        config = ReplayConfig(mode=row["mode"], panas_strategy="delta", judge=judge_spec)
        model = EvaluatedModel.objects.get(name=row["model"])
        core = estimate(documents, replay_service.registry_spec(model), config)
        assert row["calls"] == core.calls == sum(planned_calls(d, judge=True) for d in documents)
        assert row["cost_usd"] == core.cost_usd
        expected_total += core.cost_usd
    assert result.runs == 4 and len(result.per_run) == 4 and result.conversations == 15
    # The lexicon baseline pays only for the judge; the priced model pays for both, so it costs more.
    by_run = {(r["model"], r["mode"]): r["cost_usd"] for r in result.per_run}
    assert 0 < by_run[("baseline:lexicon", "default")] < by_run[("priced", "default")]
    assert result.cost_usd == pytest.approx(expected_total)
    assert "priced: live models are disabled (ATTUNE_ALLOW_LIVE_MODELS); this run would fail" in result.notes


def test_an_unpriced_model_is_estimated_without_a_cost(sample_conversations):
    from research.runs import launcher
    from scoring.models import EvaluatedModel

    unknown = EvaluatedModel.objects.create(name="nowhere/unknown-model")
    request = launcher.LaunchRequest(
        models=[unknown], modes=["default"], panas_strategy="absolute", judge=None, dataset_version=None
    )
    result = launcher.estimate(request)
    assert result.per_run[0]["cost_usd"] is None and result.per_run[0]["calls"] > 0
    assert result.cost_usd == 0.0
    assert any(note.startswith("nowhere/unknown-model: no price known") for note in result.notes)


def test_deleted_offline_baselines_come_back_with_the_core_notes(db):
    from attunebench.replay.baselines import BASELINE_NAMES, BASELINE_NOTES
    from research.runs import launcher
    from scoring.models import EvaluatedModel

    EvaluatedModel.objects.filter(name__in=BASELINE_NAMES).delete()
    launcher.ensure_offline_baselines()
    rows = EvaluatedModel.objects.filter(name__in=BASELINE_NAMES)
    assert {m.name: m.notes for m in rows} == BASELINE_NOTES
    assert {m.kind for m in rows} == {EvaluatedModel.Kind.OFFLINE}
