"""A Celery worker for integration tests and benchmarks: ``attune worker``'s app, solo pool, one task at a time.

The same settings as a real worker (a test shortens ATTUNE_REPLAY_LEASE_SECONDS
and ATTUNE_VISIBILITY_TIMEOUT through the environment), consuming every queue in its one
pool (``attune worker`` gives the interactive queue a pool of its own); the solo pool
keeps the worker a single process, so a SIGKILL kills all of it.

Run: ``python -m devtools.celery_worker --hostname=w1@%h``
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import django

    from attune_site.datadir import prepare_data_dir

    prepare_data_dir()
    django.setup()
    from attune_site.celery import app

    app.worker_main(
        [
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--queues=interactive,bulk,finalize,celery",
            *(sys.argv[1:] if argv is None else argv),
        ]
    )


if __name__ == "__main__":
    main()
