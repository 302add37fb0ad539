"""Celery tasks of the datasets app and their enqueueing.

Thin wrappers taking ids; the work lives in ``datasets.versions``.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import transaction

from collection.task_queue import enqueue
from datasets.exchange import JOB_FORMATS, PUBLISHED_FORMAT
from datasets.export_leases import do_fail_lapsed, do_requeue_lapsed, lapsed_exports
from datasets.models import DatasetVersion, ExportJob
from datasets.versions import DatasetError, run_export_job


@shared_task(acks_late=True, name="datasets.export_dataset_version")
def export_dataset_version(job_id: int) -> str | None:
    """Write the export bundle of one ExportJob; failures are recorded on the job, not retried.

    An export failure is a data or disk problem that a retry would only repeat,
    so nothing here retries automatically; the researcher can request it again.
    A worker that died is another matter: its lease lapses and the sweeper queues
    the job again (``requeue_lapsed_exports``); a redelivered message claims it too.
    Returns the job's status (and stored file, when done), or None when another
    live worker holds it.
    """
    job = run_export_job(job_id)
    if job is None:
        return None
    return f"{job.status} {job.file_path}".strip()


def requeue_lapsed_exports() -> dict[str, list[int]]:
    """The sweeper's pass over exports: a job whose worker died is queued again, or failed on its last attempt."""
    from datasets.export_leases import MAX_ATTEMPTS

    requeued, failed = [], []
    for pk, owner, attempts in lapsed_exports():
        if attempts < MAX_ATTEMPTS:
            if do_requeue_lapsed(pk, owner):
                requeued.append(pk)
                export_dataset_version.delay(pk)
        elif do_fail_lapsed(pk, owner, attempts):
            failed.append(pk)
    return {"requeued": requeued, "failed": failed}


def do_request_export(
    version: DatasetVersion, fmt: str, user: Any = None, include_model_identity: bool = False
) -> ExportJob:
    """Record an export job and enqueue it once the transaction commits (the request returns at once)."""
    if fmt not in JOB_FORMATS:
        raise DatasetError(f"Unknown export format {fmt!r}; choose one of {', '.join(JOB_FORMATS)}.")
    if fmt == PUBLISHED_FORMAT and include_model_identity:
        # Publishing identities takes naming every model (attune publish dataset --model-identity), not one switch.
        raise DatasetError(
            "A published dataset names original models by alias; to publish their real names, name every one "
            "with attune publish dataset --model-identity."
        )
    if not version.frozen:
        raise DatasetError("Only frozen dataset versions can be exported.")
    job = ExportJob.objects.create(
        dataset_version=version,
        fmt=fmt,
        include_model_identity=include_model_identity,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        progress_total=version.conversation_count,
    )
    transaction.on_commit(lambda: enqueue(export_dataset_version, job.pk))  # kept while the broker is away
    return job
