"""attune publish dataset / results, read back as a reader would, imported again, and checked by attune verify.

The reader's side runs in a separate Python environment holding Hugging Face ``datasets``, pandas and
``mlcroissant`` (``make reader-env``): the hub's package is named ``datasets`` like Attune's own app,
so the two cannot share one interpreter, and a reader of the published folder has no Attune anyway.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from attunebench import publication as pub
from tests.web.conftest import make_scored_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("export_dir")]

REPO = Path(__file__).resolve().parents[2]
READER_PYTHON = Path(os.environ.get("ATTUNE_READER_PYTHON", REPO / ".venv-reader" / "bin" / "python"))

#: The hub's size categories and the task categories the card may name (the hub's lists).
SIZE_CATEGORIES = {"n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B"}
TASK_CATEGORIES = {"text-classification", "text-generation", "question-answering", "conversational"}

READER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    import datasets
    import mlcroissant as mlc
    import pandas as pd
    import yaml

    folder = Path(sys.argv[1])
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\\n"), "the card starts with its YAML header"
    header = yaml.safe_load(card.split("---\\n")[1])
    out = {"header": header, "configs": {}}
    for config in header["configs"]:
        loaded = datasets.load_dataset(str(folder), config["config_name"], split="train")
        out["configs"][config["config_name"]] = {"rows": loaded.num_rows, "columns": loaded.column_names}
    out["default_rows"] = datasets.load_dataset(str(folder), split="train").num_rows
    turns = pd.read_parquet(folder / "data" / "turns.parquet")
    joined = turns.merge(pd.read_parquet(folder / "data" / "conversations.parquet"), on="conversation_id")
    out["pandas"] = {"turns": len(turns), "joined": len(joined)}
    croissant = mlc.Dataset(jsonld=folder / "croissant.json")  # raises on any validation error
    out["croissant_issues"] = sorted(croissant.metadata.ctx.issues.warnings | croissant.metadata.ctx.issues.errors)
    out["croissant_record_sets"] = sorted(r.name for r in croissant.metadata.record_sets)
    out["croissant_turns"] = sum(1 for _ in croissant.records("turns"))
    print(json.dumps(out, default=str))
    """
)


def read_as_a_reader(folder: Path, tmp_path: Path) -> dict:
    """Load the folder with datasets, pandas and mlcroissant in the reader's environment, offline."""
    if not READER_PYTHON.exists():
        pytest.skip(f"no reader environment at {READER_PYTHON} (make reader-env, or set ATTUNE_READER_PYTHON)")
    script = tmp_path / "reader.py"
    script.write_text(READER_SCRIPT)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [str(READER_PYTHON), str(script), str(folder)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def publish(*args: str) -> str:
    out = io.StringIO()
    call_command("publish", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def withdrawn_one(sample_conversations):
    """The sample conversations with one participant withdrawn; returns that conversation's id and pseudonym."""
    from collection.models import Conversation
    from collection.study_flow import do_withdraw
    from datasets.pseudonyms import export_pseudonym

    gone = Conversation.objects.select_related("participant").order_by("conversation_id").first()
    pseudonym = export_pseudonym(gone.participant.pseudonym)
    do_withdraw(gone.participant)
    return gone.conversation_id, pseudonym


def test_a_published_dataset_loads_with_datasets_pandas_and_croissant_and_leaves_the_withdrawn_out(
    withdrawn_one, tmp_path
):
    gone_id, gone_pseudonym = withdrawn_one
    run = make_scored_run("synth:strong", skill=0.8)
    folder = tmp_path / "published"
    said = publish("dataset", "--out", str(folder), "--runs", str(run.pk))
    assert "conversations 14" in said

    reader = read_as_a_reader(folder, tmp_path)
    configs = reader["configs"]
    assert set(configs) == {"conversations", "turns", "annotations", "runs", "scores"}
    assert configs["conversations"]["rows"] == reader["default_rows"] == 14
    assert configs["runs"]["rows"] == configs["scores"]["rows"] == 14
    assert configs["turns"]["columns"] == [c.name for c in pub.TURN_COLUMNS]
    assert reader["pandas"]["turns"] == reader["pandas"]["joined"] == configs["turns"]["rows"] > 14
    kinds = set(pq.read_table(folder / "data" / "annotations.parquet").column("kind").to_pylist())
    assert kinds == {"mood_tag", "binary_judgement", "pairwise_choice"}

    # mlcroissant validated the metadata (no error, no warning) and read the turns through it
    assert reader["croissant_issues"] == []
    assert reader["croissant_record_sets"] == sorted(configs)
    assert reader["croissant_turns"] == configs["turns"]["rows"]
    croissant = json.loads((folder / "croissant.json").read_text())
    assert croissant["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    assert {"rai:dataCollection", "rai:personalSensitiveInformation", "rai:dataUseCases"} <= set(croissant)

    # the hub's header: licence with its name and link, language, task and size categories, configs that exist
    header = reader["header"]
    assert header["license"] == "other" and header["license_name"] and (folder / header["license_link"]).is_file()
    assert header["language"] == ["en"]
    assert set(header["task_categories"]) <= TASK_CATEGORIES
    assert set(header["size_categories"]) <= SIZE_CATEGORIES
    for config in header["configs"]:
        assert all((folder / f["path"]).is_file() for f in config["data_files"])
    card = (folder / "README.md").read_text()
    for section in (
        "## Summary",
        "## How it was collected",
        "## Fields",
        "## Intended use",
        "## Limitations",
        "## Personal and sensitive information",
        "## Withdrawal",
        "## Citation",
    ):
        assert section in card
    assert "attune verify" in card

    # the withdrawn participant is in no file at all
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert gone_id.encode() not in data and gone_pseudonym.encode() not in data, path

    # every file's checksum is listed and holds
    listed = dict(reversed(line.split("  ", 1)) for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert set(listed) == {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert all(pub.file_sha256(folder / name) == digest for name, digest in listed.items())


def test_model_identities_are_published_only_when_every_model_is_named(sample_conversations, tmp_path):
    publish("dataset", "--out", str(tmp_path / "aliases"))
    models = set(pq.read_table(tmp_path / "aliases" / "data" / "conversations.parquet").column("model").to_pylist())
    assert models and all(m.startswith("om-") and "provider" not in m for m in models)

    with pytest.raises(CommandError, match="not named"):
        publish("dataset", "--out", str(tmp_path / "one"), "--model-identity", "om-provider-a/chat-large")
    assert not (tmp_path / "one").exists()
    with pytest.raises(CommandError, match="not an original model"):
        publish("dataset", "--out", str(tmp_path / "wrong"), "--model-identity", "gpt-unknown")

    names = ["om-provider-a/chat-large", "om-provider-b/assistant-7b", "om-provider-c/helper-v2"]
    publish("dataset", "--out", str(tmp_path / "named"), "--model-identity", *names)
    table = pq.read_table(tmp_path / "named" / "data" / "conversations.parquet")
    assert set(table.column("model").to_pylist()) == set(names)


def test_publish_refuses_a_folder_that_holds_files_and_an_unknown_version(sample_conversations, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.txt").write_text("x")
    with pytest.raises(CommandError, match="not an empty folder"):
        publish("dataset", "--out", str(tmp_path / "full"))
    with pytest.raises(CommandError, match="--version 9999: no such dataset version"):
        publish("dataset", "--out", str(tmp_path / "new"), "--version", "9999")


def score_json(conversations: Path, runs: Path, out: Path) -> dict:
    call_command(
        "score", "--conversations", str(conversations), "--runs", str(runs), "--json", str(out), stdout=io.StringIO()
    )
    return json.loads(out.read_text())


@pytest.mark.django_db(transaction=True)  # flush needs no open transaction
def test_a_published_folder_imports_into_a_fresh_database_and_scores_as_the_source_did(sample_conversations, tmp_path):
    from research.results.run_download import run_archive

    run = make_scored_run("synth:middling", skill=0.5)
    source, runs_zip = tmp_path / "source", tmp_path / "run.zip"
    call_command("export", "--out", str(source), stdout=io.StringIO())
    runs_zip.write_bytes(run_archive(run))
    on_source = score_json(source, runs_zip, tmp_path / "source.json")
    folder = tmp_path / "published"
    publish("dataset", "--out", str(folder), "--runs", str(run.pk))
    assert score_json(folder, folder, tmp_path / "published.json") == on_source

    call_command("flush", interactive=False, verbosity=0)  # a fresh database
    out = io.StringIO()
    call_command("import", str(folder), stdout=out)
    assert "Imported 15 conversation(s)" in out.getvalue()
    again = tmp_path / "again"
    call_command("export", "--out", str(again), stdout=io.StringIO())
    assert score_json(again, folder, tmp_path / "again.json") == on_source


@pytest.fixture
def published_pair(sample_conversations, tmp_path):
    """A published dataset with two scored runs, and the results site of a new snapshot beside it."""
    runs = [make_scored_run("synth:strong", skill=0.85), make_scored_run("synth:weak", skill=0.2)]
    dataset, results = tmp_path / "dataset", tmp_path / "results"
    publish("dataset", "--out", str(dataset), "--runs", *[str(r.pk) for r in runs])
    said = publish("results", "--out", str(results), "--dataset", str(dataset))
    assert "Published snapshot(s)" in said
    return dataset, results


def verify(dataset: Path, results: Path) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("verify", str(dataset), str(results), stdout=out, stderr=err)
    except CommandError as exc:
        err.write(f"{exc}\n")
    return out.getvalue(), err.getvalue()


def test_attune_verify_passes_on_a_published_pair(published_pair):
    out, err = verify(*published_pair)
    assert err == ""
    assert "OK: every checksum" in out
    assert "30 score record(s) re-scored from 30 run output(s)" in out
    assert "leaderboard of 2 row(s)" in out


def test_attune_verify_names_a_tampered_score_even_with_its_checksum_updated(published_pair):
    dataset, results = published_pair
    scores_path = results / "data" / "scores.json"
    scores = json.loads(scores_path.read_text())
    published = scores["aggregates"][0]["composite_score"]
    scores["aggregates"][0]["composite_score"] = published + 1e-9
    scores_path.write_text(json.dumps(scores, indent=2, sort_keys=True) + "\n")

    _, err = verify(dataset, results)
    assert f"{scores_path}: sha256" in err  # the checksum no longer holds

    sums = results / "SHA256SUMS"
    sums.write_text(
        "".join(
            f"{pub.file_sha256(scores_path)}  data/scores.json\n"
            if line.endswith("  data/scores.json")
            else line + "\n"
            for line in sums.read_text().splitlines()
        )
    )
    _, err = verify(dataset, results)
    assert "sha256" not in err  # every checksum holds now, so only the re-scoring can tell
    assert (
        f"{scores_path}.aggregates[0].composite_score: published {published + 1e-9!r}, recomputed {published!r}"
    ) in err
    assert "1 difference(s)" in err


def test_a_snapshot_page_downloads_the_same_static_site(researcher, sample_conversations, tmp_path):
    import zipfile

    from django.test import Client

    from research.models import ResultSnapshot

    make_scored_run("synth:strong", skill=0.85)
    publish("results", "--out", str(tmp_path / "cli"))
    snapshot = ResultSnapshot.objects.get()
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/research/snapshots/{snapshot.pk}/").content.decode()
    assert f"attune publish results --snapshot {snapshot.pk}" in page
    response = client.get(f"/research/snapshots/{snapshot.pk}.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as bundle:
        files = {name.split("/", 1)[1]: bundle.read(name) for name in bundle.namelist()}
    cli = {str(p.relative_to(tmp_path / "cli")): p.read_bytes() for p in (tmp_path / "cli").rglob("*") if p.is_file()}
    assert set(files) == set(cli) >= {"index.html", f"snapshot-{snapshot.pk}.html", "style.css", "SHA256SUMS"}
    assert files[f"data/snapshot-{snapshot.pk}.json"] == cli[f"data/snapshot-{snapshot.pk}.json"]
    assert files[f"snapshot-{snapshot.pk}.html"] == cli[f"snapshot-{snapshot.pk}.html"]


def test_a_dataset_versions_page_exports_the_published_folder_and_a_withdrawal_regenerates_it(
    researcher, sample_conversations, tmp_path, django_capture_on_commit_callbacks
):
    import zipfile

    from django.test import Client

    from collection.models import Conversation
    from collection.study_flow import do_withdraw
    from datasets.models import ExportJob
    from datasets.versions import do_freeze_dataset_version, export_root

    version = do_freeze_dataset_version("paper-v1", user=researcher)
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/research/datasets/{version.pk}/").content.decode()
    assert "Published dataset folder" in page and f"attune publish dataset --version {version.pk}" in page
    with django_capture_on_commit_callbacks(execute=True):
        refused = client.post(
            f"/research/datasets/{version.pk}/export/", {"fmt": "published", "include_model_identity": "on"}
        )
    assert refused.status_code == 302 and not ExportJob.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/research/datasets/{version.pk}/export/", {"fmt": "published"})
    job = ExportJob.objects.get()
    assert job.status == ExportJob.Status.DONE, job.error
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(export_root() / job.file_path) as bundle:
        bundle.extractall(unpacked)
    folder = unpacked / "paper-v1"
    assert pub.is_publication(folder)
    publish("dataset", "--out", str(tmp_path / "cli"), "--version", str(version.pk))
    for table in ("conversations", "turns", "annotations"):
        assert pq.read_table(folder / pub.data_path(table)).equals(
            pq.read_table(tmp_path / "cli" / pub.data_path(table))
        )

    # A participant withdraws: the published zip is withdrawn and regenerated without them.
    gone = Conversation.objects.select_related("participant").get(conversation_id="conv-grief-01")
    with django_capture_on_commit_callbacks(execute=True):
        do_withdraw(gone.participant)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.WITHDRAWN and job.replaced_by is not None
    replacement = job.replaced_by
    replacement.refresh_from_db()
    assert replacement.fmt == "published" and replacement.status == ExportJob.Status.DONE, replacement.error
    with zipfile.ZipFile(export_root() / replacement.file_path) as bundle:
        assert all(b"conv-grief-01" not in bundle.read(name) for name in bundle.namelist())
