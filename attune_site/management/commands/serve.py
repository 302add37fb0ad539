"""attune serve: the site under gunicorn's threaded workers, the configuration docker-compose runs too."""

import argparse
import os
import sys
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from attune_site.identity import DeploymentIdentityError, verify_deployment_identity
from attune_site.schema_state import SchemaBehind, refuse_to_start_behind
from attune_site.serving import stream_slots, web_threads, web_workers


class Command(BaseCommand):
    help = (
        "Serve the Attune site (participant pages, researcher dashboards, API) with gunicorn's threaded workers, "
        "static files by WhiteNoise. Refuses to start on a schema behind the code unless --migrate applies the "
        "pending migrations first. Sizes: ATTUNE_WEB_WORKERS, ATTUNE_WEB_THREADS."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
        parser.add_argument(
            "--migrate",
            action="store_true",
            help="apply pending migrations first (one host at a time); without it a schema behind the code is refused",
        )
        # Kept so older scripts still run: not migrating is the default now.
        parser.add_argument("--no-migrate", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["migrate"] and not options["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        try:
            refuse_to_start_behind("attune serve")
            verify_deployment_identity()  # said here, once, before gunicorn's workers each refuse to boot
        except SchemaBehind as exc:
            raise CommandError(str(exc)) from exc
        except DeploymentIdentityError as exc:
            raise CommandError(str(exc)) from None
        connections.close_all()  # this process becomes gunicorn's master, which needs no connection
        address = f"{options['host']}:{options['port']}"
        workers, threads = web_workers(), web_threads()
        self.stdout.write(
            f"Attune is serving on http://{address}/  ({workers} worker process(es) × {threads} threads, "
            f"up to {stream_slots(threads)} streaming replies each; Ctrl+C stops it)"
        )
        self.stdout.flush()
        # The same gunicorn configuration as the Docker image, in place of this process (signals reach it directly).
        command = [sys.executable, "-m", "gunicorn", "--config", "python:attune_site.gunicorn_conf", "--bind", address]
        os.execv(sys.executable, command)
