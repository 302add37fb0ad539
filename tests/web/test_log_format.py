"""One log format across Django, Celery, gunicorn and litellm (plain, or JSON lines with ATTUNE_LOG_FORMAT=json),
and a request id that follows a participant's request into the task it queues and the provider call it makes."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from annotation.models import AlternateResponses
from attune_site import log_format, queues
from attune_site.celery import app
from collection.study_flow import do_issue_link
from devtools.participant_turns import chatting_conversation
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]

# Loggers of Django, Celery, gunicorn and litellm (after litellm's own import), one line each.
EVERY_SOURCE = """
import logging
import django
django.setup()
from attunebench.replay.llm import imported_litellm
imported_litellm()
for name in ("attune.check", "django.request", "celery.worker", "gunicorn.error", "LiteLLM"):
    logging.getLogger(name).warning("line from %s", name)
"""


def run_fresh(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ATTUNE_") and k != "DJANGO_SETTINGS_MODULE"}
    clean.update({"ATTUNE_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "attune_site.settings", **env})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean, cwd=ROOT)


def test_json_lines_carry_every_source_once_with_the_same_fields(tmp_path):
    result = run_fresh(EVERY_SOURCE, tmp_path, ATTUNE_LOG_FORMAT="json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    by_logger = [line["logger"] for line in lines if line["message"].startswith("line from")]
    # litellm's line once (its own handler no longer writes it a second time), every source in one shape
    assert by_logger == ["attune.check", "django.request", "celery.worker", "gunicorn.error", "LiteLLM"]
    for line in lines:
        assert {"time", "level", "logger", "message", "request_id"} <= set(line)
    assert [line for line in result.stderr.splitlines() if "line from" in line and not line.startswith("{")] == []


def test_plain_lines_share_one_format_too(tmp_path):
    result = run_fresh(EVERY_SOURCE, tmp_path)
    assert result.returncode == 0, result.stderr
    ours = [line for line in result.stderr.splitlines() if "line from" in line]
    assert len(ours) == 5
    for line, name in zip(
        ours, ("attune.check", "django.request", "celery.worker", "gunicorn.error", "LiteLLM"), strict=True
    ):
        assert f" WARNING {name} [-] line from {name}" in line


def test_an_unknown_log_format_is_refused_by_name(tmp_path):
    result = run_fresh("import django; django.setup()", tmp_path, ATTUNE_LOG_FORMAT="xml")
    assert result.returncode != 0
    assert "ATTUNE_LOG_FORMAT" in result.stderr and "plain, json" in result.stderr


@pytest.mark.django_db
def test_every_response_names_its_request_id_and_keeps_a_sane_one_from_the_proxy(client):
    fresh = client.get("/healthz")["X-Request-ID"]
    assert len(fresh) == 32 and fresh != client.get("/healthz")["X-Request-ID"]
    assert client.get("/healthz", HTTP_X_REQUEST_ID="proxy-1234abcd")["X-Request-ID"] == "proxy-1234abcd"
    replaced = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\nwith a newline")["X-Request-ID"]
    assert "\n" not in replaced and len(replaced) == 32


class Collected(logging.Handler):
    """This process's log lines, with the request id the console handler would print."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.addFilter(log_format.RequestIdFilter())
        self.lines: list[tuple[str, str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.name, record.request_id, record.getMessage()))  # type: ignore[attr-defined]


@pytest.fixture
def live_rewriter() -> Iterator[str]:
    from devtools.fake_llm_server import start_subprocess

    process, api_base = start_subprocess()
    try:
        yield api_base
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def json_worker(live_rewriter, tmp_path) -> Iterator[Path]:
    """A real worker writing JSON lines to a file, rewriting with a live (fake) model."""
    import redis

    redis.Redis.from_url(settings.REDIS_URL).delete(*queues.ALL_QUEUES)
    database = connection.settings_dict
    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "ATTUNE_DATA_DIR": str(settings.DATA_DIR),
        "PYTHONPATH": str(ROOT),
        "ATTUNE_LOG_FORMAT": "json",
        "ATTUNE_LOG_LEVEL": "INFO",
        "ATTUNE_ALLOW_LIVE_MODELS": "1",
        "ATTUNE_ALTERNATE_MODEL": "openai/fake-rewriter",
        "ATTUNE_ALTERNATE_API_BASE": live_rewriter,
        "ATTUNE_CALL_COURIER": "0",
        "OPENAI_API_KEY": "sk-fake-key-for-the-local-server",
    }
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.celery_worker", "--hostname=logs@%h"],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    try:
        yield log
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        redis.Redis.from_url(settings.REDIS_URL).delete(*queues.ALL_QUEUES)


@pytest.mark.celery
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real broker)")
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs DATABASE_URL pointing at Postgres")
def test_one_request_id_in_the_web_worker_and_provider_call_lines_of_one_request(json_worker):
    conversation = chatting_conversation()
    link = f"/s/{do_issue_link(conversation.participant)}/"
    wait_for(lambda: len(app.control.ping(timeout=0.5)) >= 1, 180, "the worker to answer a ping")

    collected = Collected()
    root = logging.getLogger()
    saved_level = logging.getLogger("attune").level
    root.addHandler(collected)
    logging.getLogger("attune").setLevel(logging.INFO)
    try:
        participant = Client()
        sent = participant.post(
            f"{link}chat/send/",
            {"message": "I cannot sleep since the move.", "turn_number": 1},
            HTTP_ACCEPT="application/json",
        )
        assert sent.status_code == 200, sent.content
        reply = participant.post(
            f"{link}chat/reply/1/", HTTP_ACCEPT="application/x-ndjson", HTTP_X_REQUEST_ID="req-51-logs-test"
        )
        assert reply["X-Request-ID"] == "req-51-logs-test"
        assert b"".join(reply.streaming_content)  # the reply is stored (and its rewrite queued) as it is read
    finally:
        root.removeHandler(collected)
        logging.getLogger("attune").setLevel(saved_level)

    turn = conversation.turns.get(turn_number=1)
    wait_for(
        lambda: AlternateResponses.objects.filter(turn=turn).exclude(llm_improved="").exists(),
        180,
        "the worker to prepare the rewrite",
        state=lambda: json_worker.read_text()[-2000:],
    )
    web = [line for line in collected.lines if line[1] == "req-51-logs-test"]
    assert ("attune.request", "req-51-logs-test") in {(name, rid) for name, rid, _ in web}

    def worker_lines() -> list[dict]:
        return [json.loads(line) for line in json_worker.read_text().splitlines() if line.startswith("{")]

    wait_for(
        lambda: any("answered in" in line["message"] for line in worker_lines()),
        60,
        "the provider call's log line",
        state=lambda: json_worker.read_text()[-3000:],
    )
    ours = [line for line in worker_lines() if line.get("request_id") == "req-51-logs-test"]
    loggers = {line["logger"] for line in ours}
    assert "celery.app.trace" in loggers  # the task's own line: "Task annotation.prepare_rewrite[...] succeeded"
    provider_calls = [line["message"] for line in ours if line["logger"] == "attune.alternates"]
    assert any("calling openai/fake-rewriter" in message for message in provider_calls)
    assert any("openai/fake-rewriter answered in" in message for message in provider_calls)
