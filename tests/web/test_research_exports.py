"""Dataset versions and background exports, including 2,000 generated conversations."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from django.test import Client

from attunebench import canonical as cf
from attunebench import catalogue as cat

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("export_dir")]


def test_freezing_hashes_the_canonical_json_in_id_order(sample_conversations, researcher):
    from collection.models import Conversation
    from datasets.exchange import iter_canonical
    from datasets.versions import do_freeze_dataset_version

    version = do_freeze_dataset_version("v1", "all sample", user=researcher)
    assert version.frozen and version.conversation_count == 15
    for identity, recorded in ((False, version.content_hash), (True, version.content_hash_with_model_identity)):
        expected = hashlib.sha256()
        for document in iter_canonical(Conversation.objects.all(), include_model_identity=identity):
            expected.update(cf.dumps_canonical(document).encode())
        assert recorded == expected.hexdigest()
    assert version.content_hash != version.content_hash_with_model_identity
    grief = do_freeze_dataset_version("grief", topic_categories=["Grief"], user=researcher)
    assert grief.conversation_count == 2 and grief.content_hash != version.content_hash


def _exported_bundle(version, fmt: str, include_model_identity: bool, capture) -> zipfile.ZipFile:
    """Run one export job of ``version`` as a worker would and open its zip."""
    from datasets.models import ExportJob
    from datasets.tasks import do_request_export
    from datasets.versions import export_root

    with capture(execute=True):
        job = do_request_export(version, fmt, include_model_identity=include_model_identity)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE, job.error
    return zipfile.ZipFile(export_root() / job.file_path)


def _recomputed(canonical_texts) -> str:
    """The datasheet's rule: sha256 over each conversation's canonical JSON, in conversationId order."""
    digest = hashlib.sha256()
    for _, text in sorted(canonical_texts):
        digest.update(text.encode("utf-8"))
    return digest.hexdigest()


def test_the_content_hash_is_recomputed_from_a_default_export_as_the_datasheet_says(
    sample_conversations, researcher, django_capture_on_commit_callbacks
):
    import pyarrow.parquet as pq

    from datasets.versions import do_freeze_dataset_version

    version = do_freeze_dataset_version("v1", user=researcher)
    capture = django_capture_on_commit_callbacks

    with _exported_bundle(version, "json", False, capture) as bundle:
        sheet = json.loads(bundle.read("datasheet.json"))
        markdown = bundle.read("DATASHEET.md").decode()
        texts = [
            (json.loads(bundle.read(n))["conversationId"], bundle.read(n).decode("utf-8"))
            for n in bundle.namelist()
            if n.endswith(".json") and n != "datasheet.json"
        ]
    assert len(texts) == 15
    assert _recomputed(texts) == version.content_hash == sheet["content_hash"]
    assert f"`{version.content_hash}`" in markdown and "conversationId order" in markdown
    # An alias export says nothing that would let a reader test guesses of the real model names.
    assert version.content_hash_with_model_identity not in json.dumps(sheet) + markdown

    with _exported_bundle(version, "jsonl", False, capture) as bundle:
        lines = bundle.read("conversations.jsonl").decode("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    canonical = [
        (r["conversationId"], json.dumps(r, ensure_ascii=False, indent=2, sort_keys=True) + "\n") for r in records
    ]
    assert _recomputed(canonical) == version.content_hash

    with _exported_bundle(version, "parquet", False, capture) as bundle:
        metadata = pq.read_metadata(io.BytesIO(bundle.read("turns.parquet"))).metadata
    assert metadata[b"attunebench.content_sha256"].decode() == version.content_hash

    with _exported_bundle(version, "json", True, capture) as bundle:
        sheet = json.loads(bundle.read("datasheet.json"))
        texts = [
            (json.loads(bundle.read(n))["conversationId"], bundle.read(n).decode("utf-8"))
            for n in bundle.namelist()
            if n.endswith(".json") and n != "datasheet.json"
        ]
    assert sheet["content_hash"] == version.content_hash
    assert _recomputed(texts) == version.content_hash_with_model_identity == sheet["content_hash_with_model_identity"]


def test_versions_are_immutable_and_skip_incomplete_or_withdrawn(sample_conversations, researcher):
    from collection.models import Conversation
    from datasets.versions import DatasetError, do_freeze_dataset_version

    first = Conversation.objects.order_by("conversation_id").first()
    first.status = Conversation.Status.ANNOTATING
    first.completeness = "unfinished"  # the participant is still answering the post-chat questions
    first.save()
    version = do_freeze_dataset_version("v1", user=researcher)
    assert version.conversation_count == 14
    with pytest.raises(DatasetError, match="already exists"):
        do_freeze_dataset_version("v1", user=researcher)
    with pytest.raises(DatasetError, match="No complete"):
        do_freeze_dataset_version("empty", topic_categories=["Hobbies"], user=researcher)


def test_withdrawal_after_freezing_removes_the_conversation_from_exports(sample_conversations, researcher):
    from django.utils import timezone

    from collection.models import Conversation
    from datasets.versions import build_datasheet, do_freeze_dataset_version, selection_queryset

    version = do_freeze_dataset_version("v1", user=researcher)
    participant = Conversation.objects.order_by("conversation_id").first().participant
    participant.withdrawn_at = timezone.now()
    participant.save()
    assert selection_queryset(dataset_version=version).count() == 14
    sheet = build_datasheet(version, "jsonl", True).data
    assert sheet["counts"]["conversations"] == 14 and sheet["counts"]["withdrawn_since_freeze"] == 1


def test_export_page_starts_a_job_and_offers_the_download(
    sample_conversations, researcher, django_capture_on_commit_callbacks
):
    from datasets.models import ExportJob
    from datasets.versions import do_freeze_dataset_version

    version = do_freeze_dataset_version("v1", user=researcher)
    client = Client()
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/research/datasets/{version.pk}/export/", {"fmt": "json", "include_model_identity": "on"}
        )
    assert response.status_code == 302
    job = ExportJob.objects.get()
    assert job.status == ExportJob.Status.DONE
    fragment = client.get(f"/research/exports/{job.pk}/status/").content.decode()
    assert f"/research/exports/{job.pk}/download/" in fragment and "hx-trigger" not in fragment
    body = b"".join(client.get(f"/research/exports/{job.pk}/download/").streaming_content)
    with zipfile.ZipFile(io.BytesIO(body)) as bundle:
        names = bundle.namelist()
        assert "DATASHEET.md" in names and "datasheet.json" in names
        documents = [
            cf.load_conversation(bundle.read(n), n) for n in names if n.endswith(".json") and n != "datasheet.json"
        ]
        assert len(documents) == 15
        assert cat.RESEARCH_ONLY_STATEMENT in bundle.read("DATASHEET.md").decode()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_export_of_2000_generated_conversations_completes_in_the_background_and_validates(researcher):
    """2,000 synthetic conversations → frozen version → JSONL export as a Celery job → every line validates."""
    import pyarrow.parquet as pq

    from attunebench.synth import synth_conversations
    from datasets.exchange import import_documents
    from datasets.models import ExportJob
    from datasets.tasks import do_request_export
    from datasets.versions import do_freeze_dataset_version, export_root

    for start in range(0, 2000, 500):
        documents = synth_conversations(500, seed=11, start=start)
        result = import_documents([(d.conversationId, d) for d in documents])
        assert result.ok, result.problems[:3]
    version = do_freeze_dataset_version("synthetic-2000", user=researcher)
    assert version.conversation_count == 2000

    # transaction=True: on_commit fires as soon as the job row is committed, as in production;
    # with no REDIS_URL Celery runs the task eagerly, exactly the code a worker runs.
    job = do_request_export(version, "jsonl", researcher)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE, job.error
    assert job.progress_done == job.progress_total == 2000

    path = export_root() / job.file_path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == job.file_sha256
    with zipfile.ZipFile(path) as bundle:
        lines = bundle.read("conversations.jsonl").decode().splitlines()
        sheet = json.loads(bundle.read("datasheet.json"))
    assert len(lines) == 2000
    ids = [cf.parse_conversation(json.loads(line), f"line {i}").conversationId for i, line in enumerate(lines, 1)]
    assert ids == sorted(ids) and len(set(ids)) == 2000
    assert sheet["counts"]["conversations"] == 2000
    assert sum(sheet["topic_distribution"].values()) == 2000
    assert sum(sheet["participant_group_distribution"].values()) == 2000
    assert sheet["schema_version"] == cf.CONVERSATION_SCHEMA_VERSION
    assert sheet["content_hash"] == version.content_hash

    parquet = do_request_export(version, "parquet", researcher)
    parquet.refresh_from_db()
    assert parquet.status == ExportJob.Status.DONE, parquet.error
    with zipfile.ZipFile(export_root() / parquet.file_path) as bundle:
        table = pq.read_table(io.BytesIO(bundle.read("turns.parquet")))
    assert len(set(table.column("conversation_id").to_pylist())) == 2000


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_an_earlier_identity_hash_under_its_name(schema_restored):
    """A hash taken with the real model names is not presented as the default export's hash."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from datasets.models import DatasetVersion

    before = [("datasets", "0003_merge_unfinished_and_withdrawn_exports")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    OldVersion = executor.loader.project_state(before).apps.get_model("datasets", "DatasetVersion")
    old = OldVersion.objects.create(name="frozen-earlier", content_hash="a" * 64, frozen=True)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    migrated = DatasetVersion.objects.get(pk=old.pk)
    assert (migrated.content_hash, migrated.content_hash_with_model_identity) == ("", "a" * 64)
