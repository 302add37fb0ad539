"""Celery tasks of an evaluation run: one task per conversation, a chord to score the run.

Tasks take ids only and are thin: the work lives in ``scoring.replay_service``.
``replay_conversation`` is idempotent (a finished conversation is skipped, a
redelivered one replays from the call cache) and acknowledged late, so a
worker killed mid-conversation loses nothing but the calls in flight: the
message goes back to the queue and another worker picks it up. Only errors
that may pass (the database going away) are retried by Celery; model-call
failures are already handled inside the replay and end up in the output.

Without REDIS_URL Celery runs eagerly: the same chord runs in the calling
process, one conversation after another.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from celery import chord, shared_task
from django.db import InterfaceError, OperationalError

from scoring import replay_service
from scoring.run_scoring import do_score_evaluation_run

logger = logging.getLogger("attune.replay")


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    name="scoring.replay_conversation",
    max_retries=5,
    ignore_result=False,
)
def replay_conversation(self: Any, run_conversation_id: int) -> dict[str, Any]:
    """Replay and store one conversation of a run (checkpoint = its RunConversation row)."""
    try:
        return replay_service.do_replay_conversation(run_conversation_id)
    except (OperationalError, InterfaceError) as exc:
        # The database dropped the connection: transient, and the replay is cached, so retry.
        raise self.retry(exc=exc, countdown=min(60, 2**self.request.retries)) from exc
    except Exception as exc:
        logger.exception("replay of run conversation %s failed", run_conversation_id)
        replay_service.RunConversation.objects.filter(
            pk=run_conversation_id, status=replay_service.RunConversation.Status.RUNNING
        ).update(status=replay_service.RunConversation.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:5000])
        return {"run_conversation": run_conversation_id, "failed": f"{type(exc).__name__}: {exc}"}


@shared_task(acks_late=True, name="scoring.finalize_run")
def finalize_run(results: Sequence[dict[str, Any]] | None, run_id: int) -> str:
    """Chord callback: every conversation has been attempted; score the run."""
    return replay_service.do_finalize_run(run_id)


@shared_task(acks_late=True, name="scoring.rescore_run")
def rescore_run(run_id: int) -> int:
    """(Re)score a stored run, e.g. after a participant withdraws or the scorer changes; idempotent."""
    return do_score_evaluation_run(run_id)


def dispatch_run(run_id: int, run_conversation_ids: Sequence[int]) -> Any:
    """Enqueue one task per conversation and the scoring callback as a chord."""
    ids = list(run_conversation_ids)
    if not ids:
        return finalize_run.delay([], run_id)
    return chord([replay_conversation.si(pk) for pk in ids])(finalize_run.s(run_id))
