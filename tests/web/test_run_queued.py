"""A run waiting for a worker says "Queued"; it says "Running" once a worker takes a conversation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from scoring import replay_service, run_control
from scoring.models import EvaluationRun


def import_synth(n: int) -> None:
    docs = synth_conversations(n, seed=5, min_turns=2, max_turns=2)
    result = import_documents([(d.conversationId, d) for d in docs])
    assert result.ok, result.problems


@pytest.mark.django_db
def test_a_prepared_run_is_queued_until_a_worker_takes_a_conversation(client, researcher):
    import_synth(2)
    run = replay_service.do_create_run("baseline:lexicon", "default")
    pending = replay_service.do_prepare_run(run.pk)  # what start_run does before handing it to Celery
    run.refresh_from_db()
    assert (run.status, run.started_at, run.conversations_total) == (EvaluationRun.Status.QUEUED, None, 2)

    client.force_login(researcher)
    page = client.get(reverse("research:run", args=[run.pk])).content.decode()
    assert '<span class="badge queued">Queued</span>' in page and "Running" not in page

    replay_service.do_replay_conversation(pending[0])  # a worker picks up the first conversation
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.RUNNING and run.started_at is not None
    first_start = run.started_at

    replay_service.do_replay_conversation(pending[1])
    assert replay_service.do_finalize_run(run.pk) == EvaluationRun.Status.DONE
    run.refresh_from_db()
    assert run.started_at == first_start and run.conversations_done == 2


@pytest.mark.django_db
def test_a_run_cancelled_while_queued_stays_cancelled_when_a_worker_sees_it():
    import_synth(1)
    run = replay_service.do_create_run("baseline:lexicon", "default")
    pending = replay_service.do_prepare_run(run.pk)
    assert run_control.cancel_run(run.pk)
    assert replay_service.do_replay_conversation(pending[0])["skipped"] == "run cancelled"
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.CANCELLED and run.started_at is None


@pytest.mark.django_db
def test_resuming_a_run_with_nothing_left_to_replay_goes_straight_to_scoring():
    import_synth(2)
    run = replay_service.do_create_run("baseline:lexicon", "default")
    run_control.start_run(run.pk)  # without REDIS_URL Celery runs eagerly, here: the run finishes
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.FAILED)
    # Every conversation is done: prepare leaves it queued, and finalize scores it from there.
    run_control.resume_run(run.pk)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE and run.conversations_done == 2
