"""Celery tasks of the datasets app and their enqueueing.

Thin wrappers taking ids; the work lives in ``datasets.versions``.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import transaction

from collection.task_queue import enqueue
from datasets.exchange import EXPORT_FORMATS
from datasets.models import DatasetVersion, ExportJob
from datasets.versions import DatasetError, run_export_job


@shared_task(acks_late=True, name="datasets.export_dataset_version")
def export_dataset_version(job_id: int) -> str | None:
    """Write the export bundle of one ExportJob; failures are recorded on the job, not retried.

    An export failure is a data or disk problem that a retry would only repeat,
    so nothing here retries automatically; the researcher can request it again.
    """
    job = run_export_job(job_id)
    return job.file_path if job else None


def do_request_export(
    version: DatasetVersion, fmt: str, user: Any = None, include_model_identity: bool = False
) -> ExportJob:
    """Record an export job and enqueue it once the transaction commits (the request returns at once)."""
    if fmt not in EXPORT_FORMATS:
        raise DatasetError(f"Unknown export format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}.")
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
