"""Runs replayed in background threads of the web process: the embedded default's stand-in for Celery workers.

Without REDIS_URL, Celery runs a task where it is sent (eagerly), so a run
started from the launcher or the API used to be replayed inside the request,
one conversation after another: the browser waited for the whole run and a
model capped at eight calls in flight saw about three. Here the request only
prepares the run; its conversations are replayed by a pool of threads of this
process, as many as the run's models may have calls in flight (the lowest
in-flight ceiling of the model and its judge: the registry's
``max_concurrency``, at most ATTUNE_REPLAY_CONCURRENCY), so the provider's cap,
not the replay, sets the pace. Each thread runs the very task a Celery worker
runs (``replay_service.do_replay_conversation``: lease, replay, store), all of
them on the process's one replay loop and scheduler, which keep the provider's
caps; the thread that stores the last conversation scores the run. Progress
is the run's own counters, which the run page polls as for a worker's run.

Should the process stop mid-run, the conversations it held stall (their
leases lapse) and the run page offers to requeue them; finished ones are kept
and paid answers are in the call cache.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from attunebench.replay.scheduler import in_flight_ceiling
from scoring.models import EvaluationRun
from scoring.replay_service import ReplayRefused, do_finalize_run, do_replay_conversation, registry_spec

logger = logging.getLogger("attune.replay")

#: Times a conversation is claimed again after the database dropped its connection (Celery's task retries too).
DATABASE_ATTEMPTS = 3


def conversation_threads(run: EvaluationRun, pending: int) -> int:
    """How many of the run's conversations to replay at once: its in-flight ceiling, never more than it has.

    Each conversation has at most a few calls in flight (a turn's calls are
    sequential but for the three after the analysis), so the ceiling's worth of
    conversations keeps the provider's cap full. Offline baselines make no calls
    to wait on: one thread.
    """
    try:
        specs = [registry_spec(run.evaluated_model)]
        if run.judge_model is not None:
            specs.append(registry_spec(run.judge_model))
    except ReplayRefused:
        return 1  # the replay fails each conversation with the reason; no need to hurry
    live = [s for s in specs if not s.is_offline]
    if not live:
        return 1
    ceiling = min(in_flight_ceiling(s.limits, settings.ATTUNE_REPLAY_CONCURRENCY) for s in live)
    return max(1, min(ceiling, pending))


class EmbeddedRunner:
    """Replays runs' conversations in thread pools of this process; ``wait`` joins what was started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: list[Future[None]] = []

    def start(self, run_id: int, run_conversation_ids: Sequence[int]) -> None:
        """Replay these conversations of the run in the background; returns at once."""
        ids = list(run_conversation_ids)
        run = EvaluationRun.objects.select_related("evaluated_model", "judge_model").get(pk=run_id)
        pool = ThreadPoolExecutor(
            max_workers=conversation_threads(run, len(ids)), thread_name_prefix=f"attune-run-{run_id}"
        )
        futures = [pool.submit(_replay_one, pk) for pk in ids] if ids else [pool.submit(_finalize, run_id)]
        pool.shutdown(wait=False)  # its threads end once the queue is empty
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()] + futures

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every conversation started so far has been replayed (and its run scored); True if so."""
        with self._lock:
            futures = list(self._futures)
        _, not_done = wait_for_futures(futures, timeout=timeout)
        return not not_done


@functools.cache
def embedded_runner() -> EmbeddedRunner:
    """This process's runner (one per process: its threads die with it)."""
    return EmbeddedRunner()


def _replay_one(run_conversation_id: int) -> None:
    """One conversation, as the Celery task does it: the one that leaves none open scores the run."""
    close_old_connections()
    try:
        for attempt in range(1, DATABASE_ATTEMPTS + 1):
            try:
                summary = do_replay_conversation(run_conversation_id)
                break
            except (OperationalError, InterfaceError):
                # The database dropped the connection (the lease was given back): reconnect and claim it again,
                # as Celery retries the task; its answers so far are in the call cache.
                connection.close()
                if attempt == DATABASE_ATTEMPTS:
                    raise
        if summary.get("open") == 0:
            do_finalize_run(summary["run"])
    except Exception:
        # Its lease lapses and the run page offers to requeue it; nothing is lost but this attempt.
        logger.exception("background replay of run conversation %s failed", run_conversation_id)
    finally:
        connection.close()


def _finalize(run_id: int) -> None:
    close_old_connections()
    try:
        do_finalize_run(run_id)
    except Exception:
        logger.exception("scoring run %s in the background failed", run_id)
    finally:
        connection.close()
