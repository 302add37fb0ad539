"""CI refuses a migration the previous release's code cannot run against (attune_site/migration_safety.py):
a new NOT NULL column without a database default, a rename or a drop outside the two-release rule."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from django.db.migrations.loader import MigrationLoader

from attune_site import migration_safety as safety

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "unsafe_migrations" / "0013_deliberately_unsafe.py"


def load_fixture() -> tuple[object, object]:
    """The deliberately unsafe migration, and the project state just before it."""
    spec = importlib.util.spec_from_file_location("deliberately_unsafe", FIXTURE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    migration = module.Migration("0013_deliberately_unsafe", "collection")
    state = MigrationLoader(None, ignore_no_migrations=True).project_state(migration.dependencies[0])
    return migration, state


def test_every_migration_of_the_project_keeps_expand_contract_or_is_reviewed():
    findings = list(safety.project_findings())
    assert safety.unreviewed(findings) == [], "\n".join(
        f"{finding.key}: {finding.why}" for finding in safety.unreviewed(findings)
    )


def test_the_allow_list_excuses_only_what_is_still_found():
    assert safety.stale_reviews(list(safety.project_findings())) == []


def test_a_deliberately_unsafe_migration_fails_the_check_operation_by_operation():
    migration, state = load_fixture()
    findings = safety.unsafe_operations(migration, state)
    assert [finding.operation for finding in findings] == [
        "AddField NOT NULL study.review_note",
        "AlterField NOT NULL study.max_participants",
        "RenameField turn.user_message -> message",
        "RemoveField study.created_at",
        "RenameModel topic -> subject",
    ]
    # none is excused: in the project's migrations folder it would fail the check above
    assert safety.unreviewed(findings) == findings
    assert "db_default" in findings[0].why and "a release after" in findings[3].why


def test_a_reviewed_operation_is_excused_and_only_that_one(monkeypatch):
    migration, state = load_fixture()
    findings = safety.unsafe_operations(migration, state)
    monkeypatch.setitem(
        safety.REVIEWED, "collection.0013_deliberately_unsafe: RemoveField study.created_at", "unused since 2027.1"
    )
    assert [finding.operation for finding in safety.unreviewed(findings)] == [
        "AddField NOT NULL study.review_note",
        "AlterField NOT NULL study.max_participants",
        "RenameField turn.user_message -> message",
        "RenameModel topic -> subject",
    ]


def test_the_alter_field_check_needs_the_state_before_and_skips_without_it():
    migration, _ = load_fixture()
    operations = [finding.operation for finding in safety.unsafe_operations(migration)]
    assert "AlterField NOT NULL study.max_participants" not in operations
    assert "AddField NOT NULL study.review_note" in operations
