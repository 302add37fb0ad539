"""The dashboard's analyses computed by the task that runs when scores change, so a page load only reads them."""

from __future__ import annotations

import pytest
from django.test import Client

from research.results.evaluation import evaluation_data
from research.results.precompute import warm_dashboard
from scoring.run_scoring import do_score_evaluation_run
from tests.web.conftest import make_scored_run

pytestmark = pytest.mark.django_db


def _analyses_forbidden(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the analyses were computed in the request")

    monkeypatch.setattr("attunebench.metrics.analysis.analyze", refuse)


def test_after_the_task_the_dashboard_and_api_read_precomputed_analyses(sample_conversations, researcher, monkeypatch):
    make_scored_run("synth:strong", skill=0.85)
    run = make_scored_run("synth:weak", skill=0.15)
    do_score_evaluation_run(run.pk)  # a score changed: whatever was cached no longer applies
    assert warm_dashboard() == 2
    _analyses_forbidden(monkeypatch)
    client = Client()
    client.force_login(researcher)
    page = client.get("/research/")
    assert page.status_code == 200 and b"synth:strong" in page.content
    board = client.get("/api/leaderboard/")
    assert board.status_code == 200
    assert {row["em_model"] for row in board.json()["rows"]} == {"synth:strong", "synth:weak"}
    assert evaluation_data().analysis is not None


def test_a_new_score_is_not_served_from_the_precomputed_entry(sample_conversations, monkeypatch):
    make_scored_run("synth:strong", skill=0.85)
    warm_dashboard()
    make_scored_run("synth:weak", skill=0.15)  # scored after the warm-up: its entry is stale
    _analyses_forbidden(monkeypatch)
    with pytest.raises(AssertionError, match="computed in the request"):
        evaluation_data()


def _without_token(content: bytes) -> str:
    import re

    return re.sub(r'(csrfmiddlewaretoken" value=|X-CSRFToken": )"[^"]*"', "", content.decode())


def test_a_cached_page_reads_neither_the_scored_records_nor_the_analyses(sample_conversations, researcher, monkeypatch):
    """A page already rendered for a comparison and view is served from its cached HTML and the small summary."""
    from django.core.cache import cache

    make_scored_run("synth:strong", skill=0.85)
    make_scored_run("synth:weak", skill=0.15)
    warm_dashboard()  # renders the default view too
    client = Client()
    client.force_login(researcher)
    first = client.get("/research/?weighting=equal&sort=label")  # renders and caches this view
    data = evaluation_data()
    summary = cache.get(data.key)
    assert summary["n_records"] == data.n_records > 0 and "report" not in summary  # no scored record in it
    cache.delete(data.key + ":analysis")  # evicted: a page already rendered must not need it
    _analyses_forbidden(monkeypatch)
    again = client.get("/research/?weighting=equal&sort=label")
    assert again.status_code == 200 and _without_token(again.content) == _without_token(first.content)
    default = client.get("/research/")
    assert (
        default.status_code == 200 and b"synth:weak" in default.content and b"fig-comparison_matrix" in default.content
    )
    board = client.get("/api/leaderboard/")  # reads only the summary
    assert {row["em_model"] for row in board.json()["rows"]} == {"synth:strong", "synth:weak"}
