"""Starting, resuming, cancelling and requeueing evaluation runs: what the launcher, the CLI, the demo and
the workers' sweeper call.

It sits above both the replay service (which prepares and replays) and the
Celery tasks (which carry the work to workers), so neither imports the other
through a back door.

Cancel and resume are race-free through the conversation leases: cancelling
stops conversations from being claimed (those being replayed finish and are
kept), and resuming queues every conversation not yet done; one still held by
a live worker is left to it (the new delivery finds the lease and skips), one
whose worker died is claimed once its lease has lapsed. No conversation is ever
replayed twice at the same time.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import close_old_connections, connection
from django.db.models import F
from django.utils import timezone

from datasets.tasks import requeue_lapsed_exports
from scoring.models import EvaluationRun, RunConversation
from scoring.replay_service import (
    ACTIVE_STATUSES,
    do_prepare_run,
    lease_seconds,
    mark_requeued,
    runs_to_finalize,
    stalled_conversations,
)
from scoring.tasks import dispatch_run, finalize_run, requeue

logger = logging.getLogger("attune.replay")


def start_run(run_id: int) -> None:
    """Prepare a queued run and hand it to Celery (eager, in-process, without REDIS_URL)."""
    pending = do_prepare_run(run_id)
    dispatch_run(run_id, pending)


def resume_run(run_id: int) -> None:
    """Continue a cancelled or failed run: finished conversations are kept, cached calls are free."""
    put_back = RunConversation.objects.filter(run_id=run_id, status=RunConversation.Status.FAILED).update(
        status=RunConversation.Status.PENDING
    )
    if put_back:
        EvaluationRun.objects.filter(pk=run_id, conversations_failed__gte=put_back).update(
            conversations_failed=F("conversations_failed") - put_back
        )
    start_run(run_id)


def cancel_run(run_id: int) -> bool:
    """Stop a run: conversations not yet claimed are skipped by the workers; those being replayed finish."""
    changed = EvaluationRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(
        status=EvaluationRun.Status.CANCELLED, finished_at=timezone.now()
    )
    return bool(changed)


def requeue_stalled(run_id: int | None = None) -> list[int]:
    """Queue again the conversations whose worker stopped renewing its lease; returns their ids.

    Marking (pending again) is conditional on the same lapsed lease, so of two
    sweepers one requeues it, and it is committed before the message is sent.
    Should this process die in between, the dead worker's own message still
    comes back from the broker after ATTUNE_VISIBILITY_TIMEOUT.
    """
    requeued = []
    for pk, owner in stalled_conversations(run_id).values_list("pk", "lease_owner"):
        if mark_requeued(pk, owner):
            logger.warning("run conversation %s: the lease of %s lapsed; requeued", pk, owner)
            requeued.append(pk)
            requeue([pk])
    return requeued


def sweep() -> dict[str, Any]:
    """One pass of the sweeper: requeue stalled conversations, finalise runs whose finalisation was lost,
    and queue again (or fail, on their last attempt) the exports whose worker died."""
    requeued = requeue_stalled()
    finalised = runs_to_finalize()
    for run_id in finalised:
        finalize_run.delay(run_id)
    return {"requeued": requeued, "finalised": finalised, "exports": requeue_lapsed_exports()}


class Sweeper:
    """A daemon thread in each worker's main process that calls ``sweep`` every half lease."""

    def __init__(self, interval: float | None = None) -> None:
        self.interval = interval if interval is not None else max(1.0, lease_seconds() / 2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="attune-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)

    def _serve(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                close_old_connections()
                sweep()
            except Exception:  # the database or broker is away: try again next time
                logger.exception("the replay sweeper failed; retrying in %.0f s", self.interval)
                connection.close()
        connection.close()
