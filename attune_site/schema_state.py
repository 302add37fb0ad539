"""Whether the database schema is as new as this release's code, and one migration at a time.

New code on an old schema passes Django's checks and fails on its first query against a column that does not
exist yet, in the middle of a participant's page or a replay. So the web server and the workers look before
they start, and refuse with the command that fixes it. A schema *ahead* of the code is fine: migrations are
written expand/contract (docs/upgrading.md), so the previous release runs on the next one's schema while
hosts are upgraded one by one.

Two hosts migrating at once collided ("relation already exists", one of them exiting): ``attune migrate``
takes a PostgreSQL advisory lock for the whole run, so the second waits, then finds nothing left to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

# The advisory lock's key (any 64-bit number the application uses for nothing else): "attune migrate".
MIGRATION_LOCK_KEY = 0x6174_746E_6D69_67


def pending_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Migrations this release has that the database has not applied, as ``app.name``, in order."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]


class SchemaBehind(ImproperlyConfigured):
    """The database lacks migrations this release's code relies on."""


def refuse_to_start_behind(what: str, alias: str = DEFAULT_DB_ALIAS) -> None:
    """Raise :class:`SchemaBehind`, naming the fix, when the schema is older than the code."""
    pending = pending_migrations(alias)
    if pending:
        shown = ", ".join(pending[:3]) + (f" and {len(pending) - 3} more" if len(pending) > 3 else "")
        raise SchemaBehind(
            f"{what} will not start: the database schema is behind this release ({len(pending)} migration(s) "
            f"not applied: {shown}). Run `attune migrate` first (docs/upgrading.md)."
        )


@contextmanager
def migration_lock(alias: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Hold the migration advisory lock for the block (PostgreSQL); other databases have one writer anyway."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])
