"""The Celery application. Without REDIS_URL, tasks run eagerly in the calling process.

Every worker runs the replay sweeper in its main process (``scoring.run_control.Sweeper``):
it requeues conversations whose worker died once their leases lapse, so no
conversation waits for the broker's visibility timeout.

A worker imports litellm before it takes its first task (``worker_init``, in the
main process, so prefork children inherit it): left to the first model call, the
import (about 6 s of CPU here) delayed the first run's first request, once in every
child process. Only the import: the web server's ``attune_site.warmup`` also runs a
mock completion on a thread of its own, which must not happen before a fork. The
heap is then frozen (``gc.freeze``, as Python's documentation advises before a fork):
a full collection walked litellm's objects for 0.2-0.3 s each time, the replay's
event loop stopped meanwhile.
"""

import logging
import os
import time
from typing import Any

from celery import Celery
from celery.signals import (
    before_task_publish,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

from attune_site import log_format, queues

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")

app = Celery("attune")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_sweepers: list[Any] = []
logger = logging.getLogger("attune.worker")


@worker_init.connect
def refuse_another_deployments_keys(**_: Any) -> None:
    """A worker whose keys are not the deployment's stops before it takes a task (attune_site/identity.py).

    SystemExit, not an exception: Celery logs and ignores a signal handler's exceptions.
    """
    from attune_site.identity import DeploymentIdentityError, verify_deployment_identity

    try:
        verify_deployment_identity()
    except DeploymentIdentityError as exc:
        logger.critical("%s", exc)
        raise SystemExit(f"attune worker refused to start: {exc}") from None


@worker_init.connect
def load_model_client(**_: Any) -> None:
    """Import and configure litellm now, not inside the first replay (it starts no thread: safe to fork after),
    then freeze the start-up heap so the collector's full passes no longer walk it (``attunebench.replay.heap``)."""
    from attunebench.replay.heap import freeze_startup_heap
    from attunebench.replay.llm import load_litellm

    started = time.perf_counter()
    try:
        load_litellm()
    except Exception:  # the worker still scores and exports; the first model call reports the import's failure
        logger.warning("litellm could not be loaded at start-up; replays will try again", exc_info=True)
    else:
        logger.info("litellm loaded in %.1f s, before the first task", time.perf_counter() - started)
    logger.info("%d start-up objects frozen out of the garbage collector's passes", freeze_startup_heap())


@worker_process_init.connect
def prepare_model_calls_where_tasks_run(**_: Any) -> None:
    """Each prefork child (and the solo pool's one process) gets ready for its first model call before its
    first task: its call courier, or without one a litellm warm-up."""
    from scoring.replay_service import prepare_model_calls

    prepare_model_calls()


def serves_interactive_only() -> bool:
    """Whether this worker consumes the interactive queue alone (``attune worker``'s reserved worker): it
    replays nothing, so it needs neither a sweeper nor a call courier."""
    return set(app.amqp.queues.consume_from or ()) == {queues.INTERACTIVE}


@worker_ready.connect
def start_sweeper(sender: Any = None, **_: Any) -> None:
    from scoring.replay_service import prepare_model_calls
    from scoring.run_control import Sweeper

    if serves_interactive_only():
        return
    sweeper = Sweeper()
    sweeper.start()
    _sweepers.append(sweeper)
    if type(getattr(sender, "pool", None)).__module__ == "celery.concurrency.thread":
        prepare_model_calls()  # the threads pool runs tasks in this process and sends no worker_process_init


@worker_shutdown.connect
def stop_sweeper(**_: Any) -> None:
    while _sweepers:
        _sweepers.pop().stop()


# --- The request id travels with the task (attune_site/log_format.py); runs and durations for /metrics ---
_task_started: dict[str, float] = {}
_task_request_ids: dict[str, Any] = {}


@before_task_publish.connect
def hand_on_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    current = log_format.request_id.get()
    if headers is not None and current != log_format.NO_REQUEST:
        headers[log_format.TASK_HEADER] = current


@task_prerun.connect
def note_task_start(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if not task_id:
        return
    _task_started[task_id] = time.perf_counter()
    handed = getattr(getattr(task, "request", None), log_format.TASK_HEADER, None)
    given = log_format.task_request_id({log_format.TASK_HEADER: handed})
    if given is not None:  # an eager task runs in its request's thread and keeps its id without this
        _task_request_ids[task_id] = log_format.request_id.set(given)


@task_postrun.connect
def record_task_run(task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any) -> None:
    from scoring.ops_metrics import record_task_run as record

    token = _task_request_ids.pop(task_id, None) if task_id else None
    if token is not None:
        log_format.request_id.reset(token)
    started = _task_started.pop(task_id, None) if task_id else None
    seconds = time.perf_counter() - started if started is not None else None
    record(getattr(task, "name", None) or "unknown", (state or "unknown").lower(), seconds)
