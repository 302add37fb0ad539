"""The Celery application. Without REDIS_URL, tasks run eagerly in the calling process.

Every worker runs the replay sweeper in its main process (``scoring.run_control.Sweeper``):
it requeues conversations whose worker died once their leases lapse, so no
conversation waits for the broker's visibility timeout.
"""

import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")

app = Celery("attune")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_sweepers: list[Any] = []


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
