"""Upgrades that cannot break a running study: web, worker and ``attune serve`` refuse a schema behind the code,
naming ``attune migrate``; ``attune serve`` migrates only when asked; concurrent migrations wait for each other."""

from __future__ import annotations

import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from attune_site import schema_state
from tests.migrations import unapply

NEWEST_SCORING = "0010_run_conversation_paid_key"


@pytest.mark.django_db(transaction=True)
def test_web_worker_and_serve_refuse_a_schema_behind_the_code_and_name_attune_migrate(schema_restored, settings):
    assert schema_state.pending_migrations() == []
    schema_state.refuse_to_start_behind("the web server")  # the newest schema: nothing to refuse

    unapply("scoring", NEWEST_SCORING)  # and whatever follows it in the plan
    assert f"scoring.{NEWEST_SCORING}" in schema_state.pending_migrations()
    with pytest.raises(schema_state.SchemaBehind, match=r"the web server will not start.*Run `attune migrate` first"):
        schema_state.refuse_to_start_behind("the web server")
    with pytest.raises(CommandError, match=r"attune serve will not start.*Run `attune migrate` first"):
        call_command("serve", port=1)
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"  # the check comes before any broker is contacted
    with pytest.raises(CommandError, match=r"attune worker will not start.*Run `attune migrate` first"):
        call_command("worker")


@pytest.mark.django_db(transaction=True)
def test_serve_applies_pending_migrations_only_when_asked(schema_restored, monkeypatch):
    from attune_site.management.commands import serve

    started: list[list[str]] = []
    # The step after the checks replaces this process with gunicorn: record it instead.
    monkeypatch.setattr(serve.os, "execv", lambda path, argv: started.append(argv))
    unapply("scoring", NEWEST_SCORING)
    with pytest.raises(CommandError):
        call_command("serve", port=1)
    assert started == [] and f"scoring.{NEWEST_SCORING}" in schema_state.pending_migrations()

    call_command("serve", port=1, migrate=True)
    assert schema_state.pending_migrations() == []
    assert len(started) == 1 and "gunicorn" in started[0] and "127.0.0.1:1" in started[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the advisory lock is PostgreSQL's")
def test_a_second_migrate_waits_for_the_first_one_to_finish():
    holder_done = threading.Event()
    order: list[str] = []

    def second_migrate() -> None:
        try:
            call_command("migrate", interactive=False, verbosity=0)
            order.append("second migrate finished")
        finally:
            connections.close_all()

    with schema_state.migration_lock():  # a first host migrating
        thread = threading.Thread(target=second_migrate)
        thread.start()

        def waiting_on_the_lock() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = %s",
                    [schema_state.MIGRATION_LOCK_KEY & 0xFFFFFFFF],
                )
                return cursor.fetchone()[0] == 1

        from tests.polling import wait_for

        wait_for(waiting_on_the_lock, 60, "the second migrate to wait on the advisory lock")
        order.append("first host done")
        holder_done.set()
    thread.join(60)
    assert order == ["first host done", "second migrate finished"]
