"""attune worker: Celery workers for evaluation runs, exports and the work participants wait on.

By default one command starts two workers: the bulk worker in this process (replays, exports, run scoring)
and, beside it, a worker of its own for the ``interactive`` queue (attune_site/queues.py), so a replay of
thousands of conversations never holds up a participant's suggested rewrite. If the interactive worker
dies, this one stops too (a supervisor restarts both) rather than run on with nobody serving participants.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from attune_site import queues

logger = logging.getLogger("attune.worker")


def interactive_worker_command(concurrency: int, loglevel: str) -> list[str]:
    """The reserved worker: threads (a rewrite waits on a model, not the CPU), the interactive queue only."""
    return [
        sys.executable,
        "-m",
        "attune_site.cli",
        "worker",
        f"--queues={queues.INTERACTIVE}",
        "--pool=threads",
        f"--concurrency={concurrency}",
        "--interactive-concurrency=0",
        "--hostname=interactive@%h",
        f"--loglevel={loglevel}",
    ]


class ReservedWorker:
    """The interactive worker as a child process; its unexpected exit stops this process too."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = threading.Event()

    def start(self) -> None:
        self.process = subprocess.Popen(self.command)
        threading.Thread(target=self._watch, name="interactive-worker-watch", daemon=True).start()

    def _watch(self) -> None:
        assert self.process is not None
        code = self.process.wait()
        if not self.stopping.is_set():
            logger.error(
                "the interactive worker (pid %s) exited with code %s: stopping this worker too, so the "
                "supervisor restarts both and participants' work is served again",
                self.process.pid,
                code,
            )
            os.kill(os.getpid(), signal.SIGTERM)

    def stop(self, timeout: float = 30) -> None:
        self.stopping.set()
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # Celery's warm shutdown: tasks in hand finish first
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Command(BaseCommand):
    help = (
        "Start Celery workers: one for replays, exports and run scoring (--queues), and one of its own for the "
        "work participants wait on (the interactive queue, --interactive-concurrency). Needs REDIS_URL; "
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
            default=",".join(queues.BULK_WORKER_QUEUES),
            help=f"comma-separated queues this worker consumes (default {','.join(queues.BULK_WORKER_QUEUES)}: "
            "replays and exports, run scoring, and any task a previous release queued); "
            f"a host serving participants' work only takes --queues {queues.INTERACTIVE} --interactive-concurrency 0",
        )
        parser.add_argument(
            "--interactive-concurrency",
            type=int,
            default=2,
            help="threads of the worker started beside this one for the interactive queue (rewrites, safety "
            "alerts), 0 to start none (another host serves that queue); default 2. Ignored when --queues "
            "already names the interactive queue",
        )
        parser.add_argument("--hostname", default="", help="Celery node name (default celery@<host>)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.REDIS_URL:
            raise CommandError(
                "REDIS_URL is not set: there is no broker to take tasks from. "
                "Set REDIS_URL=redis://host:6379/0, or run without a worker (tasks run in-process)."
            )
        try:
            consumed = queues.parse_queues(options["queues"])
        except ValueError as exc:
            raise CommandError(f"--queues {options['queues']!r}: {exc}") from exc
        reserved_threads = options["interactive_concurrency"]
        if reserved_threads < 0:
            raise CommandError("--interactive-concurrency must be 0 or more")
        from attune_site.celery import app
        from attune_site.schema_state import SchemaBehind, refuse_to_start_behind

        try:
            refuse_to_start_behind("attune worker")
        except SchemaBehind as exc:
            raise CommandError(str(exc)) from exc
        reserved = None
        if reserved_threads and queues.INTERACTIVE not in consumed:
            reserved = ReservedWorker(interactive_worker_command(reserved_threads, options["loglevel"]))
            reserved.start()
        argv = [
            "worker",
            f"--concurrency={options['concurrency']}",
            f"--pool={options['pool']}",
            f"--loglevel={options['loglevel']}",
            f"--queues={','.join(consumed)}",
        ]
        if options["hostname"]:
            argv.append(f"--hostname={options['hostname']}")
        try:
            app.worker_main(argv)
        finally:
            if reserved is not None:
                reserved.stop()
