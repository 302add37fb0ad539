"""Handing work to the workers so that a broker outage loses none of it.

Work a participant's action needs from a worker (the safety contact's email, a reply's suggested rewrite,
the re-scoring after a withdrawal, an export) is sent to the broker once its transaction has committed. When
the broker cannot take it (Redis stopped, refusing or not answering), the task is kept in the database
(``PendingTask``) and the page answers as usual: the action was accepted. Every worker's sweeper sends what
was kept once the broker is back (``send_pending``). Each task sent this way is idempotent, so one sent twice
(two sweepers, or a sweeper and a retry) still does its work once.

After a failure the broker is not tried again for ``SKIP_BROKER_S``: each enqueue in an outage costs a
database insert, not another round of connection attempts. Without ``REDIS_URL`` tasks run in the process
(eager) and nothing is ever kept; an error of the task itself is the caller's, as before.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerUnreachable

from collection.models import PendingTask

logger = logging.getLogger("attune.tasks")

SKIP_BROKER_S = 5.0
# One quick reconnect before the task is kept: a broker that blinked is given a chance, a stopped one is not
# retried for the default policy's second or so per enqueue.
PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
SEND_AT_MOST = 500

_broker_failed_at: float | None = None
clock = time.monotonic  # tests move time instead of waiting for it


def broker_skipped() -> bool:
    """True for a short while after the broker refused a task (the enqueue goes straight to the database)."""
    return _broker_failed_at is not None and clock() - _broker_failed_at < SKIP_BROKER_S


def enqueue(task: Any, *args: Any) -> bool:
    """Send ``task(*args)`` to the workers; True when the broker took it, False when it was kept for later."""
    global _broker_failed_at
    if task.app.conf.task_always_eager or not broker_skipped():  # eager: no broker, the task runs here
        try:
            task.apply_async(args=args, retry_policy=PUBLISH_RETRY)
        except BrokerUnreachable as exc:
            _broker_failed_at = clock()
            return _keep(task.name, args, exc)
        _broker_failed_at = None
        return True
    return _keep(task.name, args, None)


def _keep(name: str, args: tuple[Any, ...], exc: BaseException | None) -> bool:
    reason = f"{type(exc).__name__}: {exc}"[:300] if exc is not None else "broker unreachable a moment ago"
    PendingTask.objects.create(task=name, args=list(args), error=reason)
    logger.warning("tasks: the broker is unreachable (%s); %s%s kept to be sent when it is back", reason, name, args)
    return False


def send_pending(limit: int = SEND_AT_MOST) -> int:
    """Send the tasks kept during a broker outage, oldest first; returns how many were sent.

    A row is locked while it is sent (other sweepers skip it) and deleted in the same transaction once the
    broker has taken it, so a sweeper that dies half-way leaves it to be sent again, never lost. Stops at the
    first task the broker refuses: it is still away.
    """
    global _broker_failed_at
    sent = 0
    for pk in list(PendingTask.objects.values_list("pk", flat=True)[:limit]):
        with transaction.atomic():
            row = PendingTask.objects.select_for_update(skip_locked=True).filter(pk=pk).first()
            if row is None:  # another sweeper has it
                continue
            try:
                current_app.send_task(row.task, args=row.args, retry_policy=PUBLISH_RETRY)
            except BrokerUnreachable as exc:
                logger.warning("tasks: %d kept task(s) wait: the broker is still unreachable (%s)", _count(), exc)
                return sent
            row.delete()
        sent += 1
    if sent:
        _broker_failed_at = None
        logger.info("tasks: sent %d task(s) kept while the broker was unreachable", sent)
    return sent


def _count() -> int:
    return PendingTask.objects.count()
