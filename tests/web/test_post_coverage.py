"""Post-conversation coverage is stored, shown and served next to turn coverage.

A run whose post-conversation call failed for every conversation answers every
turn (turn coverage 100%) while its holistic score comes from the scorer's
defaults. These tests check that the database, the dashboard, the run page, the
API and the ``eval`` summary all say so.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from attunebench.metrics.aggregate import aggregate_rows
from attunebench.metrics.keys import METRIC_KEYS
from attunebench.metrics.results import ConversationRecord, ScoringReport
from scoring.management.commands.eval import post_coverage_summary
from scoring.models import ConversationScore, RunConversation, RunScore
from scoring.run_scoring import do_score_evaluation_run
from tests.web.conftest import make_scored_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_dashboard_cache():
    """The dashboard caches its report by score ids; these tests rewrite scores in place."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def silent_after_the_chat(run) -> None:
    """The run's outputs as a provider that never answered the post-conversation call leaves them."""
    for output in RunConversation.objects.filter(run=run):
        output.output = {k: v for k, v in output.output.items() if k != "post_conversation"}
        output.save(update_fields=["output"])
    do_score_evaluation_run(run.pk)


def mark_as_scorer_would(run, post_coverage: float, imputed: bool) -> None:
    """Store what the scorer reports for a run with (or without) post-conversation answers."""
    for score in ConversationScore.objects.filter(run=run):
        score.post_coverage = post_coverage
        score.metrics = {**score.metrics, "post_coverage": post_coverage, "holistic_imputed": imputed}
        score.save(update_fields=["post_coverage", "metrics"])
    aggregate = RunScore.objects.get(run=run)
    aggregate.metrics = {**aggregate.metrics, "post_coverage": post_coverage}
    aggregate.save(update_fields=["metrics"])


def leaderboard_row(html: str, model: str) -> str:
    start = html.index(f'data-model="{model}"')
    return html[start : html.index("</tr>", start)]


# ---------------------------------------------------------------------------
# The real scoring path (needs the core's record fields)
# ---------------------------------------------------------------------------


def test_a_run_without_post_answers_reports_zero_post_coverage_everywhere(client_, sample_conversations):
    answered = make_scored_run("synth:answers", skill=0.6)
    silent = make_scored_run("synth:silent", skill=0.6)
    silent_after_the_chat(silent)

    silent_scores = ConversationScore.objects.filter(run=silent)
    assert silent_scores.count() == 15
    assert {s.coverage for s in silent_scores} == {1.0}  # every turn was answered...
    assert {s.post_coverage for s in silent_scores} == {0.0}  # ...but no post-conversation prediction
    assert all(s.metrics["holistic_imputed"] for s in silent_scores)
    assert {s.post_coverage for s in ConversationScore.objects.filter(run=answered)} == {1.0}
    assert not any(s.metrics["holistic_imputed"] for s in ConversationScore.objects.filter(run=answered))

    html = client_.get("/research/").content.decode()
    assert ">0%<" in leaderboard_row(html, "synth:silent") and "imputed 15/15" in leaderboard_row(html, "synth:silent")
    assert ">100%<" in leaderboard_row(html, "synth:answers") and "imputed" not in leaderboard_row(
        html, "synth:answers"
    )

    board = {r["em_model"]: r for r in client_.get("/api/leaderboard/").json()["rows"]}
    assert board["synth:silent"]["post_coverage"] == 0.0 and board["synth:silent"]["holistic_imputed"] == 15
    assert board["synth:answers"]["post_coverage"] == 1.0 and board["synth:answers"]["holistic_imputed"] == 0
    scores = client_.get(f"/api/runs/{silent.pk}/scores/?limit=20").json()["results"]
    assert {(s["coverage"], s["post_coverage"], s["holistic_imputed"]) for s in scores} == {(1.0, 0.0, True)}
    runs = {r["evaluated_model"]: r for r in client_.get("/api/runs/").json()["results"]}
    assert (runs["synth:silent"]["coverage"], runs["synth:silent"]["post_coverage"]) == (1.0, 0.0)
    run_page = client_.get(f"/research/runs/{silent.pk}/").content.decode()
    assert 'post-conversation coverage <strong class="post-coverage">0%</strong>' in run_page
    assert run_page.count('class="badge bad imputed"') == 15


# ---------------------------------------------------------------------------
# Display of what the scorer stored
# ---------------------------------------------------------------------------


def test_dashboard_shows_post_coverage_and_marks_imputed_holistic_scores(client_, sample_conversations):
    answered = make_scored_run("synth:answers", skill=0.6)
    silent = make_scored_run("synth:silent", skill=0.6)
    mark_as_scorer_would(answered, 1.0, imputed=False)
    mark_as_scorer_would(silent, 0.0, imputed=True)

    html = client_.get("/research/").content.decode()
    assert "Post cov." in html and "rests, in k of n conversations, on the scorer's defaults" in html
    silent_row = leaderboard_row(html, "synth:silent")
    assert '<td class="n post-coverage">0%</td>' in silent_row
    assert "imputed 15/15" in silent_row and "no usable post-conversation answer" in silent_row
    answered_row = leaderboard_row(html, "synth:answers")
    assert '<td class="n post-coverage">100%</td>' in answered_row and "imputed" not in answered_row

    run_page = client_.get(f"/research/runs/{silent.pk}/").content.decode()
    assert 'post-conversation coverage <strong class="post-coverage">0%</strong>' in run_page
    assert run_page.count('<td class="n">0%</td>') == 15 and run_page.count('class="badge bad imputed"') == 15
    drill = client_.get(f"/research/runs/{silent.pk}/conversations/conv-grief-02/").content.decode()
    assert "Post-conversation coverage" in drill and ">imputed</span>" in drill

    board = {r["em_model"]: r for r in client_.get("/api/leaderboard/").json()["rows"]}
    assert (board["synth:silent"]["post_coverage"], board["synth:silent"]["holistic_imputed"]) == (0.0, 15)
    assert (board["synth:answers"]["post_coverage"], board["synth:answers"]["holistic_imputed"]) == (1.0, 0)
    scores = client_.get(f"/api/runs/{silent.pk}/scores/?limit=20").json()["results"]
    assert {(s["post_coverage"], s["holistic_imputed"]) for s in scores} == {(0.0, True)}
    runs = {r["evaluated_model"]: r for r in client_.get("/api/runs/").json()["results"]}
    assert (runs["synth:silent"]["coverage"], runs["synth:silent"]["post_coverage"]) == (1.0, 0.0)
    assert runs["synth:answers"]["post_coverage"] == 1.0


def test_a_mixed_run_averages_post_coverage_over_conversations(client_, sample_conversations):
    run = make_scored_run("synth:flaky", skill=0.6)
    mark_as_scorer_would(run, 1.0, imputed=False)
    silent = list(ConversationScore.objects.filter(run=run).order_by("pk")[:6])
    for score in silent:
        score.post_coverage = 0.0
        score.metrics = {**score.metrics, "post_coverage": 0.0, "holistic_imputed": True}
        score.save(update_fields=["post_coverage", "metrics"])
    row = client_.get("/api/leaderboard/").json()["rows"][0]
    assert row["post_coverage"] == pytest.approx(0.6)  # 9 of 15 conversations answered: 9/15
    assert row["holistic_imputed"] == 6
    assert '<td class="n post-coverage">60%</td>' in client_.get("/research/").content.decode()


def test_scores_stored_before_post_coverage_show_unknown_not_full_coverage(client_, sample_conversations):
    run = make_scored_run("synth:old", skill=0.6)
    for score in ConversationScore.objects.filter(run=run):
        score.post_coverage = None
        score.metrics = {k: v for k, v in score.metrics.items() if k not in ("post_coverage", "holistic_imputed")}
        score.save(update_fields=["post_coverage", "metrics"])
    row = client_.get("/api/leaderboard/").json()["rows"][0]
    assert row["em_model"] == "synth:old" and row["n_conversations"] == 15  # still on the board, not skipped
    assert row["post_coverage"] is None and row["holistic_imputed"] == 0
    assert '<td class="n post-coverage">–</td>' in client_.get("/research/").content.decode()
    scores = client_.get(f"/api/runs/{run.pk}/scores/?limit=1").json()["results"]
    assert scores[0]["post_coverage"] is None and scores[0]["holistic_imputed"] is None


def test_the_database_refuses_post_coverage_outside_zero_to_one(sample_conversations):
    run = make_scored_run("synth:x", skill=0.6)
    score = ConversationScore.objects.filter(run=run).first()
    for bad in (1.5, -0.1):
        score.post_coverage = bad
        with pytest.raises(IntegrityError), transaction.atomic():
            score.save(update_fields=["post_coverage"])


def test_the_schema_documents_post_coverage_fields():
    from drf_spectacular.generators import SchemaGenerator

    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    run = components["Run"]["properties"]
    assert run["post_coverage"]["nullable"] and run["post_coverage"]["type"] == "number"
    score = components["ConversationScore"]["properties"]
    assert score["post_coverage"]["nullable"] and score["holistic_imputed"]["type"] == "boolean"
    row = components["LeaderboardRow"]["properties"]
    assert row["post_coverage"]["type"] == "number" and row["holistic_imputed"]["type"] == "integer"


# ---------------------------------------------------------------------------
# The eval command's summary
# ---------------------------------------------------------------------------


def _report(*records: tuple[str, str, float | None, bool | None]) -> ScoringReport:
    """A report of (em_model, mode, post_coverage, holistic_imputed) records, every metric 0."""
    typed = [
        ConversationRecord.model_validate(
            {
                **dict.fromkeys(METRIC_KEYS, 0.0),
                "q3_model_fit_ordinal_distance": 0,
                "conversationId": f"c{i}",
                "em_model": em_model,
                "mode": mode,
                "coverage": 1.0,
                "post_coverage": post,
                "holistic_imputed": imputed,
                "turns": [],
            }
        )
        for i, (em_model, mode, post, imputed) in enumerate(records)
    ]
    return ScoringReport(conversations=typed, aggregates=aggregate_rows(typed))


def test_eval_summary_prints_post_coverage_and_imputed_counts():
    report = _report(
        ("em/a", "default", 0.0, True),
        ("em/a", "default", 0.0, True),
        ("em/b", "verbose", 1.0, False),
        ("em/b", "verbose", 0.0, True),
        ("em/b", "verbose", 1.0, False),
    )
    lines = post_coverage_summary(report).splitlines()
    assert lines[1] == "  em/a default: 0%; holistic imputed in 2 of 2 conversations"
    assert lines[2] == "  em/b verbose: 67%; holistic imputed in 1 of 3 conversations"  # 2/3 -> 67%


def test_eval_summary_says_when_the_scorer_did_not_report_post_coverage():
    report = _report(("em/a", "default", None, None))  # stored by a scorer from before post coverage
    assert post_coverage_summary(report).splitlines()[1] == (
        "  em/a default: not reported; holistic imputed in 0 of 1 conversations"
    )


def test_eval_summary_from_the_scorer_for_runs_without_post_answers(sample_conversations):
    from attunebench import canonical as cf
    from attunebench.metrics.engine import score_runs
    from attunebench.synth import synth_run
    from datasets.exchange import iter_canonical
    from datasets.selection import complete_conversations

    first_three = list(complete_conversations().order_by("conversation_id").values_list("pk", flat=True)[:3])
    documents = list(iter_canonical(complete_conversations().filter(pk__in=first_three), include_model_identity=True))
    runs = []
    for document in documents:
        data = cf.to_canonical_dict(synth_run(document, "em/silent", "default", 1, skill=0.5))
        data.pop("post_conversation")
        runs.append(cf.parse_run(data))
    summary = post_coverage_summary(score_runs(documents, runs).report())
    assert "em/silent default: 0%; holistic imputed in 3 of 3 conversations" in summary
