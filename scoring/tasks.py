"""Celery tasks of an evaluation run: one task per conversation, then one to score the run.

Tasks take ids only and are thin: the work lives in ``scoring.replay_service``.
``replay_conversation`` is idempotent: a conversation is replayed under a lease
(one worker at a time), a finished one is skipped, and a redelivered one replays
from the call cache. Messages are acknowledged late and rejected when their
worker dies, and a conversation whose worker died is requeued once its lease
lapses (``scoring.run_control.sweep``), so a killed worker loses nothing but
the calls it had in flight. Only errors that may pass (the database going away)
are retried by Celery; model-call failures are handled inside the replay and
end up in the output.

The task that stores a run's last conversation enqueues ``finalize_run`` on the
``finalize`` queue, which workers consume besides the default one, so scoring
a finished run never waits behind other runs' conversations.

Without REDIS_URL Celery runs eagerly: the same tasks run in the calling
process, one conversation after another.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import group, shared_task
from django.db import InterfaceError, OperationalError

from scoring import replay_service
from scoring.run_scoring import do_score_evaluation_run, do_score_evaluation_runs

logger = logging.getLogger("attune.replay")

FINALIZE_QUEUE = "finalize"


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    name="scoring.replay_conversation",
    max_retries=5,
    ignore_result=True,
)
def replay_conversation(self: Any, run_conversation_id: int) -> dict[str, Any]:
    """Replay and store one conversation of a run (checkpoint = its RunConversation row)."""
    try:
        summary = replay_service.do_replay_conversation(run_conversation_id)
    except (OperationalError, InterfaceError) as exc:
        # The database dropped the connection: transient, and the replay is cached, so retry.
        raise self.retry(exc=exc, countdown=min(60, 2**self.request.retries)) from exc
    if summary.get("open") == 0:
        finalize_run.delay(summary["run"])
    return summary


@shared_task(acks_late=True, reject_on_worker_lost=True, name="scoring.finalize_run", ignore_result=True)
def finalize_run(run_id: int) -> str:
    """Score a run whose conversations have all been attempted (a no-op for any other run)."""
    return replay_service.do_finalize_run(run_id)


@shared_task(acks_late=True, name="scoring.rescore_run")
def rescore_run(run_id: int) -> int:
    """(Re)score a stored run, e.g. after a participant withdraws or the scorer changes; idempotent."""
    return do_score_evaluation_run(run_id)


@shared_task(acks_late=True, name="scoring.rescore_runs")
def rescore_runs(run_ids: list[int]) -> int:
    """(Re)score several stored runs in one pass, each conversation's ground truth read once for all; idempotent."""
    return do_score_evaluation_runs(run_ids)


def dispatch_run(run_id: int, run_conversation_ids: Sequence[int]) -> None:
    """Enqueue one task per conversation; the last one to finish enqueues the scoring."""
    ids = list(run_conversation_ids)
    if not ids:
        finalize_run.delay(run_id)
        return
    group(replay_conversation.si(pk) for pk in ids).apply_async()


def requeue(run_conversation_ids: Sequence[int]) -> None:
    """Send conversations to the queue again (their claims decide who replays them)."""
    for pk in run_conversation_ids:
        replay_conversation.delay(pk)
