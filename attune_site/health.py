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

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse

from attune_site.env import env_list

PROBE_URL = "http://127.0.0.1:8000/healthz"


def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return JsonResponse({"status": "error", "database": str(exc.__class__.__name__)}, status=503)
    return JsonResponse({"status": "ok"})


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
