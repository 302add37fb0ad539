"""Which migration operations the previous release's code cannot run against, for CI and review.

An upgrade migrates the database while the previous release still serves participants and replays
(docs/upgrading.md). Its code must keep working on the new schema, so migrations are expand/contract:

- a new NOT NULL column carries a database default (``db_default=``), or is added nullable, filled, and
  made NOT NULL (with a ``db_default``) in a later release: the old code's inserts name no such column;
- a column or table is renamed or dropped only in the release *after* the one whose code stopped reading
  and writing it (the two-release rule): the old code still names it until then.

:func:`unsafe_operations` finds operations that break this. One that keeps the rule anyway (a drop whose
column the previous release no longer used, say) is listed in :data:`REVIEWED` with the reason: that
entry is the review. Migrations released before the rule are :data:`HISTORIC_MIGRATIONS`. Every entry
must match a finding, so the lists cannot outlive what they excuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import migrations
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.migration import Migration
from django.db.migrations.state import ProjectState
from django.db.models import NOT_PROVIDED

# The apps whose migrations this project writes (Django's own and third parties' are theirs to keep safe).
OWN_APPS = ("attune_site", "collection", "annotation", "datasets", "scoring", "research")

# Migrations released before upgrades were expand/contract: no release that predates them runs any more,
# so what they did cannot break a running study now. Nothing is added here: a new migration keeps the rule.
HISTORIC_MIGRATIONS = frozenset(
    {
        "collection.0003_participant_pending_pre_panas",
        "collection.0005_completeness_and_identity_screen",
        "collection.0005_study_limits_and_live_budget",
        "collection.0005_study_link_tokens_hashed",
        "collection.0005_turn_skipped_comparisons",
        "collection.0008_platform_entry_and_live_spend",
        "collection.0008_quality_control_settings_checks_decisions",
        "collection.0008_study_setup_status_pool_quotas_preview",
        "datasets.0002_dataset_version_includes_unfinished",
        "datasets.0004_content_hash_of_the_default_export",
        "scoring.0006_run_conversation_leases",
        "scoring.0007_honest_call_accounting",
        "scoring.0009_calls_reused",
        "scoring.0010_run_conversation_paid_key",
    }
)

# One reviewed operation of a newer migration ("app.migration: finding", as Finding.key prints it) -> why it
# keeps the two-release rule, e.g. "RemoveField study.legacy_flag": "no code reads it since release 2027.1".
REVIEWED: dict[str, str] = {}


@dataclass(frozen=True)
class Finding:
    app_label: str
    migration: str
    operation: str  # e.g. "AddField NOT NULL runconversation.paid_key"
    why: str

    @property
    def key(self) -> str:
        return f"{self.app_label}.{self.migration}: {self.operation}"


def _not_null_without_db_default(field: Any) -> bool:
    return not field.null and not field.many_to_many and field.db_default is NOT_PROVIDED


def _created_here(migration: Migration, model_name: str) -> bool:
    """A model created by the same migration has no rows and no old code using it yet."""
    return any(
        isinstance(op, migrations.CreateModel) and op.name_lower == model_name.lower() for op in migration.operations
    )


def unsafe_operations(migration: Migration, state_before: ProjectState | None = None) -> list[Finding]:
    """The operations of ``migration`` that the previous release's code cannot run against.

    ``state_before`` (the project state just before the migration) lets an ``AlterField`` that turns a
    nullable column NOT NULL be told from one that was NOT NULL already; without it that check is skipped.
    """
    found: list[Finding] = []

    def flag(operation: str, why: str) -> None:
        found.append(Finding(migration.app_label, migration.name, operation, why))

    for op in migration.operations:
        if isinstance(op, migrations.AddField):
            if _not_null_without_db_default(op.field) and not _created_here(migration, op.model_name):
                flag(
                    f"AddField NOT NULL {op.model_name_lower}.{op.name_lower}",
                    "the previous release inserts rows without this column: give it db_default= or add it nullable",
                )
        elif isinstance(op, migrations.AlterField) and state_before is not None:
            model = state_before.models.get((migration.app_label, op.model_name_lower))
            old = model.fields.get(op.name) if model is not None else None
            if old is not None and old.null and _not_null_without_db_default(op.field):
                flag(
                    f"AlterField NOT NULL {op.model_name_lower}.{op.name_lower}",
                    "the previous release may still insert NULL here: give the column db_default= first",
                )
        elif isinstance(op, migrations.RemoveField):
            flag(
                f"RemoveField {op.model_name_lower}.{op.name_lower}",
                "the previous release still reads this column: drop it a release after the code stops using it",
            )
        elif isinstance(op, migrations.DeleteModel):
            flag(
                f"DeleteModel {op.name_lower}",
                "the previous release still queries this table: drop it a release after the code stops using it",
            )
        elif isinstance(op, migrations.RenameField):
            flag(
                f"RenameField {op.model_name_lower}.{op.old_name_lower} -> {op.new_name_lower}",
                "the previous release still names the old column: add the new one, copy, and drop the old "
                "one a release later",
            )
        elif isinstance(op, migrations.RenameModel):
            flag(
                f"RenameModel {op.old_name_lower} -> {op.new_name_lower}",
                "the previous release still names the old table: rename across two releases",
            )
    return found


def project_findings(loader: MigrationLoader | None = None) -> Iterator[Finding]:
    """Every finding in this project's own migrations, each judged against the state just before it."""
    loader = loader or MigrationLoader(None, ignore_no_migrations=True)
    plan: list[tuple[str, str]] = []
    for leaf in loader.graph.leaf_nodes():
        plan += [key for key in loader.graph.forwards_plan(leaf) if key not in plan]
    state = ProjectState(real_apps=loader.unmigrated_apps)
    for key in plan:
        migration = loader.graph.nodes[key]
        if migration.app_label in OWN_APPS:
            yield from unsafe_operations(migration, state)
        state = migration.mutate_state(state, preserve=False)


def excused(finding: Finding) -> bool:
    return f"{finding.app_label}.{finding.migration}" in HISTORIC_MIGRATIONS or finding.key in REVIEWED


def unreviewed(findings: list[Finding]) -> list[Finding]:
    """The findings neither historic nor reviewed: each one fails CI."""
    return [finding for finding in findings if not excused(finding)]


def stale_reviews(findings: list[Finding]) -> list[str]:
    """Allow-list entries that excuse nothing (a renamed migration, a fixed operation): the list stays minimal."""
    keys = {finding.key for finding in findings}
    migrations_found = {f"{finding.app_label}.{finding.migration}" for finding in findings}
    return sorted([key for key in REVIEWED if key not in keys] + list(HISTORIC_MIGRATIONS - migrations_found))
