"""``/metrics``: what an operator watches, in the Prometheus text format (prometheus_client).

Where each figure comes from, so that any web process of any host answers for the whole deployment:

- computed at scrape time: the depth of each Celery queue (Redis ``LLEN``; 0 without Redis, where tasks
  run in-process) and export jobs by state (the database);
- kept in Redis by the workers and read at scrape time (scoring/ops_metrics.py): task runs by outcome and
  their durations per task; replay calls, failures and latency per provider;
- kept by the web processes of this host (prometheus_client's multiprocess mode, one directory per
  host, attune_site/gunicorn_conf.py): participant request latency and open reply streams.

Served to this machine (a scraper beside the web server, no proxy in between) or to a request carrying
``Authorization: Bearer $ATTUNE_METRICS_TOKEN``; anyone else gets a 403.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from attune_site import queues
from datasets.models import ExportJob
from scoring import ops_metrics

logger = logging.getLogger("attune.metrics")

LOOPBACK = frozenset({"127.0.0.1", "::1"})


def may_scrape(request: HttpRequest) -> bool:
    """A request from this machine that no proxy forwarded, or one with the metrics token."""
    token = settings.ATTUNE_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return True
    return request.META.get("REMOTE_ADDR") in LOOPBACK and "HTTP_X_FORWARDED_FOR" not in request.META


def queue_depths() -> dict[str, int]:
    """Messages waiting in each queue (not the ones a worker holds)."""
    if not settings.REDIS_URL:
        return dict.fromkeys(queues.ALL_QUEUES, 0)
    import redis

    with redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2) as client:
        pipe = client.pipeline(transaction=False)
        for name in queues.ALL_QUEUES:
            pipe.llen(name)
        return dict(zip(queues.ALL_QUEUES, (int(n) for n in pipe.execute()), strict=True))


def _labels(pairs: tuple[tuple[str, str], ...], names: list[str]) -> list[str]:
    found = dict(pairs)
    return [found.get(name, "") for name in names]


class DeploymentCollector:
    """The figures computed or read at scrape time (see the module docstring)."""

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("attune_queue_depth", "Tasks waiting in each Celery queue", labels=["queue"])
        try:
            for name, count in queue_depths().items():
                depth.add_metric([name], count)
        except Exception as exc:  # the scrape still answers; the missing figure says Redis is away
            logger.warning("metrics: could not read the queue depths from Redis: %s", exc)
        yield depth

        jobs = GaugeMetricFamily("attune_export_jobs", "Export jobs by state", labels=["state"])
        counts = dict.fromkeys(ExportJob.Status.values, 0)
        for row in ExportJob.objects.values("status").order_by().annotate(n=Count("pk")):
            counts[row["status"]] = row["n"]
        for state, count in counts.items():
            jobs.add_metric([state], count)
        yield jobs

        tally = ops_metrics.tally()
        try:
            yield from self._counter(tally, ops_metrics.TASK_RUNS, "attune_task_runs", "Task runs", ["task", "outcome"])
            yield self._histogram(tally, ops_metrics.TASK_DURATION, "attune_task_duration_seconds", "Task run time")
            yield from self._counter(
                tally, ops_metrics.REPLAY_CALLS, "attune_replay_calls", "Provider requests of replays", ["provider"]
            )
            yield from self._counter(
                tally,
                ops_metrics.REPLAY_CALL_FAILURES,
                "attune_replay_call_failures",
                "Replay provider requests that got no reply",
                ["provider"],
            )
            yield self._histogram(
                tally,
                ops_metrics.REPLAY_CALL_LATENCY,
                "attune_replay_call_seconds",
                "Replay provider request latency",
                "provider",
            )
        except Exception as exc:
            logger.warning("metrics: could not read the workers' tallies from Redis: %s", exc)

    @staticmethod
    def _counter(tally: Any, key: str, name: str, doc: str, labels: list[str]) -> Iterator[Metric]:
        family = CounterMetricFamily(name, doc, labels=labels)
        for pairs, value in sorted(tally.counters(key).items()):
            family.add_metric(_labels(pairs, labels), value)
        yield family

    @staticmethod
    def _histogram(tally: Any, key: str, name: str, doc: str, label: str = "task") -> Metric:
        family = HistogramMetricFamily(name, doc, labels=[label])
        for pairs, histogram in sorted(tally.histograms(key).items()):
            family.add_metric(_labels(pairs, [label]), histogram.cumulative(), sum_value=histogram.total)
        return family


def exposition() -> bytes:
    """The whole scrape: this host's web processes, then the deployment-wide figures."""
    own = CollectorRegistry()
    own.register(DeploymentCollector())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        web = CollectorRegistry()
        multiprocess.MultiProcessCollector(web)
        return generate_latest(web) + generate_latest(own)
    return generate_latest(REGISTRY) + generate_latest(own)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        return HttpResponse(
            "Metrics are served to this machine, or with Authorization: Bearer $ATTUNE_METRICS_TOKEN.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
