"""Frozen result snapshots: named, immutable, citable by id and hash, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.test import Client

from tests.web.test_comparable_leaderboard import scored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def test_a_snapshot_freezes_the_dashboard_comparison_with_its_manifest(client_, sample_conversations):
    from research.models import ResultSnapshot

    scored_run("baseline:prior", skill=0.3)
    first = scored_run("synth:a", skill=0.8)
    scored_run("human:ravi", skill=0.7, limit=4)
    response = client_.post(
        "/research/snapshots/", {"name": "paper-table-2", "description": "Table 2", "set": "live", "weighting": "spec"}
    )
    snapshot = ResultSnapshot.objects.get(name="paper-table-2")
    assert response.status_code == 302 and response["Location"] == f"/research/snapshots/{snapshot.pk}/"
    manifest = snapshot.manifest
    assert manifest["conversation_set"] == "live" and len(manifest["compared_conversations"]) == 15
    assert manifest["bootstrap"] == {"n_resamples": 2000, "seed": 0, "resampling": "conversations, paired across rows"}
    assert manifest["code_version"] and manifest["prior_baseline"] == "baseline:prior [default]"
    runs = {r["model"]: r for r in manifest["runs"]}
    assert runs["synth:a"]["id"] == first.pk and runs["synth:a"]["chosen"] == "latest complete"
    assert set(runs["synth:a"]) >= {"params", "seed", "prompt_version", "panas_strategy", "judge", "mode"}
    assert [r["em_model"] for r in snapshot.leaderboard["rows"]] == ["synth:a", "baseline:prior"]
    assert [r["em_model"] for r in snapshot.leaderboard["apart"]] == ["human:ravi"]

    # Later runs change the dashboard, never the snapshot.
    scored_run("synth:b", skill=0.95)
    page = client_.get(f"/research/snapshots/{snapshot.pk}/").content.decode()
    assert "synth:b" not in page and "synth:a" in page and snapshot.content_sha256 in page
    assert "Research use only" in page
    with pytest.raises(ValueError, match="frozen"):
        snapshot.save()

    document = json.loads(client_.get(f"/research/snapshots/{snapshot.pk}.json").content)
    assert document["id"] == snapshot.pk and document["content_sha256"] == snapshot.content_sha256
    assert document["analysis"]["rows"] == ["baseline:prior [default]", "synth:a [default]"]
    rows = list(csv.DictReader(io.StringIO(client_.get(f"/research/snapshots/{snapshot.pk}.csv").content.decode())))
    assert [r["em_model"] for r in rows] == ["synth:a", "baseline:prior", "human:ravi"]
    assert client_.get(f"/research/snapshots/{snapshot.pk}.xml").status_code == 404

    listing = client_.get("/research/snapshots/").content.decode()
    assert "paper-table-2" in listing


def test_snapshot_names_are_unique_and_required(client_, sample_conversations):
    from research.models import ResultSnapshot

    scored_run("synth:a", skill=0.8)
    client_.post("/research/snapshots/", {"name": "once"})
    again = client_.post("/research/snapshots/", {"name": "once"}, follow=True).content.decode()
    assert "exists already" in again and ResultSnapshot.objects.count() == 1
    blank = client_.post("/research/snapshots/", {"name": "  "}, follow=True).content.decode()
    assert "Give the snapshot a name" in blank
    control = client_.post("/research/snapshots/", {"name": "a\x1bb"}, follow=True).content.decode()
    assert "control character" in control and ResultSnapshot.objects.count() == 1


def test_snapshots_through_the_api(client_, sample_conversations):
    scored_run("synth:a", skill=0.8)
    made = client_.post("/api/snapshots/", {"name": "api-snap"}, content_type="application/json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["name"] == "api-snap" and body["leaderboard"]["rows"][0]["em_model"] == "synth:a"
    listed = client_.get("/api/snapshots/").json()
    assert listed["count"] == 1 and "leaderboard" not in listed["results"][0]
    assert client_.get(f"/api/snapshots/{body['id']}/").json()["content_sha256"] == body["content_sha256"]
    taken = client_.post("/api/snapshots/", {"name": "api-snap"}, content_type="application/json")
    assert taken.status_code == 409 and "exists already" in taken.json()["detail"]
    bad = client_.post("/api/snapshots/", {"name": "x", "set": "v999"}, content_type="application/json")
    assert bad.status_code == 404 and "v999" in bad.json()["detail"]
    assert (
        client_.put(f"/api/snapshots/{body['id']}/", {"name": "y"}, content_type="application/json").status_code == 405
    )
    assert client_.delete(f"/api/snapshots/{body['id']}/").status_code == 405


def test_a_run_downloads_as_its_canonical_outputs_and_manifest_that_the_cli_reads(
    client_, sample_conversations, tmp_path
):
    import zipfile

    from django.core.management import call_command

    run = scored_run("synth:a", skill=0.8)
    page = client_.get(f"/research/runs/{run.pk}/").content.decode()
    assert 'id="run-download"' in page
    archive = client_.get(f"/research/runs/{run.pk}/download.zip")
    assert archive["Content-Type"] == "application/zip"
    assert client_.get(f"/api/runs/{run.pk}/download/").content == archive.content  # one archive, byte-stable
    path = tmp_path / "run.zip"
    path.write_bytes(archive.content)
    with zipfile.ZipFile(path) as bundle:
        names = bundle.namelist()
        manifest = json.loads(bundle.read("manifest.json"))
    assert len([n for n in names if n.startswith("runs/")]) == 15
    assert manifest["run"] == run.pk and manifest["model"] == "synth:a" and manifest["mode"] == "default"
    assert len(manifest["conversations"]) == 15 and manifest["code_version"]
    assert {"params", "seed", "prompt_version", "panas_strategy", "judge", "dataset_version"} <= set(manifest)
    # The outputs are canonical run files: the CLI scores them against the exported conversations.
    from attunebench import canonical as cf
    from datasets.exchange import iter_canonical
    from datasets.selection import complete_conversations

    conversations = tmp_path / "conversations"
    conversations.mkdir()
    for document in iter_canonical(complete_conversations(), include_model_identity=True):
        (conversations / f"{document.conversationId}.json").write_text(cf.dumps_canonical(document))
    out = io.StringIO()
    call_command("score", "--conversations", str(conversations), "--runs", str(path), stdout=out)
    assert "synth:a" in out.getvalue() and "Scored 15 runs" in out.getvalue()


def test_a_run_downloads_manifest_accounts_for_every_call(client_, sample_conversations):
    """Calls recovered after a crash were paid for: the manifest names them beside made, cached and failed."""
    import zipfile

    from scoring.models import EvaluationRun

    run = scored_run("synth:a", skill=0.8)
    EvaluationRun.objects.filter(pk=run.pk).update(
        calls_made=40, calls_recovered=7, calls_reused=3, calls_cached=5, calls_failed=2
    )
    archive = client_.get(f"/research/runs/{run.pk}/download.zip")
    with zipfile.ZipFile(io.BytesIO(archive.content)) as bundle:
        manifest = json.loads(bundle.read("manifest.json"))
    calls = {k: manifest[k] for k in ("calls_made", "calls_recovered", "calls_reused", "calls_cached", "calls_failed")}
    assert calls == {"calls_made": 40, "calls_recovered": 7, "calls_reused": 3, "calls_cached": 5, "calls_failed": 2}
