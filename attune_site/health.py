"""Liveness and readiness for deployments: answers 200 only when the database answers.

``python -m attune_site.health`` is the container health check: it asks the web
process on this machine for ``/healthz`` over plain HTTP, naming as ``Host`` the
first of ``ATTUNE_ALLOWED_HOSTS``. Host validation stays exactly as strict for
every request (the probe names a host the site serves, it is not let through by
an exception), and ``/healthz`` alone is exempt from the HTTPS redirect
(settings), so the probe works whatever host the operator configures.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse

from attune_site.env import env_list

PROBE_URL = "http://127.0.0.1:8000/healthz"


def _redis_state() -> str:
    """ "ok", "not configured" (the embedded default), or why Redis cannot be reached."""
    if not settings.REDIS_URL:
        return "not configured"
    import redis

    try:
        with redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1) as client:
            client.ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        return f"unreachable ({type(exc).__name__})"
    return "ok"


def _workers_state() -> str:
    """How many Celery workers answer a ping within a second ("in-process" without a broker)."""
    if not settings.REDIS_URL:
        return "in-process"
    from attune_site.celery import app

    try:
        replies = app.control.ping(timeout=1.0) or []
    except Exception as exc:  # the broker is the Redis above: its state says why
        return f"unknown ({type(exc).__name__})"
    return f"{len(replies)} answering"


def healthz(request: HttpRequest) -> JsonResponse:
    """200 while the database answers (pages can be served), 503 otherwise; each dependency by name.

    Redis and the workers are reported, not required: without Redis pages keep working (the cache degrades,
    sessions live in the database) and work that needs a worker waits in its queue.
    """
    report: dict[str, str] = {}
    status = 200
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        report["database"] = "ok"
    except DatabaseError as exc:
        report["database"] = f"unreachable ({exc.__class__.__name__})"
        status = 503
    report["redis"] = _redis_state()
    # A broadcast ping holds the request for a second: asked for, from this machine only (an operator's probe).
    if request.GET.get("workers") == "1" and request.META.get("REMOTE_ADDR") in ("127.0.0.1", "::1"):
        report["workers"] = _workers_state()
    return JsonResponse({"status": "ok" if status == 200 else "error", **report}, status=status)


def probe_host(allowed_hosts: Sequence[str]) -> str:
    """A Host header the site accepts: the first allowed host.

    ``.example.org`` (the domain and its subdomains) gives ``example.org``; ``*`` gives ``localhost``.
    """
    for host in allowed_hosts:
        name = host.lstrip(".")
        if name and name != "*":
            return name
    return "localhost"


def main() -> int:
    """Exit 0 when the local web process answers ``/healthz`` with 200, else 1 with the reason on stderr."""
    host = probe_host(env_list("ATTUNE_ALLOWED_HOSTS", ["localhost"]))
    request = urllib.request.Request(PROBE_URL, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        print(f"healthz: {PROBE_URL} unreachable: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"healthz: {PROBE_URL} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
