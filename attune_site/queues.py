"""Celery queues by who waits for the work, and which task goes where.

- ``interactive``: work a participant or a page is waiting on (a turn's suggested rewrite, the safety
  contact's alert). ``attune worker`` keeps a pool of its own for it, so a replay of thousands of
  conversations can never sit in front of a participant's next page.
- ``bulk``: work nobody watches second by second (a run's conversations, dataset exports).
- ``finalize``: scoring a run whose conversations are all done, so it never waits behind other runs, and
  recomputing the dashboard's analyses once scores change.
- ``celery``: Celery's default, for any task not named here and for messages a previous release queued
  before the queues were split; every bulk worker still consumes it.
"""

from __future__ import annotations

from typing import Any

INTERACTIVE = "interactive"
BULK = "bulk"
FINALIZE = "finalize"
DEFAULT = "celery"

# Every queue a worker may be asked to consume, in the order an operator reads them.
ALL_QUEUES = (INTERACTIVE, BULK, FINALIZE, DEFAULT)
# What a bulk worker consumes: everything but the interactive queue, which has its own pool.
BULK_WORKER_QUEUES = (BULK, FINALIZE, DEFAULT)

TASK_QUEUES: dict[str, str] = {
    "annotation.prepare_rewrite": INTERACTIVE,
    "collection.notify_safety_contact": INTERACTIVE,
    "scoring.replay_conversation": BULK,
    "datasets.export_dataset_version": BULK,
    "scoring.finalize_run": FINALIZE,
    "scoring.rescore_run": FINALIZE,
    "scoring.rescore_runs": FINALIZE,
    "research.warm_dashboard": FINALIZE,
}


def task_routes() -> dict[str, dict[str, str]]:
    """Celery's ``task_routes`` setting for :data:`TASK_QUEUES`."""
    return {task: {"queue": queue} for task, queue in TASK_QUEUES.items()}


def task_queues() -> list[Any]:
    """Celery's ``task_queues`` setting: every queue declared, so a purge or an inspection sees them all."""
    from kombu import Queue

    return [Queue(name) for name in ALL_QUEUES]


def parse_queues(value: str) -> list[str]:
    """A comma-separated queue list as an operator types it; unknown names are refused with the known ones."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise ValueError(f"no queue named; choose from {', '.join(ALL_QUEUES)}")
    unknown = [name for name in names if name not in ALL_QUEUES]
    if unknown:
        raise ValueError(f"unknown queue {', '.join(unknown)}; choose from {', '.join(ALL_QUEUES)}")
    return list(dict.fromkeys(names))
