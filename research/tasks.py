"""Celery tasks of the research app: thin wrappers taking ids, the work lives in services."""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, name="research.export_dataset_version")
def export_dataset_version(job_id: int) -> str | None:
    """Write the export bundle of one ExportJob; failures are recorded on the job, not retried.

    An export failure is a data or disk problem that a retry would only repeat,
    so nothing here retries automatically; the researcher can request it again.
    """
    from research.datasets import run_export_job

    job = run_export_job(job_id)
    return job.file_path if job else None
