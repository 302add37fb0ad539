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
import time
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

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.celery,
    pytest.mark.slow,
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
            "ATTUNE_VISIBILITY_TIMEOUT": "4",
            "ATTUNE_DATA_DIR": str(settings.DATA_DIR),
            "PYTHONPATH": str(ROOT),
        }

    def start(self, name: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.celery_worker", f"--hostname={name}@%h"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
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


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


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
    wait_for(lambda: run_status(run.pk) in ("done", "failed"), 120, "the run to finish")

    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert (run.conversations_total, run.conversations_done, run.conversations_failed) == (4, 4, 0)
    stats = http_json(f"{root_url(fake_server)}/stats")
    em_calls = sum(planned_calls(d, judge=False) for d in docs)
    assert stats["requests"] == run.calls_made - sum(len(d.turns) for d in docs) == em_calls  # judge calls are offline
    assert run.cost_usd > 0
    assert ModelCallCache.objects.filter(model="openai/fake-em").count() == em_calls
    score = RunScore.objects.get(run=run)
    assert score.metrics["em_model"] == "fake-em" and score.metrics["mode"] == "verbose"
    outputs = RunConversation.objects.filter(run=run).values_list("output", flat=True)
    assert all(o["prompt_version"] == P.PROMPT_VERSION and o["em_reasoning"] for o in outputs)


def test_a_killed_worker_is_resumed_without_repeating_finished_work(fake_server, workers):
    docs = import_synth(6, turns=3, seed=33)
    register_fake(fake_server)
    run = replay_service.do_create_run("fake-em", "default", "absolute")
    run_control.start_run(run.pk)
    first = workers.start("w1")

    def mid_run() -> bool:
        statuses = list(RunConversation.objects.filter(run=run).values_list("status", flat=True))
        return statuses.count("done") >= 2 and "running" in statuses

    wait_for(mid_run, 120, "two conversations done and one in progress")
    first.send_signal(signal.SIGKILL)
    first.wait()
    finished_before = set(
        RunConversation.objects.filter(run=run, status="done").values_list("conversation__conversation_id", flat=True)
    )
    interrupted = set(
        RunConversation.objects.filter(run=run, status="running").values_list(
            "conversation__conversation_id", flat=True
        )
    )
    assert finished_before and interrupted

    workers.start("w2")
    wait_for(lambda: run_status(run.pk) in ("done", "failed"), 180, "the resumed run to finish")
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE, run.error
    assert run.conversations_done == 6 and run.conversations_failed == 0
    assert RunScore.objects.filter(run=run).exists()

    digests = http_json(f"{root_url(fake_server)}/stats/digests")
    config = ReplayConfig(mode="default", panas_strategy="absolute")
    by_id = {d.conversationId: d for d in docs}
    # Every call of a conversation finished before the kill was sent exactly once.
    for conversation_id in finished_before:
        for digest in call_digests(by_id[conversation_id], config):
            assert digests.get(digest) == 1, f"a call of finished {conversation_id} was repeated"
    # Every call of every conversation was made; repeats are only calls that were in
    # flight in the killed worker (the interrupted conversation's cached calls were reused).
    repeated = {d for d, count in digests.items() if count > 1}
    interrupted_digests = {d for cid in interrupted for d in call_digests(by_id[cid], config)}
    assert repeated <= interrupted_digests
    assert len(repeated) <= 8  # bounded by the calls in flight in the killed worker (two turns at most)
    for conversation_id, doc in by_id.items():
        assert all(digests.get(d, 0) >= 1 for d in call_digests(doc, config)), conversation_id
