"""One consent rule for every number (SPEC 2.5): a diagnosis is stored, analysed and exported only under consent.

An import stores diagnoses only when consent is recorded in the file or attested by the importer; the
attestation is kept with the import and shown in the datasheet; the dashboard's subgroup analysis is the
one ``attune analyze`` computes from an export of the same data.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from attunebench.metrics.results import Analysis, to_json
from collection.models import Consent, Participant, SensitiveProfile
from datasets.models import ImportRecord
from datasets.pseudonyms import export_pseudonym
from datasets.versions import build_datasheet, do_freeze_dataset_version
from research.results.evaluation import evaluation_data
from research.results.run_download import run_archive
from tests.documents import conversation_dict
from tests.web.conftest import make_scored_run

pytestmark = pytest.mark.django_db

SAMPLE = Path(settings.ATTUNE_SAMPLE_DATA_DIR)


def _import(*args: str) -> str:
    out = io.StringIO()
    call_command("import", *args, stdout=out)
    return out.getvalue()


def test_an_import_without_attestation_stores_no_diagnosis_and_says_so():
    output = _import(str(SAMPLE))
    assert SensitiveProfile.objects.count() == 0
    assert not Consent.objects.exists()
    record = ImportRecord.objects.get()
    assert (record.conversations, record.diagnoses_stored, record.sensitive_consent_attested) == (15, 0, False)
    # 15 files carry diagnoses, from 15 participants
    assert record.diagnoses_not_stored == 15
    assert "Diagnoses of 15 participant(s) were NOT stored" in output
    assert "--attest-sensitive-consent" in output


def test_an_attested_import_stores_diagnoses_and_the_datasheet_says_so(researcher):
    output = _import(str(SAMPLE), "--attest-sensitive-consent", "--consent-note", "ethics approval ABC-1")
    record = ImportRecord.objects.get()
    assert record.sensitive_consent_attested and record.consent_note == "ethics approval ABC-1"
    assert SensitiveProfile.objects.count() == record.diagnoses_stored == 15
    assert set(Consent.objects.values_list("version", flat=True)) == {f"import-attested-{record.pk}"}
    assert "Diagnoses stored for 15 participant(s)" in output
    sheet = build_datasheet(do_freeze_dataset_version("attested-v1", user=researcher), "json", False)
    sensitive = sheet.data["sensitive_data_consent"]
    # Only 'Anxiety'/'Depression'/'None'-style answers form groups, but every consented diagnosis is exported.
    assert sensitive["by_source"]["attested_at_import"] == sensitive["participants_with_diagnoses"] > 0
    assert sensitive["attested_imports"][0]["import"] == record.pk
    markdown = sheet.as_markdown()
    assert "attested by the importer (attune import --attest-sensitive-consent)" in markdown
    assert f"Import {record.pk} (" in markdown and "ethics approval ABC-1" in markdown


def test_a_file_that_refuses_consent_is_obeyed_even_when_the_importer_attests(tmp_path):
    refused = conversation_dict("refused")
    refused["participant_profile"] = {**refused["participant_profile"], "sensitiveDataConsent": False}
    consented = conversation_dict("consented")
    consented["participant_profile"] = {
        **consented["participant_profile"],
        "participant_id": "p-yes",
        "sensitiveDataConsent": True,
    }
    for doc in (refused, consented):
        (tmp_path / f"{doc['conversationId']}.json").write_text(json.dumps(doc))
    _import(str(tmp_path), "--attest-sensitive-consent")
    stored = set(SensitiveProfile.objects.values_list("participant__pseudonym", flat=True))
    assert stored == {export_pseudonym("p-yes")}
    # the file's own consent record is kept as such, not as the importer's attestation
    assert Consent.objects.get().version == "imported"


def test_a_consent_note_needs_the_attestation():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--consent-note describes an attestation"):
        _import(str(SAMPLE), "--consent-note", "trust me")
    assert not Participant.objects.exists()


def test_the_dashboard_ignores_a_diagnosis_stored_without_consent():
    _import(str(SAMPLE))
    # A diagnosis in the database with no consent recorded (stored by an older release, say) is not used.
    for participant in Participant.objects.all():
        SensitiveProfile.objects.create(participant=participant, diagnoses=["Anxiety"])
    make_scored_run("model-a", skill=0.4)
    groups = evaluation_data().analysis.breakdowns.by_participant_group
    assert (groups.pooled.n_anxiety_depression, groups.pooled.n_none) == (0, 0)
    assert groups.pooled.note == "a group has no conversations"


def _analysis_from_export(tmp_path: Path, runs) -> Analysis:
    """`attune export` of the conversations plus each run's download, read back by `attune analyze --json`."""
    call_command("export", "--format", "json", "--out", str(tmp_path / "export"), stdout=io.StringIO())
    run_dir = tmp_path / "runs"
    for run in runs:
        with zipfile.ZipFile(io.BytesIO(run_archive(run))) as bundle:
            bundle.extractall(run_dir / str(run.pk))
    out = tmp_path / "analysis.json"
    call_command(
        "analyze",
        "--conversations",
        str(tmp_path / "export"),
        "--runs",
        str(run_dir),
        "--json",
        str(out),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    return Analysis.model_validate_json(out.read_text())


def test_the_subgroup_table_reproduces_from_the_export(tmp_path, researcher):
    # The demo's own choice: the synthetic sample data with consent attested.
    copy = tmp_path / "sample"
    shutil.copytree(SAMPLE, copy)
    _import(str(copy), "--attest-sensitive-consent")
    runs = [
        make_scored_run("model-a", skill=0.3, seed=1),
        make_scored_run("model-b", skill=0.7, seed=2),
        make_scored_run("baseline:prior", skill=0.1, seed=3),
    ]
    dashboard = evaluation_data().analysis
    exported = _analysis_from_export(tmp_path / "out", runs)
    ours, theirs = dashboard.breakdowns, exported.breakdowns
    assert ours.pooled_rows == theirs.pooled_rows == ["model-a [default]", "model-b [default]"]
    assert ours.by_participant_group.pooled.n_anxiety_depression > 0 and ours.by_participant_group.pooled.n_none > 0
    assert to_json(ours.by_participant_group) == to_json(theirs.by_participant_group)
    assert to_json(ours.by_category) == to_json(theirs.by_category)
    # and the API serves the dashboard's table
    from django.test import Client

    client = Client()
    client.force_login(researcher)
    api = client.get("/api/analyses/").json()["analysis"]["breakdowns"]["by_participant_group"]
    assert api == to_json(ours.by_participant_group)
