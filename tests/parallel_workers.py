"""Gives each pytest-xdist worker its own Redis database and data directory, before Django reads its settings.

Loaded with ``-p tests.parallel_workers`` (pyproject's addopts), so it runs before pytest-django imports the
settings. pytest-django already gives each worker its own test database (``test_<name>_gw<N>``); the rest of
what a test may share with a neighbour is here:

- Redis: worker N uses database ``(D - N) mod 16`` of the REDIS_URL's database D, so the broker queues, the
  call cache, rate-limit windows, sessions and journals of two workers never meet (Celery's broadcasts carry
  the database number in their channel names, so a worker's control commands stay in its database too);
- the data directory: ``$ATTUNE_DATA_DIR/gwN`` (``data/test/gwN`` when unset), with its own keys, exports
  and run files.

Without xdist (one process) nothing changes.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16  # Redis's default number of logical databases


def worker_index() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def redis_url_for_worker(url: str, index: int) -> str:
    parts = urlsplit(url)
    path = parts.path.strip("/")
    base = int(path) if path.isdigit() else 0
    return urlunsplit(parts._replace(path=f"/{(base - index) % REDIS_DATABASES}"))


def _isolate_this_worker() -> None:
    index = worker_index()
    if index is None:
        return
    if index >= REDIS_DATABASES:
        raise RuntimeError(f"at most {REDIS_DATABASES} test workers: each needs a Redis database of its own")
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = redis_url_for_worker(os.environ["REDIS_URL"], index)
    # Unset, the make target's default (data/test in the checkout) stands in for it.
    data_dir = os.environ.get("ATTUNE_DATA_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(__file__)), "data", "test"
    )
    os.environ["ATTUNE_DATA_DIR"] = os.path.join(data_dir, f"gw{index}")


_isolate_this_worker()
