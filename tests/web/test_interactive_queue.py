"""Queues by who waits: a participant's rewrite is served by ``attune worker``'s interactive pool while a large
replay fills the bulk queue (a real ``attune worker``, Postgres, Redis and the fake provider), and tasks are
routed to the queue of whoever waits for them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from annotation.models import AlternateResponses
from attune_site import queues
from attune_site.celery import app
from attune_site.management.commands.worker import interactive_worker_command
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from devtools.fake_llm_server import start_subprocess
from devtools.participant_turns import chatting_conversation, store_reply
from scoring import replay_service, run_control
from scoring.models import EvaluatedModel, EvaluationRun
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("annotation.prepare_rewrite", "interactive"),
        ("collection.notify_safety_contact", "interactive"),
        ("scoring.replay_conversation", "bulk"),
        ("datasets.export_dataset_version", "bulk"),
        ("scoring.finalize_run", "finalize"),
        ("scoring.unknown_task", "celery"),
    ],
)
def test_tasks_go_to_the_queue_of_whoever_waits_for_them(task, queue):
    assert app.amqp.router.route({}, task)["queue"].name == queue


def test_the_reserved_worker_consumes_the_interactive_queue_alone_on_threads():
    command = interactive_worker_command(3, "INFO")
    assert "--queues=interactive" in command and "--pool=threads" in command and "--concurrency=3" in command
    assert "--interactive-concurrency=0" in command  # it starts no reserved worker of its own


def test_the_worker_refuses_an_unknown_queue_and_names_the_known_ones(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    with pytest.raises(CommandError, match=r"unknown queue replays; choose from interactive, bulk, finalize, celery"):
        call_command("worker", queues="bulk,replays")


def test_the_bulk_worker_by_default_leaves_the_interactive_queue_to_its_own_pool():
    assert queues.INTERACTIVE not in queues.BULK_WORKER_QUEUES
    assert set(queues.BULK_WORKER_QUEUES) | {queues.INTERACTIVE} == set(queues.ALL_QUEUES)


@pytest.fixture
def slow_provider() -> Iterator[str]:
    # Each call takes a second: the replay below keeps the bulk pool busy for minutes.
    process, api_base = start_subprocess("--latency-ms", "1000")
    try:
        yield api_base
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def attune_worker() -> Iterator[subprocess.Popen[bytes]]:
    """``attune worker`` as compose runs it (one bulk process, its reserved interactive worker beside it)."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(*queues.ALL_QUEUES)
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "ATTUNE_DATA_DIR": str(settings.DATA_DIR),
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "attune_site.cli", "worker", "--concurrency=1", "--interactive-concurrency=2"]
    # A session of its own, so the worker and the interactive worker it starts are stopped together.
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        client.delete(*queues.ALL_QUEUES)


@pytest.mark.celery
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real broker)")
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs DATABASE_URL pointing at Postgres")
def test_a_participants_rewrite_is_prepared_while_a_large_replay_is_queued(slow_provider, attune_worker):
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    docs = synth_conversations(40, seed=51, min_turns=3, max_turns=3)
    assert import_documents([(d.conversationId, d) for d in docs]).ok
    EvaluatedModel.objects.create(
        name="fake-em", litellm_model="openai/fake-em", api_base=slow_provider, params={"temperature": 0}
    )
    conversation = chatting_conversation()
    wait_for(lambda: len(app.control.ping(timeout=0.5)) >= 2, 180, "both workers to answer a ping")

    run = replay_service.do_create_run("fake-em", "default", conversation_ids=[d.conversationId for d in docs])
    run_control.start_run(run.pk)
    wait_for(lambda: client.llen(queues.BULK) > 0, 30, "the replay's conversations to be queued")
    turn = store_reply(conversation, "Since the move I barely sleep and I feel lost.")

    def rewrite_made() -> bool:
        return AlternateResponses.objects.filter(turn=turn).exclude(llm_improved="").exists()

    wait_for(rewrite_made, 120, "the participant's rewrite", state=lambda: client.llen(queues.BULK))
    # Made while the replay still had conversations waiting for the bulk pool: it never queued behind them.
    assert client.llen(queues.BULK) > 0
    assert EvaluationRun.objects.get(pk=run.pk).conversations_done < len(docs)
    assert "since the move" in AlternateResponses.objects.get(turn=turn).llm_improved.lower()
