"""Celery task that prepares a turn's suggested rewrite off the participant's request path.

The rewrite is a model call that may take seconds. Made while the participant submitted their answers, it
held that request (and a server thread) for as long as the model took, which under load pushed annotation
submits far past their latency target. It is now queued as soon as the turn's reply is stored
(``collection.signals.reply_stored``), so it is usually ready long before the participant reaches the page
that shows it; until then that page says it is still being prepared and checks back.

The task takes the turn's id only and is idempotent (``turn_flow.prepare_rewrite`` keeps the first rewrite).
A failure is retried with backoff and, once retries are spent, raised, so Celery reports it; the page keeps
offering a continue button that prepares the rewrite in the request as the last resort. Without REDIS_URL
Celery runs eagerly: the task runs in the process that stored the reply, after its transaction commits.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import transaction

from annotation import turn_flow
from collection.models import Turn
from collection.task_queue import enqueue

logger = logging.getLogger(__name__)


@shared_task(
    name="annotation.prepare_rewrite",
    autoretry_for=(Exception,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=5,
)
def prepare_rewrite(turn_pk: int) -> bool:
    """Make the turn's suggested rewrite if it is not made yet; True when this call made it."""
    return turn_flow.prepare_rewrite(turn_pk)


def queue_rewrite_after_reply(sender: Any, turn_pk: int, **kwargs: Any) -> None:
    """``reply_stored`` receiver: queue the rewrite once the reply's transaction has committed."""

    def queue_it() -> None:
        try:
            enqueue(prepare_rewrite, turn_pk)  # kept in the database while the broker is away
        except Exception:  # reported, not swallowed: the page's continue button still prepares it in-request
            logger.exception("could not queue the rewrite of turn %s; it will be made when the page asks", turn_pk)

    transaction.on_commit(queue_it)


def queue_rewrite_if_missing(turn: Turn) -> None:
    """Queue the rewrite again when the answers lead to it and it is not made yet (a reply stored before
    this task existed, or a queue that lost it). Idempotent; without a broker it runs in this process."""
    # usually the rewrite was prepared when the reply was stored: that one query answers, most of the time
    if turn_flow.prepared_rewrite(turn) is None and turn_flow.locate_annotation(turn).step == turn_flow.REWRITE:
        try:
            enqueue(prepare_rewrite, turn.pk)
        except Exception:  # reported, not swallowed: the rewrite page's continue button prepares it in-request
            logger.exception("could not queue the rewrite of turn %s; it will be made when the page asks", turn.pk)
