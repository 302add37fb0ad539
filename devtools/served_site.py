"""A real ``attune serve`` process on a fresh data directory, for tests and benchmarks that drive the site.

The embedded default: SQLite in the data directory, no REDIS_URL, so Celery
tasks run in the web process. With ``database_url`` the server uses that
Postgres database instead (a test passes its own test database). Set-up goes
through ``manage.py`` in subprocesses: migrate, a researcher with an API token,
conversations, a registered model; then the server answers on a free port.

Usage (a context manager)::

    with ServedSite(tmp / "data") as site:
        token = site.researcher_token("rita")
        site.import_synth(10)
        site.register_model("openai/fake-em", api_base, max_concurrency=8)
        httpx.post(site.url + "/api/runs/", headers={"Authorization": f"Token {token}"}, json={...})
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
#: What ``ServedSite.shell`` prints before the JSON result it reads back.
RESULT_PREFIX = "SERVED_SITE_RESULT "


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServedSite:
    """``manage.py serve`` of the code tree ``repo`` (default: this one) on ``data_dir``."""

    def __init__(self, data_dir: Path, *, repo: Path = ROOT, database_url: str | None = None) -> None:
        self.repo = repo
        self.env = {**os.environ, "ATTUNE_DATA_DIR": str(data_dir), "ATTUNE_OFFLINE_STREAM_DELAY": "0"}
        for name in ("REDIS_URL", "DATABASE_URL", "ATTUNE_ALLOW_LIVE_MODELS"):
            self.env.pop(name, None)  # the embedded default: tasks in process, live models off
        if database_url:
            self.env["DATABASE_URL"] = database_url
        self.env["PYTHONPATH"] = str(repo)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[str] | None = None
        self.log = ""

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
        return done.stdout

    def shell(self, code: str) -> Any:
        """Run ``code`` in ``manage.py shell``; it sets ``result``, which comes back through JSON."""
        program = f"{code}\nprint({RESULT_PREFIX!r} + __import__('json').dumps(result))"
        out = self.manage("shell", "-c", program)
        line = next(x for x in out.splitlines() if x.startswith(RESULT_PREFIX))
        return json.loads(line[len(RESULT_PREFIX) :])

    def researcher_token(self, username: str) -> str:
        """A researcher account and its API token key."""
        return str(
            self.shell(
                "from django.contrib.auth import get_user_model\n"
                "from research.access.roles import do_make_researcher\n"
                "from research.access.api_tokens import do_issue_token\n"
                f"user, _ = get_user_model().objects.get_or_create(username={username!r})\n"
                "do_make_researcher(user)\n"
                "result = do_issue_token(user).key"
            )
        )

    def import_synth(self, n: int, seed: int = 7) -> list[str]:
        """``n`` synthetic conversations of two to three turns, imported."""
        return list(
            self.shell(
                "from attunebench.synth import synth_conversations\n"
                "from datasets.exchange import import_documents\n"
                f"docs = synth_conversations({n}, seed={seed}, min_turns=2, max_turns=3)\n"
                "imported = import_documents([(d.conversationId, d) for d in docs])\n"
                "assert imported.ok, imported.problems\n"
                "result = imported.imported"
            )
        )

    def register_model(self, name: str, api_base: str, *, max_concurrency: int) -> int:
        """A registry row for an OpenAI-compatible server at ``api_base``; its id."""
        return int(
            self.shell(
                "from scoring.models import EvaluatedModel\n"
                f"row, _ = EvaluatedModel.objects.update_or_create(name={name!r}, defaults=dict(kind='llm', "
                f"litellm_model={name!r}, api_base={api_base!r}, max_concurrency={max_concurrency}))\n"
                "result = row.pk"
            )
        )

    def start(self) -> ServedSite:
        self.manage("migrate", "--noinput", "-v", "0")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--no-migrate", "--port", str(self.port)],
            cwd=self.repo,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 300  # gunicorn boots a worker after its master: slow on a busy machine
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited:\n{self.process.stderr.read() if self.process.stderr else ''}")
            try:
                httpx.get(self.url + "/", timeout=2)
                return self
            except httpx.TransportError:
                time.sleep(0.1)  # polling a process we started until it listens
        raise RuntimeError(f"the server did not answer on {self.url}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.log = self.process.stderr.read() if self.process.stderr else ""
        self.process = None

    def __enter__(self) -> ServedSite:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
