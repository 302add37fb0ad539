"""Bad input stays a 4xx that says what is wrong: nesting, figure names, names that display as others."""

from __future__ import annotations

import pytest
from django.test import Client

from research.api.parsers import MAX_JSON_DEPTH, json_depth

pytestmark = [pytest.mark.django_db]

RIGHT_TO_LEFT_OVERRIDE = "\u202e"
ZERO_WIDTH_SPACE = "\u200b"


@pytest.fixture
def api(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def test_json_depth_counts_brackets_outside_strings():
    assert json_depth(b"[]") == 1
    assert json_depth(b'{"a": [1, {"b": []}]}') == 4  # { [ { [
    assert json_depth(b'{"a": "[[[[{{{{"}') == 1  # brackets inside a string are text
    assert json_depth(b'{"a": "quote \\" [[["}') == 1  # an escaped quote does not end the string
    assert json_depth(b"") == 0


@pytest.mark.parametrize(
    "body", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000], ids=["arrays", "objects"]
)
def test_deeply_nested_json_is_a_400_naming_the_limit(api, body):
    response = api.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert f"at most {MAX_JSON_DEPTH}" in response.json()["detail"]


def test_json_nested_within_the_limit_reaches_the_validation(api):
    body = '{"models": ' + "[" * 10 + "]" * 10 + ', "modes": ["default"]}'
    response = api.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400 and "models" in response.json()


def test_an_unknown_figure_extension_is_a_404(api, scored_runs):
    assert api.get("/research/figures/leaderboard.svg").status_code == 200
    assert api.get("/research/figures/leaderboard.csv").status_code == 200
    for ext in ("exe", "html", "svgz"):
        assert api.get(f"/research/figures/leaderboard.{ext}").status_code == 404, ext


@pytest.mark.parametrize("bad", [f"txt.{RIGHT_TO_LEFT_OVERRIDE}exe", f"run{ZERO_WIDTH_SPACE}1"], ids=["rlo", "zwsp"])
def test_names_that_display_as_another_name_are_refused_everywhere(api, sample_conversations, bad):
    from datasets.models import DatasetVersion
    from datasets.versions import DatasetError, do_freeze_dataset_version
    from research.models import ResultSnapshot
    from scoring.models import EvaluatedModel

    response = api.post("/api/dataset-versions/", {"name": bad}, content_type="application/json")
    assert response.status_code == 400 and "invisible formatting characters" in response.json()["name"][0]
    with pytest.raises(DatasetError, match="invisible formatting character"):
        do_freeze_dataset_version(bad)
    page = api.post("/research/datasets/", {"name": bad, "description": ""}, follow=True)
    assert "invisible formatting character" in page.content.decode()
    registry = api.post("/research/models/", {"name": bad, "kind": "llm", "litellm_model": "openai/x"}, follow=True)
    assert "invisible formatting character" in registry.content.decode()
    assert not DatasetVersion.objects.exists()
    assert not EvaluatedModel.objects.filter(name=bad).exists()
    assert not ResultSnapshot.objects.exists()


def test_a_snapshot_name_that_displays_as_another_is_refused(scored_runs, researcher):
    from research.results.evaluation import evaluation_data
    from research.results.snapshots import SnapshotError, do_freeze_snapshot

    with pytest.raises(SnapshotError, match="U\\+202E"):
        do_freeze_snapshot(f"best{RIGHT_TO_LEFT_OVERRIDE}", "", evaluation_data(None), user=researcher)


def test_an_unterminated_string_is_scanned_once():
    """Quotes without an end are consumed in one pass: the depth check stays linear on hostile bodies."""
    assert json_depth(b'"' + b'\\"' * 200_000) == 0
    assert json_depth(b'"' * 200_000) == 0
    assert json_depth(b'[["abc') == 2


@pytest.mark.parametrize("character", ["\u061c", "\u00ad", "\u2028", "\U000e0041", "\ufe0f"])
def test_every_invisible_format_character_is_refused_in_a_name(character):
    from attunebench.names import name_problem

    assert "invisible formatting character" in (name_problem(f"name{character}x") or "")
