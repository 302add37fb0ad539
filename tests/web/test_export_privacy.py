"""Pseudonyms, consent and model identity on every export path.

Paths: canonical JSON (folder and zip), JSONL, Parquet (``attune export``), an
export job's bundle, and the API list and detail.
"""

from __future__ import annotations

import io
import json
import zipfile

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.test import Client

from collection.models import Consent, Participant, SensitiveProfile
from datasets.exchange import import_paths
from datasets.models import ExportJob
from datasets.pseudonyms import export_pseudonym, is_own_pseudonym
from datasets.tasks import do_request_export
from datasets.versions import do_freeze_dataset_version
from research.api.serializers import ExportRequestSerializer
from research.exports.forms import ExportForm
from tests.documents import conversation_dict

pytestmark = pytest.mark.django_db

EMAIL = "jo.bloggs@example.org"


def _import(tmp_path, cid: str, consent: bool | None = None, participant_id: str = EMAIL) -> None:
    profile = {**conversation_dict()["participant_profile"], "participant_id": participant_id}
    if consent is not None:
        profile["sensitiveDataConsent"] = consent
    source = tmp_path / "in"
    source.mkdir(exist_ok=True)
    (source / f"{cid}.json").write_text(json.dumps(conversation_dict(cid, participant_profile=profile)))
    assert import_paths([source / f"{cid}.json"]).ok


def _every_export(tmp_path, identity: bool = False) -> dict[str, str]:
    """The text of each command-line export format."""
    flags = ["--include-model-identity"] if identity else []
    texts = {}
    for fmt, out in (("json", "out.zip"), ("jsonl", "out.jsonl"), ("parquet", "out.parquet")):
        call_command("export", "--format", fmt, "--out", str(tmp_path / out), *flags, stdout=io.StringIO())
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        texts["json"] = "\n".join(z.read(n).decode() for n in z.namelist())
    texts["jsonl"] = (tmp_path / "out.jsonl").read_text()
    texts["parquet"] = json.dumps(pq.read_table(tmp_path / "out.parquet").to_pylist(), default=str)
    return texts


@pytest.fixture
def api(researcher):
    client = Client()
    client.force_login(researcher)
    return client


def test_an_imported_email_never_leaves_and_never_is_stored(tmp_path, api, export_dir, researcher):
    _import(tmp_path, "c-email")
    pseudonym = export_pseudonym(EMAIL)
    assert not Participant.objects.filter(pseudonym=EMAIL).exists()
    texts = _every_export(tmp_path)
    texts["api-list"] = api.get("/api/conversations/").content.decode()
    texts["api-detail"] = api.get("/api/conversations/c-email/").content.decode()
    version = do_freeze_dataset_version("privacy-v1")
    job = do_request_export(version, "json", researcher)
    from datasets.versions import run_export_job

    run_export_job(job.pk)
    job.refresh_from_db()
    with zipfile.ZipFile(export_dir / job.file_path) as z:
        texts["bundle"] = "\n".join(z.read(n).decode() for n in z.namelist())
    for path, text in texts.items():
        assert EMAIL not in text, path
        assert pseudonym in text, path
    assert json.loads(texts["api-list"])["results"][0]["participant"] == pseudonym


def test_collected_pseudonyms_are_hashed_too_and_the_key_is_per_deployment(participant, settings):
    exported = export_pseudonym(participant.pseudonym)
    assert exported != participant.pseudonym and is_own_pseudonym(exported)
    assert export_pseudonym(exported) == exported  # a pseudonym of ours comes back unchanged (round trip)
    assert export_pseudonym(participant.pseudonym, key="another deployment") != exported
    assert not is_own_pseudonym(exported, key="another deployment")
    settings.ATTUNE_PSEUDONYM_KEY = "another deployment"
    assert export_pseudonym(participant.pseudonym) != exported


def test_the_pseudonym_key_is_a_private_file_beside_the_secret_key(settings):
    from attune_site.datadir import PSEUDONYM_KEY_FILE, SECRET_KEY_FILE

    data_dir = settings.DATA_DIR
    key_file = data_dir / PSEUDONYM_KEY_FILE
    assert key_file.is_file() and (data_dir / SECRET_KEY_FILE).is_file()
    assert key_file.stat().st_mode & 0o077 == 0
    assert key_file.read_text().strip() == settings.ATTUNE_PSEUDONYM_KEY


def test_diagnoses_leave_only_with_recorded_consent(tmp_path, api):
    _import(tmp_path, "c-no-consent")
    _import(tmp_path, "c-consent", consent=True, participant_id="someone-else")
    texts = _every_export(tmp_path)
    documents = {json.loads(line)["conversationId"]: json.loads(line) for line in texts["jsonl"].splitlines()}
    assert documents["c-no-consent"]["participant_profile"]["diagnoses"] is None
    assert "sensitiveDataConsent" not in documents["c-no-consent"]["participant_profile"]
    assert documents["c-consent"]["participant_profile"]["diagnoses"] == ["Anxiety"]
    assert documents["c-consent"]["participant_profile"]["sensitiveDataConsent"] is True
    assert api.get("/api/conversations/c-no-consent/").json()["participant_profile"]["diagnoses"] is None
    assert api.get("/api/conversations/c-consent/").json()["participant_profile"]["diagnoses"] == ["Anxiety"]
    # Imported consent is recorded as such; a diagnosis whose file records no consent is not even stored.
    assert Consent.objects.get(participant__pseudonym=export_pseudonym("someone-else")).version == "imported"
    assert not SensitiveProfile.objects.filter(participant__pseudonym=export_pseudonym(EMAIL)).exists()


def test_the_datasheet_counts_groups_only_under_consent(tmp_path, export_dir, researcher):
    _import(tmp_path, "c-no-consent")
    _import(tmp_path, "c-consent", consent=True, participant_id="someone-else")
    version = do_freeze_dataset_version("privacy-v2")
    job = do_request_export(version, "jsonl", researcher)
    from datasets.versions import run_export_job

    run_export_job(job.pk)
    job.refresh_from_db()
    with zipfile.ZipFile(export_dir / job.file_path) as z:
        sheet = json.loads(z.read("datasheet.json"))
        markdown = z.read("DATASHEET.md").decode()
    assert sheet["participant_group_distribution"] == {"anxiety_depression": 1, "unknown": 1}
    assert sheet["include_model_identity"] is False and "aliases only" in markdown
    assert "keyed hash" in markdown and "consent to sensitive data is recorded" in markdown


def test_model_identity_is_out_by_default_on_every_path(tmp_path, api, researcher, export_dir):
    _import(tmp_path, "c-model")
    real = "acme/chat-large"
    for path, text in _every_export(tmp_path).items():
        assert real not in text, path
    for path, text in _every_export(tmp_path, identity=True).items():
        assert real in text, path
    assert real not in api.get("/api/conversations/c-model/").content.decode()
    assert real not in api.get("/api/conversations/").content.decode()
    assert api.get("/api/conversations/c-model/?include_model_identity=true").json()["metadata"]["model"] == real
    assert api.get("/api/conversations/?include_model_identity=true").json()["results"][0]["original_model"] == real
    bad = api.get("/api/conversations/?include_model_identity=maybe")
    assert bad.status_code == 400 and "include_model_identity" in bad.json()
    # Export jobs: the API, the form and the model all default to aliases, and the list says which.
    assert ExportRequestSerializer(data={"fmt": "json"}).is_valid()
    payload = ExportRequestSerializer(data={"fmt": "json"})
    payload.is_valid()
    assert payload.validated_data["include_model_identity"] is False
    assert ExportForm().fields["include_model_identity"].initial is False
    version = do_freeze_dataset_version("identity-v1")
    response = api.post(
        f"/api/dataset-versions/{version.pk}/exports/", {"fmt": "jsonl"}, content_type="application/json"
    )
    assert response.status_code == 202 and response.json()["include_model_identity"] is False
    job = ExportJob.objects.get(pk=response.json()["id"])
    from datasets.versions import run_export_job

    run_export_job(job.pk)
    page = api.get(f"/research/datasets/{version.pk}/").content.decode()
    assert "model aliases" in page
