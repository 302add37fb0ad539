"""Collection and evaluation dashboards: numbers, sorting, toggles, figures and their CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def test_collection_stats_count_statuses_topics_models_and_timing(sample_conversations):
    from django.utils import timezone

    from collection.models import Conversation, Turn
    from research.studies.collection_stats import collection_stats

    now = timezone.now()
    turns = list(Turn.objects.order_by("pk")[:3])
    for seconds, turn in zip((30, 60, 240), turns, strict=True):
        turn.annotation_started_at, turn.annotation_completed_at = now, now + timedelta(seconds=seconds)
        turn.save()
    withdrawn = Conversation.objects.order_by("conversation_id").first()
    withdrawn.status = Conversation.Status.WITHDRAWN
    withdrawn.save()
    stats = collection_stats()
    assert stats.total == 15
    assert {v: n for v, _, n in stats.by_status} == {
        "in_progress": 0,
        "annotating": 0,
        "complete": 14,
        "withdrawn": 1,
    }
    assert sum(n for _, n, _ in stats.by_category) == 15
    assert sorted(m["conversations"] for m in stats.by_model) == [5, 5, 5]
    assert stats.median_annotation_seconds == 60 and stats.annotation_timings == 3
    assert stats.turns_annotated == stats.turns_total == 65
    assert stats.withdrawn_conversations == 1


def test_leaderboard_sorts_and_toggles_weighting(client_, scored_runs):
    from research.results.evaluation import evaluation_data, leaderboard_rows

    data = evaluation_data()
    spec = leaderboard_rows(data)
    assert [r.em_model for r in spec] == ["synth:strong", "synth:middling", "synth:weak"]
    ascending = leaderboard_rows(data, sort="composite", descending=False)
    assert [r.em_model for r in ascending] == ["synth:weak", "synth:middling", "synth:strong"]
    by_name = leaderboard_rows(data, sort="label", descending=False)
    assert [r.label for r in by_name] == sorted(r.label for r in spec)
    equal = leaderboard_rows(data, weighting="equal")
    for row in spec + equal:
        assert row.ci_low is not None and row.ci_high is not None and row.composite is not None
        assert row.ci_low < row.composite < row.ci_high
    assert {r.em_model: r.composite for r in equal} != {r.em_model: r.composite for r in spec}
    page = client_.get("/research/?weighting=equal").content.decode()
    assert "Equal-weight composite = mean of turn-level" in page and "Research use only" in page


def test_every_figure_downloads_the_data_it_draws(client_, scored_runs):
    from research.results.evaluation import evaluation_data
    from research.results.figures import FIGURES, figure

    data = evaluation_data()
    for name in FIGURES:
        response = client_.get(f"/research/figures/{name}.csv")
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        rows = list(csv.reader(io.StringIO(response.content.decode())))
        assert rows == list(csv.reader(io.StringIO(figure(name, data).csv())))
        assert len(rows) >= 2, name
        chart = figure(name, data)
        if chart.svg:
            assert str(chart.svg).startswith("<svg") and "<text" in str(chart.svg)  # labels drawn, not hover-only
    assert client_.get("/research/figures/nope.csv").status_code == 404


def test_capability_profile_svg_writes_every_value(scored_runs):
    from research.results.evaluation import evaluation_data
    from research.results.figures import figure

    chart = figure("capability_profile", evaluation_data())
    svg = str(chart.svg)
    for row in chart.table[1:]:
        for value in row[1:6]:
            assert f"{value:.2f}" in svg


def test_drilldown_marks_predictions_against_the_participant(client_, scored_runs):
    run = scored_runs[0]
    page = client_.get(f"/research/runs/{run.pk}/conversations/conv-grief-02/").content.decode()
    assert "Turn 1" in page and "Turn 3" in page and "Turn 4" not in page
    assert "✓" in page and "After the conversation" in page


def test_dashboard_explains_when_nothing_is_scored(client_, sample_conversations):
    page = client_.get("/research/").content.decode()
    assert "No scored runs yet" in page


def test_collection_dashboard_marks_offline_demo_models(client_, sample_conversations, participant, settings):
    from collection.models import Conversation, Topic
    from collection.setup import ensure_defaults

    offline = ensure_defaults().models[0]
    Conversation.objects.create(
        conversation_id="collected-1", participant=participant, original_model=offline, topic=Topic.objects.first()
    )
    body = client_.get("/research/collection/").content.decode()
    assert "offline scripted model (demo)" in body
    assert "imported conversations only" in body
    offline.litellm_model = "openai/some-model"
    offline.save()
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    assert "live models are switched off" in client_.get("/research/collection/").content.decode()
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    assert "live: openai/some-model" in client_.get("/research/collection/").content.decode()


def test_dashboard_api_and_cli_text_read_one_analysis_model(client_, scored_runs):
    from attunebench.metrics.analysis_report import format_analysis
    from attunebench.metrics.results import Analysis
    from research.results.evaluation import evaluation_data

    analysis = evaluation_data().analysis
    assert isinstance(analysis, Analysis)
    # the API's JSON is the same model, serialised once and read back without loss
    assert Analysis.model_validate(client_.get("/api/analyses/").json()["analysis"]) == analysis
    # the renderer of `attune analyze` reads the dashboard's model as it reads its own
    text = format_analysis(analysis)
    assert all(f"{label} " in text for label in analysis.rows)
    page = client_.get("/research/").content.decode()
    pooled = analysis.breakdowns.by_participant_group.pooled
    assert analysis.discrimination.test in page and analysis.breakdowns.by_participant_group.test in page
    assert f'<td class="n">{pooled.n_anxiety_depression}</td>' in page


def test_drilldown_agrees_with_the_scorer_on_every_judgement(scored_runs):
    from collection.models import Conversation
    from research.results.drilldown import drilldown

    conversation = Conversation.objects.get(conversation_id="conv-money-01")
    for run in scored_runs:
        context = drilldown(run, conversation)
        for row in context["rows"]:
            marks = {r["j"].question_id: r for r in row["judgement_rows"]}
            if row["turn"].turn_number == 5:
                # B17: observed no, preferred na. The human target is the explicit na, which the
                # scorer skips; the page once fell back to observed and marked it.
                assert marks["B17"]["hp_target"] is None and marks["B17"]["hp_match"] is None
                assert marks["B17"]["om_target"] == "no"
            metrics = row["metrics"]
            if metrics is None:
                continue
            for page_key, variant in (("om_match", "binary_om"), ("hp_match", "binary_human")):
                counts = metrics[variant]
                right = sum(1 for r in marks.values() if r[page_key] is True)
                judged = sum(1 for r in marks.values() if r[page_key] is not None)
                assert (right, judged) == (
                    counts["tp"] + counts["tn"],
                    sum(counts[k] for k in ("tp", "fp", "tn", "fn")),
                )


def test_stored_scores_an_older_scorer_wrote_are_skipped_with_a_message(scored_runs):
    from research.results.evaluation import build_report
    from scoring.models import ConversationScore

    strong = scored_runs[0]
    lacking, mistyped, *_ = ConversationScore.objects.filter(run=strong).order_by("pk")
    lacking.metrics = {k: v for k, v in lacking.metrics.items() if k != "avg_emotion_f1"}
    lacking.save(update_fields=["metrics"])
    mistyped.metrics = {**mistyped.metrics, "coverage": "all of it"}
    mistyped.save(update_fields=["metrics"])
    report, skipped = build_report(scored_runs)
    # 3 runs × 15 conversations, two stored scores unreadable
    assert len(report.conversations) == 3 * 15 - 2
    assert [r.n_conversations for r in report.aggregates if r.em_model == "synth:strong"] == [13]
    assert len(skipped) == 2
    assert any(s.endswith("stored score lacks avg_emotion_f1") for s in skipped)
    assert any("does not read as a record (coverage: Input should be a valid number" in s for s in skipped)


def test_figure_csv_escapes_a_hostile_model_name(client_, sample_conversations):
    from tests.web.conftest import make_scored_run

    hostile = '=HYPERLINK("http://evil.example","click")'
    make_scored_run(hostile, "default", skill=0.5)
    rows = list(csv.reader(io.StringIO(client_.get("/research/figures/leaderboard.csv").content.decode())))
    # The chart labels a row "<model> [<mode>]"; that label is escaped, the numbers beside it are not.
    [row] = [r for r in rows if "HYPERLINK" in r[0]]
    assert row[0] == "'" + hostile + " [default] (n=15)"
    assert not any(cell.startswith(("'", "=")) for cell in row[1:]) and float(row[1]) > 0
