"""Leases on run conversations: one worker at a time, stalled ones shown and requeued, cancel/resume.

A lapsed lease is made by moving ``lease_expires_at`` into the past (the clock
is injected, nothing sleeps). Celery runs eagerly here (no REDIS_URL), so a
requeue replays at once; tests/web/test_replay_celery.py kills real workers.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from attunebench.replay.aio import run_sync
from attunebench.replay.run import make_replayer
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from scoring import replay_service, run_control
from scoring.models import EvaluatedModel, EvaluationRun, RunConversation, RunScore


def prepared_run(n: int = 2, model: str = "baseline:lexicon", seed: int = 8) -> tuple[EvaluationRun, list[int]]:
    docs = synth_conversations(n, seed=seed, min_turns=2, max_turns=2)
    assert import_documents([(d.conversationId, d) for d in docs]).ok
    run = replay_service.do_create_run(model, "default", conversation_ids=[d.conversationId for d in docs])
    return run, replay_service.do_prepare_run(run.pk)


def lapse(pk: int) -> None:
    """The holder stopped renewing (it died): its lease ended a minute ago."""
    RunConversation.objects.filter(pk=pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))


def replay_as(item: RunConversation, token: str) -> bool:
    """What the worker holding ``token`` does when its replay ends: store the output."""
    spec = replay_service.em_spec(item.run.evaluated_model)
    replayer = make_replayer(spec, replay_service.run_config(item.run))
    document = replay_service.load_canonical([item.conversation_id])[item.conversation_id]
    return replay_service._store(item, token, run_sync(replayer.replay(document)))


@pytest.mark.django_db
def test_of_two_claims_on_one_conversation_only_the_first_gets_it():
    _run, (first, _) = prepared_run()
    held = replay_service._claim(first, "worker-a")
    assert held is not None and held.lease_owner == "worker-a" and held.lease_expires_at > timezone.now()
    assert replay_service._claim(first, "worker-b") is None
    assert replay_service._not_claimed(first) == "leased by worker-a"
    assert replay_service.do_replay_conversation(first)["skipped"] == "leased by worker-a"
    assert replay_service.renew_lease(first, "worker-a") and not replay_service.renew_lease(first, "worker-b")
    assert RunConversation.objects.get(pk=first).attempts == 1


@pytest.mark.django_db
def test_a_lapsed_lease_is_taken_over_and_the_old_holder_can_no_longer_store():
    run, (first, _) = prepared_run()
    old = replay_service._claim(first, "worker-a")
    lapse(first)
    new = replay_service._claim(first, "worker-b")
    assert new is not None and new.attempts == 2
    assert not replay_service.renew_lease(first, "worker-a")  # the old holder learns it lost the lease
    assert not replay_service._store(old, "worker-a", _replayed(old))  # and cannot store
    assert replay_service._store(new, "worker-b", _replayed(new))
    stored = RunConversation.objects.get(pk=first)
    assert (stored.status, stored.lease_owner, stored.lease_expires_at) == ("done", "", None)
    run.refresh_from_db()
    assert run.conversations_done == 1  # counted once


def _replayed(item: RunConversation):
    spec = replay_service.em_spec(item.run.evaluated_model)
    replayer = make_replayer(spec, replay_service.run_config(item.run))
    return run_sync(replayer.replay(replay_service.load_canonical([item.conversation_id])[item.conversation_id]))


@pytest.mark.django_db
def test_the_database_refuses_a_running_conversation_without_a_lease():
    _run, (first, _) = prepared_run()
    with pytest.raises(IntegrityError), transaction.atomic():
        RunConversation.objects.filter(pk=first).update(status=RunConversation.Status.RUNNING)
    replay_service._claim(first, "worker-a")
    with pytest.raises(IntegrityError), transaction.atomic():
        RunConversation.objects.filter(pk=first).update(status=RunConversation.Status.DONE)  # still leased


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers need Postgres")
def test_simultaneous_claims_from_many_workers_have_exactly_one_winner():
    _run, (first, _) = prepared_run()
    start = threading.Barrier(8)
    winners: list[str] = []

    def worker(name: str) -> None:
        try:
            start.wait()
            if replay_service._claim(first, name) is not None:
                winners.append(name)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(f"worker-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    assert RunConversation.objects.get(pk=first).lease_owner == winners[0]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers need Postgres")
def test_simultaneous_finalisers_score_a_run_once():
    run, pending = prepared_run()
    for pk in pending:
        replay_service._claim(pk, "w")
        assert replay_as(RunConversation.objects.select_related("run__evaluated_model").get(pk=pk), "w")
    replay_service._mark_running(run)
    start = threading.Barrier(6)
    outcomes: list[str] = []

    def finaliser() -> None:
        try:
            start.wait()
            outcomes.append(replay_service.do_finalize_run(run.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=finaliser) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and len(outcomes) == 6
    assert RunScore.objects.filter(run=run).count() == 1


@pytest.mark.django_db
def test_a_stalled_conversation_is_shown_and_the_researcher_requeues_it(client, researcher):
    run, (first, second) = prepared_run()
    replay_service._claim(first, "dead-host:4242:abc")
    replay_service._mark_running(run)
    client.force_login(researcher)

    page = client.get(reverse("research:run", args=[run.pk])).content.decode()
    assert "Stalled conversations" not in page  # its worker is alive (the lease is fresh)
    states = client.get(f"/api/runs/{run.pk}/conversations/").json()["results"]
    assert [s["stalled"] for s in states] == [False, False]
    assert client.post(f"/api/runs/{run.pk}/requeue/").status_code == 409

    lapse(first)
    page = client.get(reverse("research:run", args=[run.pk])).content.decode()
    assert "Stalled conversations" in page and "dead-host:4242:abc" in page
    states = client.get(f"/api/runs/{run.pk}/conversations/").json()["results"]
    assert [(s["status"], s["stalled"], s["lease_owner"]) for s in states] == [
        ("running", True, "dead-host:4242:abc"),
        ("pending", False, ""),
    ]

    # Celery is eager here: the requeued conversation is replayed at once.
    response = client.post(reverse("research:run_requeue", args=[run.pk]), {"next": f"/research/runs/{run.pk}/"})
    assert response.status_code == 302
    item = RunConversation.objects.get(pk=first)
    assert (item.status, item.attempts, item.requeued) == ("done", 2, 1)
    assert RunConversation.objects.get(pk=second).status == "pending"  # untouched: never stalled
    assert "Stalled conversations" not in client.get(reverse("research:run", args=[run.pk])).content.decode()


@pytest.mark.django_db
def test_the_sweeper_requeues_lapsed_leases_and_finalises_a_run_whose_finaliser_was_lost():
    run, (first, second) = prepared_run()
    replay_service.do_replay_conversation(second)
    replay_service._claim(first, "dead-host:1:x")
    assert run_control.sweep() == {
        "pending_sent": 0,
        "requeued": [],
        "finalised": [],
        "exports": {"requeued": [], "failed": []},
    }  # a live lease is left alone
    lapse(first)
    swept = run_control.sweep()
    assert swept["requeued"] == [first]
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and run.conversations_done == 2

    # A run whose last conversation was stored but whose finalisation never ran (its worker died).
    other, (only, *_) = prepared_run(1, seed=9)
    replay_service._claim(only, "w")
    replay_service._mark_running(other)
    assert replay_service._store(
        RunConversation.objects.get(pk=only), "w", _replayed(RunConversation.objects.get(pk=only))
    )
    assert run_control.sweep()["finalised"] == [other.pk]
    other.refresh_from_db()
    assert other.status == EvaluationRun.Status.DONE


@pytest.mark.django_db
def test_cancel_then_resume_at_once_replays_a_held_conversation_only_once():
    run, (first, second) = prepared_run()
    held = replay_service._claim(first, "worker-a")  # worker A is replaying the first conversation
    replay_service._mark_running(run)
    assert run_control.cancel_run(run.pk)
    run_control.resume_run(run.pk)  # eager: the second is replayed here, the first is left to its holder
    assert RunConversation.objects.get(pk=second).status == "done"
    item = RunConversation.objects.get(pk=first)
    assert (item.status, item.lease_owner, item.attempts) == ("running", "worker-a", 1)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.RUNNING  # not scored while a conversation is open
    assert replay_service.do_finalize_run(run.pk) == EvaluationRun.Status.RUNNING  # a stray finaliser waits too

    assert replay_as(held, "worker-a")  # worker A finishes: the run can end
    assert replay_service.open_conversations(run.pk) == 0
    assert replay_service.do_finalize_run(run.pk) == EvaluationRun.Status.DONE
    assert list(RunConversation.objects.filter(run=run).values_list("attempts", flat=True)) == [1, 1]


@pytest.mark.django_db
def test_a_failed_run_says_why_and_lists_its_failed_conversations(client, researcher, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    docs = synth_conversations(1, seed=8, min_turns=2, max_turns=2)
    assert import_documents([(d.conversationId, d) for d in docs]).ok
    EvaluatedModel.objects.create(
        name="remote-em", litellm_model="openai/remote-em", api_base="https://api.example.com"
    )
    run = replay_service.do_create_run("remote-em", "default")
    run_control.start_run(run.pk)  # eager: the conversation fails at once (live models are off)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.FAILED and "ATTUNE_ALLOW_LIVE_MODELS" in run.error

    client.force_login(researcher)
    page = client.get(reverse("research:run", args=[run.pk])).content.decode()
    assert "Why this run failed" in page and "Failed conversations" in page
    assert docs[0].conversationId in page
    states = client.get(f"/api/runs/{run.pk}/conversations/").json()["results"]
    assert states[0]["status"] == "failed" and "ATTUNE_ALLOW_LIVE_MODELS" in states[0]["error"]


@pytest.mark.django_db
def test_the_failure_reason_names_the_failed_calls_when_every_conversation_failed():
    run, (first, second) = prepared_run()
    for pk in (first, second):
        replay_service._claim(pk, "w")
        replay_service._fail(RunConversation.objects.get(pk=pk), "w", "turn 1 draft: 429 after 6 attempts")
    replay_service._mark_running(run)
    assert replay_service.do_finalize_run(run.pk) == EvaluationRun.Status.FAILED
    run.refresh_from_db()
    assert (
        run.error == "no conversation could be replayed (2 failed); first failure: turn 1 draft: 429 after 6 attempts"
    )


def test_a_lease_names_the_process_that_holds_it():
    # What the run page shows as the holder, and what a benchmark reads to kill the busiest worker.
    token = replay_service.new_lease_token()
    assert replay_service.lease_process(token) == os.getpid()
    assert replay_service.lease_process("") is None
    assert replay_service.lease_process("host:not-a-pid:abc") is None
