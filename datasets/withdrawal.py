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
from datasets.versions import export_root

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
    files are deleted only once it commits, so a rollback leaves them in place.
    """
    from datasets.tasks import do_request_export

    replacements = []
    files = []
    for job in exports_holding(conversation_pks, withdrawn_at):
        new = do_request_export(job.dataset_version, job.fmt, job.created_by, job.include_model_identity)
        ExportJob.objects.filter(pk=job.pk).update(
            status=ExportJob.Status.WITHDRAWN, withdrawn_at=timezone.now(), replaced_by=new
        )
        if job.file_path:
            files.append(export_root() / job.file_path)
        replacements.append(new)

    def delete_files() -> None:
        for path in files:
            try:
                path.unlink(missing_ok=True)
            except OSError:
                logger.exception("could not delete withdrawn export file %s", path)

    transaction.on_commit(delete_files)
    return replacements


def withdraw_exports_after_withdrawal(
    sender: Any, conversation_pks: Sequence[int], withdrawn_at: datetime, **kwargs: Any
) -> None:
    """Receiver of ``collection.signals.participant_withdrawn``."""
    do_withdraw_exports(conversation_pks, withdrawn_at)
