"""Stepping one migration back and forth in tests, when sibling branches of an app were merged.

Django unapplies a migration against the state of everything before it in the full
forward plan. On SQLite a reverse that rebuilds a table builds it from that state, so
a sibling branch applied later in the plan would lose its columns (and an earlier one
unapplied in the same plan would get them back). Unapplying, one at a time and in
reverse plan order, the migration under test and everything after it keeps every state
true to the database.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def unapply(app_label: str, name: str) -> Any:
    """Unapply ``app_label.name`` and every migration after it in the forward plan; return the historical
    apps of what is left applied."""
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    forward = executor.migration_plan(graph.leaf_nodes(), clean_start=True)
    full_plan = [(migration.app_label, migration.name) for migration, _ in forward]
    applied = set(executor.loader.applied_migrations)
    going = [key for key in full_plan[full_plan.index((app_label, name)) :] if key in applied]
    for key in reversed(going):
        step = MigrationExecutor(connection)
        step.migrate([], plan=[(step.loader.graph.nodes[key], True)])
    return MigrationExecutor(connection).loader.project_state(sorted(applied - set(going))).apps


def migrate_to_newest() -> Any:
    """Apply every migration; return the historical apps of the newest state."""
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate(leaves)
    return MigrationExecutor(connection).loader.project_state(leaves).apps
