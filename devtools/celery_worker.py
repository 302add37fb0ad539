"""A Celery worker for integration tests: the project's app with a short broker visibility timeout.

Redis redelivers an unacknowledged message only after the visibility timeout
(an hour in settings). A test that SIGKILLs a worker cannot wait that long, so
this entry point shortens it (ATTUNE_VISIBILITY_TIMEOUT seconds) and otherwise
runs exactly ``attune worker``'s app, solo pool, one task at a time.

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
    from attune_site.env import env_int

    prepare_data_dir()
    django.setup()
    from attune_site.celery import app

    timeout = env_int("ATTUNE_VISIBILITY_TIMEOUT", 0, minimum=1)
    if timeout:
        app.conf.broker_transport_options = {
            **(app.conf.broker_transport_options or {}),
            "visibility_timeout": timeout,
        }
    app.worker_main(
        [
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            *(sys.argv[1:] if argv is None else argv),
        ]
    )


if __name__ == "__main__":
    main()
