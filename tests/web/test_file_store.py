"""The one file store, export leases and the deployment's keys, in one process.

The bucket is a real S3-compatible server (SeaweedFS on loopback, devtools/s3_server.py); the folder store is
the embedded default. The two-host version of these is tests/web/test_several_machines.py.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.utils import timezone

from attune_site.identity import DeploymentIdentityError, verify_deployment_identity
from attune_site.models import DeploymentKey
from attune_site.object_store import EXPORTS, export_storage
from datasets.export_leases import MAX_ATTEMPTS
from datasets.models import ExportJob
from datasets.store import export_store
from datasets.tasks import do_request_export, export_dataset_version, requeue_lapsed_exports
from datasets.versions import access_export_file, do_freeze_dataset_version
from datasets.withdrawal import do_withdraw_exports
from devtools.s3_server import S3Server

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def bucket(tmp_path, settings, monkeypatch):
    """Exports go to a real S3-compatible bucket, as with ATTUNE_STORAGE_URL=s3://attune-test/study."""
    with S3Server(tmp_path / "s3") as s3:
        for name, value in s3.environment().items():
            monkeypatch.setenv(name, value)
        settings.STORAGES = {
            **settings.STORAGES,
            EXPORTS: export_storage(s3.environment()["ATTUNE_STORAGE_URL"], tmp_path),
        }
        yield s3


@pytest.fixture
def version(sample_conversations, researcher):
    return do_freeze_dataset_version("store-v1", user=researcher)


def finished_export(version, researcher, capture) -> ExportJob:
    with capture(execute=True):
        job = do_request_export(version, "jsonl", researcher)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE, job.error
    return job


def test_an_export_is_written_to_the_bucket_and_streamed_back(
    bucket, version, researcher, django_capture_on_commit_callbacks
):
    job = finished_export(version, researcher, django_capture_on_commit_callbacks)
    assert bucket.object_keys() == [f"study/exports/{job.file_path}"]
    download = access_export_file(job)
    content = download.stream.read()
    assert len(content) == job.file_size and download.file_name.endswith("-jsonl.zip")


def test_withdrawal_deletes_every_stored_copy_and_logs_each(
    bucket, version, researcher, django_capture_on_commit_callbacks, caplog
):
    job = finished_export(version, researcher, django_capture_on_commit_callbacks)
    # What a worker killed after its upload leaves: a copy nothing references, in the export's own folder.
    orphan = export_store().save(f"export-{job.pk}/attempt-9/left-behind.zip", ContentFile(b"conversations"))
    with pytest.raises(CommandError, match="1 unreferenced file"):
        call_command("storage", "check")

    conversation_pks = list(version.conversations.values_list("pk", flat=True)[:1])
    with caplog.at_level(logging.WARNING, logger="attune.storage"), django_capture_on_commit_callbacks(execute=True):
        do_withdraw_exports(conversation_pks, timezone.now())

    job.refresh_from_db()
    assert job.status == ExportJob.Status.WITHDRAWN
    deleted = sorted(r.getMessage() for r in caplog.records if "deleted the stored file" in r.getMessage())
    assert deleted == sorted(
        f"export {job.pk}: deleted the stored file {name} (a participant in it withdrew)"
        for name in (job.file_path, orphan)
    )
    assert not any(key.startswith(f"study/exports/export-{job.pk}/") for key in bucket.object_keys())
    call_command("storage", "check")  # the replacement export is there and referenced; nothing else is


def test_storage_check_names_a_finished_export_whose_file_is_missing(
    export_dir, version, researcher, django_capture_on_commit_callbacks, capsys
):
    job = finished_export(version, researcher, django_capture_on_commit_callbacks)
    (export_dir / job.file_path).unlink()
    with pytest.raises(CommandError, match="1 missing file"):
        call_command("storage", "check")
    assert f"missing: export #{job.pk} has no stored file {job.file_path}" in capsys.readouterr().out


def lapse(job: ExportJob, attempts: int) -> None:
    """What a worker killed mid-export leaves: running, under a lease nobody renews any more."""
    ExportJob.objects.filter(pk=job.pk).update(
        status=ExportJob.Status.RUNNING,
        lease_owner="gone-host:4242:abc",
        lease_expires_at=timezone.now() - timedelta(minutes=1),
        attempts=attempts,
        started_at=timezone.now() - timedelta(minutes=2),
    )


def queued_export(version, researcher) -> ExportJob:
    return ExportJob.objects.create(dataset_version=version, fmt="jsonl", created_by=researcher)


def test_the_sweeper_queues_a_dead_workers_export_again_and_it_finishes(export_dir, version, researcher):
    job = queued_export(version, researcher)
    lapse(job, attempts=1)
    assert requeue_lapsed_exports() == {"requeued": [job.pk], "failed": []}  # tasks run in-process here
    job.refresh_from_db()
    assert (job.status, job.attempts, job.lease_owner, job.lease_expires_at) == ("done", 2, "", None)
    assert (export_dir / job.file_path).is_file()


def test_the_sweeper_fails_an_export_whose_last_attempt_died_saying_why(export_dir, version, researcher):
    job = queued_export(version, researcher)
    lapse(job, attempts=MAX_ATTEMPTS)
    assert requeue_lapsed_exports() == {"requeued": [], "failed": [job.pk]}
    job.refresh_from_db()
    assert job.status == ExportJob.Status.FAILED and job.lease_owner == ""
    assert "stopped before it finished" in job.error and "gone-host:4242" in job.error


def test_a_redelivered_task_completes_a_lapsed_export(export_dir, version, researcher):
    job = queued_export(version, researcher)
    lapse(job, attempts=1)
    assert export_dataset_version(job.pk).startswith("done export-")
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE and job.attempts == 2


def test_a_live_workers_export_is_left_to_it(export_dir, version, researcher):
    job = queued_export(version, researcher)
    lapse(job, attempts=1)
    ExportJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() + timedelta(minutes=1))
    assert export_dataset_version(job.pk) is None
    assert requeue_lapsed_exports() == {"requeued": [], "failed": []}
    assert ExportJob.objects.get(pk=job.pk).status == ExportJob.Status.RUNNING


def test_a_process_with_another_pseudonym_key_is_refused_naming_the_variable(settings):
    verify_deployment_identity()  # the first use records both fingerprints
    assert set(DeploymentKey.objects.values_list("variable", flat=True)) == {
        "ATTUNE_SECRET_KEY",
        "ATTUNE_PSEUDONYM_KEY",
    }
    verify_deployment_identity()  # the same keys: accepted again
    settings.ATTUNE_PSEUDONYM_KEY = "another-hosts-key-" + "x7" * 30
    with pytest.raises(DeploymentIdentityError) as refused:
        verify_deployment_identity()
    assert "ATTUNE_PSEUDONYM_KEY is not this deployment's" in str(refused.value)
    assert "ATTUNE_SECRET_KEY" not in str(refused.value)
    with pytest.raises(SystemCheckError, match="ATTUNE_PSEUDONYM_KEY is not this deployment's"):
        call_command("check", deploy=True)


def test_check_deploy_reports_both_keys(capsys, monkeypatch):
    # The browser tests allow Django's sync calls from their event loop for the whole session; a deployment
    # never does, and the deploy check says so: not this test's subject.
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    verify_deployment_identity()
    call_command("check", deploy=True)
    said = capsys.readouterr()
    for variable in ("ATTUNE_SECRET_KEY", "ATTUNE_PSEUDONYM_KEY"):
        assert f"{variable}: from " in said.out + said.err
        assert "matches the deployment's" in said.out + said.err
