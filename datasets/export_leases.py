"""Export jobs held under a lease, so a job whose worker died is never left "running".

A worker claims an export with a conditional update that also sets a lease
(who holds it, until when, in database time: hosts compare on one clock) and
renews it from a heartbeat thread while it writes. The workers' sweeper
(``scoring.run_control.sweep``) finds jobs whose lease lapsed: it queues them
again, up to ``MAX_ATTEMPTS`` attempts, and after that marks them failed with
the reason. A redelivered task claims a lapsed job as it claims a queued one.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta
from types import TracebackType
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import DateTimeField, ExpressionWrapper, F, Q
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from datasets.models import ExportJob

logger = logging.getLogger("attune.exports")

#: Attempts an export gets before a lapsed lease fails it: a bundle that kills its worker every time
#: (out of memory, say) must not be retried forever.
MAX_ATTEMPTS = 3


def lease_seconds() -> int:
    """The same lease as replayed conversations: one setting says how soon a dead worker's work comes back."""
    return int(settings.ATTUNE_REPLAY_LEASE_SECONDS)


def new_lease_token() -> str:
    """Who holds an export: host, process and a random part (one per claim)."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _lease_until() -> Any:
    return ExpressionWrapper(Now() + timedelta(seconds=lease_seconds()), output_field=DateTimeField())


def _lapsed() -> Q:
    return Q(status=ExportJob.Status.RUNNING, lease_expires_at__lt=Now())


def claim_export(job_id: int) -> tuple[str, int] | None:
    """Take a queued export, or one whose worker's lease lapsed; returns (lease token, attempt) or None.

    The claim is one conditional update, so of two deliveries of the same job only one writes it.
    """
    token = new_lease_token()
    claimed = ExportJob.objects.filter(
        Q(pk=job_id) & (Q(status=ExportJob.Status.QUEUED) | _lapsed()), attempts__lt=MAX_ATTEMPTS
    ).update(
        status=ExportJob.Status.RUNNING,
        # The first start is kept: a withdrawal after it must still find this export (datasets/withdrawal.py).
        started_at=Coalesce(F("started_at"), Now()),
        lease_owner=token,
        lease_expires_at=_lease_until(),
        attempts=F("attempts") + 1,
        progress_done=0,
        error="",
    )
    if claimed != 1:
        return None
    attempt = ExportJob.objects.filter(pk=job_id).values_list("attempts", flat=True).get()
    return token, attempt


def held(job_id: int, token: str) -> Q:
    """The condition every write of the holder carries: still running, still under its lease."""
    return Q(pk=job_id, status=ExportJob.Status.RUNNING, lease_owner=token)


def release_fields() -> dict[str, Any]:
    return {"lease_owner": "", "lease_expires_at": None}


class Heartbeat:
    """Renews an export's lease every quarter lease from a thread while the bundle is written.

    The thread stops with the ``with`` block; a worker killed meanwhile renews nothing, so its lease lapses.
    """

    def __init__(self, job_id: int, token: str) -> None:
        self.job_id, self.token = job_id, token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"export-{job_id}-lease", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        interval = max(0.5, lease_seconds() / 4)
        try:
            while not self._stop.wait(interval):
                try:
                    close_old_connections()
                    ExportJob.objects.filter(held(self.job_id, self.token)).update(lease_expires_at=_lease_until())
                except Exception:  # the database is away for a moment: the next beat tries again
                    logger.exception("export %s: could not renew its lease; trying again", self.job_id)
        finally:
            connection.close()


def lapsed_exports() -> list[tuple[int, str, int]]:
    """(id, lease owner, attempts) of every running export whose worker stopped renewing its lease."""
    return list(ExportJob.objects.filter(_lapsed()).order_by("pk").values_list("pk", "lease_owner", "attempts"))


def do_requeue_lapsed(job_id: int, owner: str) -> bool:
    """Queue a lapsed export again (conditional on the same lapsed lease: of two sweepers, one does it)."""
    changed = ExportJob.objects.filter(_lapsed(), pk=job_id, lease_owner=owner, attempts__lt=MAX_ATTEMPTS).update(
        status=ExportJob.Status.QUEUED, **release_fields()
    )
    if changed:
        logger.warning("export %s: the lease of %s lapsed (its worker stopped); queued again", job_id, owner)
    return bool(changed)


def do_fail_lapsed(job_id: int, owner: str, attempts: int) -> bool:
    """Fail an export whose last allowed attempt's worker died, saying so on the job."""
    reason = (
        f"The worker writing this export stopped before it finished (host and process {owner.rsplit(':', 1)[0]}; "
        f"attempt {attempts} of {MAX_ATTEMPTS}, each stopped the same way). Request the export again; if it "
        "fails again, look at the workers' logs (a bundle too large for a worker's memory stops it like this)."
    )
    changed = ExportJob.objects.filter(_lapsed(), pk=job_id, lease_owner=owner).update(
        status=ExportJob.Status.FAILED, error=reason, finished_at=timezone.now(), **release_fields()
    )
    if changed:
        logger.error("export %s: failed after %s attempts whose workers stopped", job_id, attempts)
    return bool(changed)
