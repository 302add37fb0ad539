"""attune migrate: Django's migrate, one host at a time (a PostgreSQL advisory lock, attune_site/schema_state.py)."""

from typing import Any

from django.core.management.commands import migrate

from attune_site.schema_state import migration_lock


class Command(migrate.Command):
    help = migrate.Command.help + " Concurrent runs wait for each other (PostgreSQL advisory lock)."

    def handle(self, *args: Any, **options: Any) -> None:
        with migration_lock(options["database"]):
            super().handle(*args, **options)
