"""The Celery application. Without REDIS_URL, tasks run eagerly in the calling process.

Every worker runs the replay sweeper in its main process (``scoring.run_control.Sweeper``):
it requeues conversations whose worker died once their leases lapse, so no
conversation waits for the broker's visibility timeout.

A worker imports litellm before it takes its first task (``worker_init``, in the
main process, so prefork children inherit it): left to the first model call, the
import (about 6 s of CPU here) delayed the first run's first request, once in every
child process. Only the import: the web server's ``attune_site.warmup`` also runs a
mock completion on a thread of its own, which must not happen before a fork.
"""

import logging
import os
import time
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")

app = Celery("attune")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_sweepers: list[Any] = []
logger = logging.getLogger("attune.worker")


@worker_init.connect
def load_model_client(**_: Any) -> None:
    """Import and configure litellm now, not inside the first replay (it starts no thread: safe to fork after)."""
    from attunebench.replay.llm import load_litellm

    started = time.perf_counter()
    try:
        load_litellm()
    except Exception:  # the worker still scores and exports; the first model call reports the import's failure
        logger.warning("litellm could not be loaded at start-up; replays will try again", exc_info=True)
        return
    logger.info("litellm loaded in %.1f s, before the first task", time.perf_counter() - started)


@worker_ready.connect
def start_sweeper(**_: Any) -> None:
    from scoring.run_control import Sweeper

    sweeper = Sweeper()
    sweeper.start()
    _sweepers.append(sweeper)


@worker_shutdown.connect
def stop_sweeper(**_: Any) -> None:
    while _sweepers:
        _sweepers.pop().stop()
