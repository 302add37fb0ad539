"""The platform's own export archives read back with `attune validate` and `attune analyze`."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command

from attunebench import canonical as cf
from attunebench.synth import synth_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("export_dir")]


def test_a_json_export_archive_validates_and_analyses_with_its_datasheet_recognised(
    sample_conversations, researcher, tmp_path
):
    from django.conf import settings

    from datasets.models import ExportJob
    from datasets.versions import do_freeze_dataset_version, run_export_job

    version = do_freeze_dataset_version("roundtrip-v1", user=researcher)
    job = ExportJob.objects.create(dataset_version=version, fmt="json", created_by=researcher)
    run_export_job(job.pk)
    job.refresh_from_db()
    archive = Path(settings.ATTUNE_EXPORT_DIR) / job.file_path
    with zipfile.ZipFile(archive) as bundle:
        assert "datasheet.json" in bundle.namelist()

    out = io.StringIO()
    call_command("validate", str(archive), stdout=out)  # raises CommandError (exit 1) on any problem
    assert "datasheet.json" not in out.getvalue()

    runs = tmp_path / "runs"
    runs.mkdir()
    with zipfile.ZipFile(archive) as bundle:
        for name in bundle.namelist():
            data = cf.decode_json(name, bundle.read(name)) if name.endswith(".json") else None
            if data is None or cf.looks_like_datasheet(data):
                continue
            document = cf.parse_conversation(data, name)
            run = synth_run(document, "synth:a", "default", 3, skill=0.6)
            (runs / f"{document.conversationId}.json").write_text(cf.dumps_canonical(run))
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "analyze", "--conversations", str(archive), "--runs", str(runs), "--bootstrap", "50", stdout=out, stderr=err
    )  # exit 2 (CommandError) if any input, the datasheet included, were skipped
    assert err.getvalue() == "" and "== Compared rows" in out.getvalue()
