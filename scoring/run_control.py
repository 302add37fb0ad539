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

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F
from django.utils import timezone

from collection.task_queue import send_pending
from datasets.tasks import requeue_lapsed_exports
from scoring.embedded_runs import embedded_runner
from scoring.models import EvaluationRun, RunConversation
from scoring.replay_service import (
    ACTIVE_STATUSES,
    do_prepare_run,
    lease_seconds,
    mark_requeued,
    runs_to_finalize,
    stalled_conversations,
)
from scoring.run_gaps import gapped_rows
from scoring.tasks import dispatch_run, finalize_run, requeue

logger = logging.getLogger("attune.replay")


def tasks_run_here() -> bool:
    """Whether a Celery task sent now would run in this process (the embedded default: no REDIS_URL)."""
    from celery import current_app

    return bool(current_app.conf.task_always_eager)


def start_run(run_id: int, *, in_background: bool = False) -> None:
    """Prepare a queued run and hand it to Celery workers.

    Where tasks would run in this process, eagerly, ``in_background`` replays it
    in background threads of this process instead (``scoring.embedded_runs``):
    what the launcher and the API ask, so a request returns at once; without
    it (a script, a test) the run is replayed here before this returns.
    """
    pending = do_prepare_run(run_id)
    if in_background and background_runs_here():
        embedded_runner().start(run_id, pending)
    else:
        dispatch_run(run_id, pending)


def background_runs_here() -> bool:
    """Whether runs started from the web are replayed by this process's background threads."""
    return tasks_run_here() and bool(settings.ATTUNE_EMBEDDED_RUNS_IN_BACKGROUND)


def resume_run(run_id: int, *, in_background: bool = False) -> None:
    """Continue a cancelled or failed run: finished conversations are kept, cached calls are free."""
    put_back = RunConversation.objects.filter(run_id=run_id, status=RunConversation.Status.FAILED).update(
        status=RunConversation.Status.PENDING
    )
    if put_back:
        EvaluationRun.objects.filter(pk=run_id, conversations_failed__gte=put_back).update(
            conversations_failed=F("conversations_failed") - put_back
        )
    start_run(run_id, in_background=in_background)


def retry_failed(run_id: int) -> int:
    """Replay again only the conversations of a finished run that have gaps (failed calls, no output), then
    score the run again; returns how many were put back.

    Their answered calls come back from the call cache (as this run's own, ``calls_reused``), so only the calls
    that failed reach the provider again.
    """
    rows = gapped_rows(run_id)
    done = [r.pk for r in rows if r.status == RunConversation.Status.DONE]
    failed = [r.pk for r in rows if r.status == RunConversation.Status.FAILED]
    with transaction.atomic():
        put_done = RunConversation.objects.filter(pk__in=done, status=RunConversation.Status.DONE).update(
            status=RunConversation.Status.PENDING
        )
        put_failed = RunConversation.objects.filter(pk__in=failed, status=RunConversation.Status.FAILED).update(
            status=RunConversation.Status.PENDING
        )
        if put_done:
            EvaluationRun.objects.filter(pk=run_id, conversations_done__gte=put_done).update(
                conversations_done=F("conversations_done") - put_done
            )
        if put_failed:
            EvaluationRun.objects.filter(pk=run_id, conversations_failed__gte=put_failed).update(
                conversations_failed=F("conversations_failed") - put_failed
            )
    start_run(run_id)
    return put_done + put_failed


def cancel_run(run_id: int) -> bool:
    """Stop a run: conversations not yet claimed are skipped by the workers; those being replayed finish."""
    changed = EvaluationRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(
        status=EvaluationRun.Status.CANCELLED, finished_at=timezone.now()
    )
    return bool(changed)


def requeue_stalled(run_id: int | None = None, *, in_background: bool = False) -> list[int]:
    """Queue again the conversations whose worker stopped renewing its lease; returns their ids.

    Marking (pending again) is conditional on the same lapsed lease, so of two
    sweepers one requeues it, and it is committed before the message is sent.
    Should this process die in between, the dead worker's own message still
    comes back from the broker after ATTUNE_VISIBILITY_TIMEOUT.
    """
    requeued = []
    background = in_background and run_id is not None and background_runs_here()
    for pk, owner in stalled_conversations(run_id).values_list("pk", "lease_owner"):
        if mark_requeued(pk, owner):
            logger.warning("run conversation %s: the lease of %s lapsed; requeued", pk, owner)
            requeued.append(pk)
            if not background:
                requeue([pk])
    if background and requeued and run_id is not None:
        embedded_runner().start(run_id, requeued)
    return requeued


def sweep() -> dict[str, Any]:
    """One pass of the sweeper: send the tasks kept while the broker was away, requeue stalled conversations,
    finalise runs whose finalisation was lost."""
    pending = send_pending()
    """One pass of the sweeper: requeue stalled conversations, finalise runs whose finalisation was lost,
    and queue again (or fail, on their last attempt) the exports whose worker died."""
    requeued = requeue_stalled()
    finalised = runs_to_finalize()
    for run_id in finalised:
        finalize_run.delay(run_id)
    return {"pending_sent": pending, "requeued": requeued, "finalised": finalised, "exports": requeue_lapsed_exports()}


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
