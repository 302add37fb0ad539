"""Whole evaluation runs through REAL Celery worker processes, Redis and Postgres, and the fake LLM server.

Run with real services (a dedicated Redis database number: the test purges its queue):

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/attune_replay \\
    REDIS_URL=redis://127.0.0.1:6379/14 \\
    .venv/bin/pytest -m celery tests/web/test_replay_celery.py

Skipped unless both are configured. Workers are subprocesses of this test
(``devtools.celery_worker``) that use the test database; the fake server runs
in another subprocess so it outlives a killed worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from attunebench.replay import prompts as P
from attunebench.replay.protocol import ConversationView, ReplayConfig, planned_calls
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from devtools.fake_llm_server import http_json, request_digest, root_url, start_subprocess
from scoring import replay_service, run_control
from scoring.models import EvaluatedModel, EvaluationRun, ModelCallCache, RunConversation, RunScore
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.celery,
    pytest.mark.slow,
    # Real worker processes on a shared machine: generous, and every wait inside polls for a condition.
    pytest.mark.timeout(1200),
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real broker)"),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs DATABASE_URL pointing at Postgres"),
]


@pytest.fixture
def fake_server() -> Iterator[str]:
    process, api_base = start_subprocess("--latency-ms", "120")
    try:
        yield api_base
    finally:
        process.kill()
        process.wait()


@pytest.fixture(autouse=True)
def clean_broker():
    import redis

    from attune_site.celery import app

    app.control.purge()
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter("attune:*"):
        client.delete(key)
    yield
    app.control.purge()


class Workers:
    """Starts worker subprocesses on the test database; kills them at the end."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []
        database = connection.settings_dict
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
            "REDIS_URL": settings.REDIS_URL,
            # Short leases so a killed worker's conversation is requeued in seconds; the broker's own
            # visibility timeout stays long, so only the leases and the sweeper bring the work back.
            "ATTUNE_REPLAY_LEASE_SECONDS": "15",
            "ATTUNE_VISIBILITY_TIMEOUT": "3600",
            "ATTUNE_DATA_DIR": str(settings.DATA_DIR),
            "PYTHONPATH": str(ROOT),
        }

    def start(self, name: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.celery_worker", f"--hostname={name}@%h"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(os.environ["ATTUNE_TEST_WORKER_LOG"] + f".{name}", "ab")  # noqa: SIM115
            if os.environ.get("ATTUNE_TEST_WORKER_LOG")
            else subprocess.DEVNULL,
        )
        self.processes.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()


@pytest.fixture
def workers() -> Iterator[Workers]:
    pool = Workers()
    try:
        yield pool
    finally:
        pool.stop_all()


def import_synth(n: int, turns: int, seed: int) -> list:
    docs = synth_conversations(n, seed=seed, min_turns=turns, max_turns=turns)
    assert import_documents([(d.conversationId, d) for d in docs]).ok
    return docs


def run_status(run_id: int) -> str:
    return EvaluationRun.objects.get(pk=run_id).status


def call_digests(conversation, config: ReplayConfig) -> list[str]:
    """Digests of every EM call a replay of this conversation sends (no judge: all prompts are fixed)."""
    view = ConversationView(conversation, config)
    contexts = []
    for index, turn in enumerate(conversation.turns):
        contexts += [view.draft(index), view.analysis(index)]
        if view.hp_binary(index).question_ids:
            contexts.append(view.hp_binary(index))
        if turn.annotations.pairwiseComparisons:
            contexts.append(view.pairwise(index))
    contexts.append(view.post())
    return [request_digest(P.build_messages(ctx)) for ctx in contexts]


def register_fake(api_base: str) -> EvaluatedModel:
    return EvaluatedModel.objects.create(
        name="fake-em",
        litellm_model="openai/fake-em",
        api_base=api_base,
        params={"temperature": 0, "seed": 3},
        input_cost_per_million=1.0,
        output_cost_per_million=3.0,
        max_concurrency=8,
    )


def test_a_run_goes_through_a_real_worker_and_is_scored(fake_server, workers):
    docs = import_synth(4, turns=3, seed=21)
    register_fake(fake_server)
    run = replay_service.do_create_run("fake-em", "verbose", "delta", judge_name="baseline:lexicon")
    run_control.start_run(run.pk)  # enqueued on Redis; nothing runs in this process
    assert run_status(run.pk) == EvaluationRun.Status.QUEUED  # no worker has taken a conversation yet
    workers.start("w1")
    wait_for(lambda: run_status(run.pk) in ("done", "failed"), 400, "the run to finish")

    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert (run.conversations_total, run.conversations_done, run.conversations_failed) == (4, 4, 0)
    stats = http_json(f"{root_url(fake_server)}/stats")
    em_calls = sum(planned_calls(d, judge=False) for d in docs)
    assert stats["requests"] == run.calls_made == em_calls  # the offline judge's answers are not calls
    assert run.cost_usd > 0
    assert ModelCallCache.objects.filter(model="openai/fake-em").count() == em_calls
    score = RunScore.objects.get(run=run)
    assert score.metrics["em_model"] == "fake-em" and score.metrics["mode"] == "verbose"
    outputs = RunConversation.objects.filter(run=run).values_list("output", flat=True)
    assert all(o["prompt_version"] == P.PROMPT_VERSION and o["em_reasoning"] for o in outputs)


def test_a_killed_worker_s_conversation_is_requeued_by_the_survivor_and_never_replayed_twice(fake_server, workers):
    docs = import_synth(6, turns=3, seed=33)
    register_fake(fake_server)
    run = replay_service.do_create_run("fake-em", "default", "absolute")
    run_control.start_run(run.pk)
    first = workers.start("w1")
    workers.start("w2")  # the survivor: nobody starts another worker after the kill

    def held_by_first() -> int:
        return RunConversation.objects.filter(run=run, status="running", lease_owner__contains=f":{first.pid}:").count()

    def mid_run() -> bool:
        return RunConversation.objects.filter(run=run, status="done").count() >= 2 and held_by_first() == 1

    # Freeze w1 where it stands, and kill it only if it froze holding a conversation (else let it go on):
    # the check and the kill cannot race with w1 finishing that conversation.
    while True:
        wait_for(
            mid_run,
            300,
            "two conversations done and one held by w1",
            lambda: list(RunConversation.objects.filter(run=run).values_list("status", "lease_owner", "attempts")),
        )
        first.send_signal(signal.SIGSTOP)
        if held_by_first() == 1:
            break
        first.send_signal(signal.SIGCONT)
    first.send_signal(signal.SIGKILL)
    first.wait()
    finished_before = set(
        RunConversation.objects.filter(run=run, status="done").values_list("conversation__conversation_id", flat=True)
    )
    interrupted = set(
        RunConversation.objects.filter(run=run, status="running", lease_owner__contains=f":{first.pid}:").values_list(
            "conversation__conversation_id", flat=True
        )
    )
    assert finished_before and len(interrupted) == 1

    # w2's sweeper requeues it once its lease lapses (15 s here); the broker's redelivery would take an hour.
    wait_for(lambda: run_status(run.pk) in ("done", "failed"), 400, "the run to finish without a new worker")
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert run.conversations_done == 6 and run.conversations_failed == 0
    assert RunScore.objects.filter(run=run).exists()
    killed = RunConversation.objects.get(run=run, conversation__conversation_id__in=interrupted)
    assert (killed.attempts, killed.requeued) == (2, 1)
    others = RunConversation.objects.filter(run=run).exclude(pk=killed.pk)
    assert set(others.values_list("attempts", flat=True)) == {1}  # nothing else was claimed twice

    digests = http_json(f"{root_url(fake_server)}/stats/digests")
    config = ReplayConfig(mode="default", panas_strategy="absolute")
    by_id = {d.conversationId: d for d in docs}
    # Every call of a conversation not interrupted was sent exactly once.
    for conversation_id in set(by_id) - interrupted:
        for digest in call_digests(by_id[conversation_id], config):
            assert digests.get(digest) == 1, f"a call of {conversation_id} was repeated"
    # Nor any call of the interrupted one: its answered calls came from the cache, and the calls in flight
    # when w1 died were finished by w1's call courier, which outlived it, and taken from its journal.
    for conversation_id, doc in by_id.items():
        for digest in call_digests(doc, config):
            assert digests.get(digest) == 1, f"a call of {conversation_id} was answered {digests.get(digest)} times"
    assert set(digests.values()) == {1}
    # Counted once, as the provider saw it: the killed worker's requests too (answered or lost in flight).
    assert run.calls_made == http_json(f"{root_url(fake_server)}/stats")["requests"]
    assert run.calls_recovered == killed.calls_recovered and run.calls_cached == 0


def test_cancel_and_resume_at_once_replays_no_conversation_twice(fake_server, workers):
    docs = import_synth(6, turns=3, seed=44)
    register_fake(fake_server)
    run = replay_service.do_create_run("fake-em", "default", "absolute")
    run_control.start_run(run.pk)
    workers.start("w1")
    workers.start("w2")
    wait_for(
        lambda: RunConversation.objects.filter(run=run, status="running").count() == 2,
        300,
        "both workers replaying a conversation",
    )
    assert run_control.cancel_run(run.pk)
    run_control.resume_run(run.pk)  # at once: the held conversations are queued again while still held
    wait_for(lambda: run_status(run.pk) in ("done", "failed"), 400, "the resumed run to finish")
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert (run.conversations_done, run.conversations_failed) == (6, 0)
    claims = list(RunConversation.objects.filter(run=run).values_list("attempts", "requeued"))
    assert {attempts for attempts, _ in claims} == {1}, claims
    digests = http_json(f"{root_url(fake_server)}/stats/digests")
    config = ReplayConfig(mode="default", panas_strategy="absolute")
    sent = [d for doc in docs for d in call_digests(doc, config)]
    assert all(digests.get(d) == 1 for d in sent), "a call was sent twice"
    assert run.calls_made == len(sent) == http_json(f"{root_url(fake_server)}/stats")["requests"]
