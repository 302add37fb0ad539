"""attune serve: the site on a local port, with static files served by WhiteNoise."""

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from attune_site.warmup import warm_up


class Command(BaseCommand):
    help = (
        "Serve the Attune site (participant pages, researcher dashboards, API). Applies pending migrations "
        "first. For production use gunicorn (see docker-compose.yml)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
        parser.add_argument("--no-migrate", action="store_true", help="do not apply pending migrations first")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        warm_up()  # heavy imports now, not on a participant's first request
        address = f"{options['host']}:{options['port']}"
        self.stdout.write(f"Attune is serving on http://{address}/  (Ctrl+C stops it)")
        call_command("runserver", address, use_reloader=False, use_threading=True, skip_checks=True)
