"""Counters and latency histograms that worker processes keep for the operator's ``/metrics``.

Tasks and replays run in Celery workers, often on other hosts than the web server that answers a scrape,
and a worker's process may be gone by then. So their tallies live in Redis hashes (``attune:metrics:*``,
a few fields per task name and provider, never expiring: they are counters), which every web process
reads at scrape time (attune_site/metrics.py). Without Redis every task runs inside the web process, so an
in-process tally is the whole truth. A tally that cannot be written is dropped with a warning: a metric
never fails a task.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from attunebench.replay.llm import EMSpec
from attunebench.replay.transcript import CallRecord

logger = logging.getLogger("attune.metrics")

KEY_PREFIX = "attune:metrics:"
# Seconds: a rewrite or an export takes well under a second to minutes; a provider call 0.1 s to a minute.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

TASK_RUNS = "task_runs_total"
TASK_DURATION = "task_duration_seconds"
REPLAY_CALLS = "replay_calls_total"
REPLAY_CALL_FAILURES = "replay_call_failures_total"
REPLAY_CALL_LATENCY = "replay_call_seconds"

_SUM = "sum"
_COUNT = "count"


def _field(labels: Mapping[str, str], part: str = "") -> str:
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":")) + ("\x1f" + part if part else "")


@dataclass
class Histogram:
    """One label set's histogram: per-bucket counts (not cumulative), their sum and count."""

    buckets: list[float] = field(default_factory=lambda: [0.0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: float = 0.0

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus's ``le`` buckets, the last one ``+Inf``."""
        running, out = 0.0, []
        for bound, value in zip(LATENCY_BUCKETS, self.buckets, strict=True):
            running += value
            out.append((repr(bound), running))
        out.append(("+Inf", self.count))
        return out


def _bucket_of(value: float) -> int | None:
    for index, bound in enumerate(LATENCY_BUCKETS):
        if value <= bound:
            return index
    return None  # above the last bound: counted in +Inf only


class Tally:
    """Counters and histograms in Redis when configured, else in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._client: Any = None
        self._warned_at = 0.0

    def _redis(self) -> Any:
        if not settings.REDIS_URL:
            return None
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        return self._client

    def _write(self, increments: list[tuple[str, str, float]]) -> None:
        client = self._redis()
        if client is None:
            with self._lock:
                for name, key, amount in increments:
                    self._local[name][key] += amount
            return
        try:
            pipe = client.pipeline(transaction=False)
            for name, key, amount in increments:
                pipe.hincrbyfloat(KEY_PREFIX + name, key, amount)
            pipe.execute()
        except Exception as exc:  # reported (at most once a minute per process), never raised into a task
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                logger.warning("metrics: could not record %s in Redis (%s); these counts are lost", name, exc)

    def add(self, name: str, labels: Mapping[str, str], amount: float = 1.0) -> None:
        self._write([(name, _field(labels), amount)])

    def observe(self, name: str, labels: Mapping[str, str], seconds: float) -> None:
        increments = [(name, _field(labels, _SUM), seconds), (name, _field(labels, _COUNT), 1.0)]
        bucket = _bucket_of(seconds)
        if bucket is not None:
            increments.append((name, _field(labels, str(bucket)), 1.0))
        self._write(increments)

    def _read(self, name: str) -> dict[str, float]:
        client = self._redis()
        if client is None:
            with self._lock:
                return dict(self._local.get(name, {}))
        raw = client.hgetall(KEY_PREFIX + name)
        return {key.decode(): float(value) for key, value in raw.items()}

    def counters(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Each label set (sorted pairs) and its count."""
        return {tuple(sorted(json.loads(key).items())): value for key, value in self._read(name).items()}

    def histograms(self, name: str) -> dict[tuple[tuple[str, str], ...], Histogram]:
        found: dict[tuple[tuple[str, str], ...], Histogram] = defaultdict(Histogram)
        for key, value in self._read(name).items():
            labels_json, part = key.split("\x1f", 1)
            histogram = found[tuple(sorted(json.loads(labels_json).items()))]
            if part == _SUM:
                histogram.total = value
            elif part == _COUNT:
                histogram.count = value
            else:
                histogram.buckets[int(part)] = value
        return dict(found)


_tally = Tally()


def tally() -> Tally:
    return _tally


def provider_of(litellm_model: str) -> str:
    """The provider a litellm model name calls (``openai/gpt-4o`` -> ``openai``)."""
    return litellm_model.split("/", 1)[0] if "/" in litellm_model else litellm_model or "unknown"


def record_task_run(task: str, outcome: str, seconds: float | None) -> None:
    """One finished task run (``outcome``: success, failure, retry ...) and how long it took."""
    _tally.add(TASK_RUNS, {"task": task, "outcome": outcome})
    if seconds is not None:
        _tally.observe(TASK_DURATION, {"task": task}, seconds)


def providers_of(specs: Iterable[EMSpec | None]) -> dict[str, str]:
    """Model name (as a call record names it) -> the provider label of its calls."""
    return {
        spec.name: "offline" if spec.is_offline else provider_of(spec.litellm_model)
        for spec in specs
        if spec is not None
    }


def record_replay_calls(records: Iterable[CallRecord], providers: Mapping[str, str]) -> None:
    """The provider requests of one replayed conversation (answers reused from a cache were not sent)."""
    for record in records:
        if record.cached:
            continue
        labels = {"provider": providers.get(record.model) or provider_of(record.model)}
        _tally.add(REPLAY_CALLS, labels)
        if record.error:
            _tally.add(REPLAY_CALL_FAILURES, labels)
        if record.latency_s is not None:
            _tally.observe(REPLAY_CALL_LATENCY, labels, record.latency_s)
