"""attune worker: a Celery worker for evaluation runs and background exports."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Start a Celery worker that executes evaluation runs, scoring and exports. Needs REDIS_URL; "
        "without it, tasks already run inside the process that starts them and no worker is needed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--concurrency", type=int, default=2, help="worker processes, or threads with --pool threads (default 2)"
        )
        parser.add_argument(
            "--pool",
            choices=["prefork", "threads", "solo"],
            default="prefork",
            help="prefork (default): one conversation at a time per process; threads: many conversations at once "
            "in one process, their calls sharing its event loop and ATTUNE_REPLAY_CONCURRENCY (e.g. --pool threads "
            "--concurrency 32 for replays of slow models)",
        )
        parser.add_argument("--loglevel", default="INFO", help="log level (default INFO)")
        parser.add_argument(
            "--queues",
            default="celery,finalize",
            help="comma-separated queues to consume (default celery,finalize: conversations and run scoring; "
            "a worker given only finalize scores finished runs while others replay)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.REDIS_URL:
            raise CommandError(
                "REDIS_URL is not set: there is no broker to take tasks from. "
                "Set REDIS_URL=redis://host:6379/0, or run without a worker (tasks run in-process)."
            )
        from attune_site.celery import app

        app.worker_main(
            [
                "worker",
                f"--concurrency={options['concurrency']}",
                f"--pool={options['pool']}",
                f"--loglevel={options['loglevel']}",
                f"--queues={options['queues']}",
            ]
        )
