"""Comparable leaderboards and skill over baselines on the dashboard and the API.

Runs are built like the shared ``make_scored_run`` fixture (synthetic predictions, scored through the
real scorer) but over chosen conversations and selections, so a test can make a small test run, a topic
subset or a human rater's partial run next to full runs.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def scored_run(
    em_name: str,
    mode: str = "default",
    skill: float = 0.5,
    *,
    categories: list[str] | None = None,
    limit: int | None = None,
    total: int | None = None,
    age_days: int = 0,
):
    """A finished, scored run over the complete conversations (of ``categories``; the first ``limit`` of them).

    ``total`` is what the run meant to cover (defaults to what it scored); ``age_days`` backdates it.
    """
    from django.utils import timezone

    from attunebench import canonical as cf
    from attunebench.synth import synth_run
    from datasets.exchange import iter_canonical
    from datasets.selection import complete_conversations
    from scoring.models import EvaluatedModel, EvaluationRun, RunConversation
    from scoring.run_scoring import do_score_evaluation_run

    if em_name.startswith("baseline:"):
        kind = EvaluatedModel.Kind.OFFLINE
    elif em_name.startswith("human:"):
        kind = EvaluatedModel.Kind.HUMAN
    else:
        kind = EvaluatedModel.Kind.LLM
    model, _ = EvaluatedModel.objects.get_or_create(name=em_name, defaults={"kind": kind})
    conversations = complete_conversations().order_by("conversation_id")
    if categories:
        conversations = conversations.filter(topic__category__in=categories)
    chosen = list(conversations[:limit] if limit else conversations)
    created = timezone.now() - timedelta(days=age_days)
    run = EvaluationRun.objects.create(
        evaluated_model=model,
        mode=mode,
        status=EvaluationRun.Status.DONE,
        selection={"human_baseline": True}
        if kind == EvaluatedModel.Kind.HUMAN
        else {"status": "complete", "topic_categories": categories or []},
        conversations_total=total if total is not None else len(chosen),
        conversations_done=len(chosen),
        created_at=created,
        started_at=created,
        finished_at=created,
        cost_usd=0.01 * len(chosen),
    )
    pks = {c.conversation_id: c.pk for c in chosen}
    for document in iter_canonical(complete_conversations().filter(pk__in=pks.values()), include_model_identity=True):
        output = synth_run(document, em_name, mode, 7, skill=skill)
        RunConversation.objects.create(
            run=run,
            conversation_id=pks[document.conversationId],
            status=RunConversation.Status.DONE,
            output=cf.to_canonical_dict(output),
        )
    do_score_evaluation_run(run.pk)
    return run


def test_a_newer_smaller_run_never_replaces_the_full_run(client_, sample_conversations):
    from research.results.evaluation import evaluation_data, leaderboard_rows

    full = scored_run("synth:a", skill=0.8, age_days=2)
    # Newer, same selection, but it scored 3 of the 15 conversations it meant to: not complete.
    partial = scored_run("synth:a", skill=0.2, limit=3, total=15)
    other = scored_run("synth:b", skill=0.4)
    data = evaluation_data()
    rows = {r.em_model: r for r in leaderboard_rows(data)}
    assert rows["synth:a"].run == full.pk and rows["synth:a"].run_choice == "latest complete"
    assert rows["synth:a"].n_conversations == rows["synth:b"].n_conversations == 15
    assert rows["synth:a"].cost == full.cost_usd  # the row's own run, not the newest one
    assert rows["synth:b"].run == other.pk
    assert partial.pk not in {r.pk for r in data.runs}

    # Pinning the partial run is explicit: it replaces the default and, being on 3 conversations, is shown apart.
    page = client_.get(f"/research/?run={partial.pk}").content.decode()
    assert 'id="apart"' in page and f"#{partial.pk}" in page
    pinned = evaluation_data(pinned=[partial.pk])
    assert [r.em_model for r in leaderboard_rows(pinned)] == ["synth:b"]
    assert pinned.choice[partial.pk] == "pinned"


def test_a_topic_subset_run_forms_its_own_comparison_set(client_, sample_conversations):
    from research.results.evaluation import LIVE, evaluation_data, leaderboard_rows

    scored_run("synth:a", skill=0.8)
    scored_run("synth:b", skill=0.4)
    scored_run("synth:c", skill=0.9, categories=["Family"])
    data = evaluation_data()
    assert data.current_set is not None and data.current_set.key == LIVE
    assert [s.key for s in data.sets] == [LIVE, f"{LIVE}:Family"]
    assert {r.em_model for r in leaderboard_rows(data)} == {"synth:a", "synth:b"}

    family = evaluation_data(set_key=f"{LIVE}:Family")
    (row,) = leaderboard_rows(family)
    assert row.em_model == "synth:c" and row.n_conversations == 2
    assert row.ci_low is None and row.ci_high is None  # 2 conversations: below the minimum n, no interval

    page = client_.get(f"/research/?set={LIVE}:Family").content.decode()
    assert "Compared on 2 conversations" in page and "n &lt; 10" in page
    # An unknown set is said, and the default comparison shown instead of an empty page.
    page = client_.get("/research/?set=v999").content.decode()
    assert "no scored runs on set &#x27;v999&#x27;" in page and "Compared on 15 conversations" in page


def test_api_names_the_set_and_refuses_unknown_sets_and_runs(client_, sample_conversations):
    from research.results.evaluation import LIVE

    scored_run("synth:a", skill=0.8)
    board = client_.get("/api/leaderboard/").json()
    assert board["conversation_set"] == LIVE and board["n_compared_conversations"] == 15
    assert board["min_conversations_for_ci"] == 10 and board["n_bootstrap"] == 2000 and board["seed"] == 0
    assert board["sets"] == [{"key": LIVE, "label": "live conversations (no version) · all topics", "n_rows": 1}]
    # A set or run that does not exist is a 404 saying which; a malformed run list is a 400 naming the parameter.
    bad_set = client_.get("/api/leaderboard/?set=v999")
    assert bad_set.status_code == 404 and "v999" in bad_set.json()["detail"]
    bad_run = client_.get("/api/analyses/?runs=999999")
    assert bad_run.status_code == 404 and "run 999999" in bad_run.json()["detail"]
    malformed = client_.get("/api/leaderboard/?runs=1,x")
    assert malformed.status_code == 400 and "'x'" in malformed.json()["runs"][0]


def test_humans_are_shown_apart_and_paired_on_the_conversations_they_rated(client_, sample_conversations):
    scored_run("baseline:prior", skill=0.3)
    scored_run("synth:a", skill=0.8)
    human = scored_run("human:ravi", skill=0.7, limit=4)
    board = client_.get("/api/leaderboard/").json()
    assert [r["em_model"] for r in board["rows"]] == ["synth:a", "baseline:prior"]
    (apart,) = board["apart"]
    assert apart["em_model"] == "human:ravi" and apart["n_conversations"] == 4 and apart["run"] == human.pk
    assert apart["ci_low"] is None and apart["run_choice"] == "human"
    pairings = {p["model"]: p for p in board["human_pairings"]}
    assert set(pairings) == {"synth:a [default]", "baseline:prior [default]"}
    assert all(p["n_shared"] == 4 and p["p"] is not None for p in pairings.values())
    # Skill on the shared conversations is measured against the prior on those same 4 conversations.
    assert pairings["baseline:prior [default]"]["model_skill"] == 0.0

    page = client_.get("/research/").content.decode()
    assert 'id="human-pairings"' in page and "human:ravi [default]" in page


def test_skill_over_the_prior_leads_the_table_and_mode_agnostic_baselines_count_once(client_, sample_conversations):
    from research.results.evaluation import evaluation_data, leaderboard_rows

    scored_run("baseline:prior", "default", skill=0.3)
    scored_run("baseline:prior", "verbose", skill=0.3)
    scored_run("synth:a", skill=0.8)
    scored_run("synth:b", skill=0.5)
    data = evaluation_data()
    rows = leaderboard_rows(data, sort="skill")
    assert [r.label for r in rows] == ["synth:a [default]", "synth:b [default]", "baseline:prior [default]"]
    prior = rows[-1]
    assert prior.skill is not None and prior.skill.composite_score.estimate == 0.0
    top = rows[0].skill
    assert top is not None and top.composite_score.low is not None
    assert top.composite_score.low <= top.composite_score.estimate <= top.composite_score.high
    # skill = (model − prior) / (100 − prior), from the rows' own composites
    assert top.composite_score.estimate == pytest.approx(
        (rows[0].composite_score - prior.composite_score) / (100 - prior.composite_score)
    )
    assert data.analysis is not None
    assert data.analysis.discrimination.metrics["composite_score"].n_pairs == 3
    assert data.analysis.comparability is not None and data.analysis.comparability.collapsed

    page = client_.get("/research/?sort=skill").content.decode()
    assert 'data-column="skill"' in page and 'data-column="response_quality"' in page
    assert "against baseline:prior [default]" in page and "ignores the mode" in page
    assert "Research use only" in page


def test_the_leaderboard_csv_has_every_column_and_the_rows_apart(client_, sample_conversations):
    import csv
    import io

    scored_run("baseline:prior", skill=0.3)
    scored_run("synth:a", skill=0.8)
    scored_run("human:ravi", skill=0.7, limit=4)
    page = client_.get("/research/").content.decode()
    assert 'id="leaderboard-csv"' in page
    text = client_.get("/research/figures/leaderboard_table.csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    by_model = {r["em_model"]: r for r in rows}
    assert set(by_model) == {"baseline:prior", "synth:a", "human:ravi"}
    a, human = by_model["synth:a"], by_model["human:ravi"]
    assert a["rank"] == "1" and a["compared"] == "True" and a["n_conversations"] == "15"
    assert float(a["skill_ci_low"]) <= float(a["skill"]) <= float(a["skill_ci_high"])
    for column in ("response_quality", "preference_prediction_skill", "cost_usd", "run_choice", "post_coverage"):
        assert a[column] != "", column
    assert a["n_bootstrap"] == "2000" and a["seed"] == "0" and a["prior_baseline"] == "baseline:prior [default]"
    assert human["rank"] == "" and human["compared"] == "False" and human["n_conversations"] == "4"
    assert human["ci_low"] == "" and human["skill"] == ""
