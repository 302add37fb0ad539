"""Export files made before a participant withdrew: deleted, and regenerated without them.

A finished export of a dataset version that held one of the withdrawn
conversations is withdrawn from download (its file is deleted, its row says
when and why) and a new export of the same version, format and model-identity
choice is queued; the selection already leaves the withdrawn conversations
out, and the new datasheet names the exports it replaces.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from datasets.models import ExportJob
from datasets.store import do_delete_job_files

logger = logging.getLogger("attune.research")


def exports_holding(conversation_pks: Sequence[int], withdrawn_at: datetime) -> list[ExportJob]:
    """Finished or running exports, started before ``withdrawn_at``, whose version names any of these conversations.

    An export started after the withdrawal left them out already (its selection skips withdrawn data).
    """
    return list(
        ExportJob.objects.filter(
            status__in=[ExportJob.Status.DONE, ExportJob.Status.RUNNING],
            started_at__lt=withdrawn_at,
            dataset_version__conversations__in=list(conversation_pks),
        )
        .distinct()
        .select_related("dataset_version")
        .order_by("pk")
    )


def do_withdraw_exports(conversation_pks: Sequence[int], withdrawn_at: datetime) -> list[ExportJob]:
    """Withdraw every finished export holding these conversations and queue its replacement.

    Returns the replacement jobs. The caller's transaction covers the rows; the
    files (every attempt's copy in the store) are deleted only once it commits, so a
    rollback leaves them in place. A running export's worker finds its job withdrawn
    when it finishes and deletes what it wrote.
    """
    from datasets.tasks import do_request_export

    replacements = []
    withdrawn: list[tuple[int, str]] = []
    for job in exports_holding(conversation_pks, withdrawn_at):
        new = do_request_export(job.dataset_version, job.fmt, job.created_by, job.include_model_identity)
        ExportJob.objects.filter(pk=job.pk).update(
            status=ExportJob.Status.WITHDRAWN, withdrawn_at=timezone.now(), replaced_by=new
        )
        withdrawn.append((job.pk, job.file_path))
        replacements.append(new)

    def delete_files() -> None:
        # Every stored copy, from the deployment's one store (whichever host wrote it), each deletion logged.
        for pk, file_path in withdrawn:
            try:
                do_delete_job_files(pk, file_path, "a participant in it withdrew")
            except Exception:
                logger.exception(
                    "export %s: could not delete its stored files after a withdrawal; `attune storage check` "
                    "lists what is left",
                    pk,
                )

    transaction.on_commit(delete_files)
    return replacements


def withdraw_exports_after_withdrawal(
    sender: Any, conversation_pks: Sequence[int], withdrawn_at: datetime, **kwargs: Any
) -> None:
    """Receiver of ``collection.signals.participant_withdrawn``."""
    do_withdraw_exports(conversation_pks, withdrawn_at)
