"""The dashboard's analyses computed when scores change, in a worker, never in a page request.

At the paper's full design and beyond (tens of thousands of scored runs) the report and its SPEC 6
analyses with 2,000 bootstrap resamples take seconds to compute. Every scoring of a run announces
itself (``scoring.signals.run_scored``); the receiver here queues one ``research.warm_dashboard``
task, which computes the default comparison's data into the shared cache and renders the default
view of the page's heavy parts (research.results.dashboard_page), so the next dashboard or API load
reads them. A burst of scorings (a replay's runs finishing one after another, a withdrawal
re-scoring every run) queues one task while one is waiting: the task clears its flag before it
reads the scores, so scores that change while it computes queue the next one.

Without a broker (``REDIS_URL`` unset: the embedded demo, tests) tasks would run inside the scoring
call, on every run, and nothing is shared between processes anyway: nothing is queued, and the
first page load computes, as before.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.core.cache import cache

logger = logging.getLogger("attune.research")

PENDING_KEY = "research:dashboard-warm-pending"
PENDING_SECONDS = 900  # a lost task (a worker killed mid-way) blocks the next one at most this long
WARM_CACHE_SECONDS = 24 * 3600  # the precomputed entry outlives a page's own: nothing else refreshes it


def schedule_warm_dashboard(sender: Any, run_id: int, **kwargs: Any) -> None:
    """Receiver of ``scoring.signals.run_scored``: queue one warm-up unless one is already waiting."""
    if warm_dashboard.app.conf.task_always_eager:
        return
    from collection.task_queue import enqueue

    if cache.add(PENDING_KEY, run_id, timeout=PENDING_SECONDS):
        enqueue(warm_dashboard)


@shared_task(name="research.warm_dashboard", ignore_result=True)
def warm_dashboard() -> int:
    """Compute the default comparison's report and analyses into the cache; returns its row count."""
    cache.delete(PENDING_KEY)  # from here on, a new score queues the next warm-up
    # Imported here: the dashboard's data layer (scipy among it) is the task's to load, not every command's.
    from django.http import QueryDict

    from research.results.dashboard_page import PARTS, rendered_part
    from research.results.evaluation import evaluation_data

    data = evaluation_data(cache_seconds=WARM_CACHE_SECONDS)
    for part in PARTS:  # the default view's HTML too, so the first page load after a change only reads
        rendered_part(data, QueryDict(), part, cache_seconds=WARM_CACHE_SECONDS)
    logger.info("dashboard: analyses of %d runs precomputed", len(data.runs))
    return len(data.runs)
