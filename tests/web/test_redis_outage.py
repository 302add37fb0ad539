"""A Redis outage degrades the site, never breaks it: a real Redis server is stopped mid-session and restarted.

With REDIS_URL set, the cache (sessions are ``cached_db``, reply locks, dashboard results) and the rate-limit
windows live in Redis. While it is away, participant and research pages keep answering from the database,
the limits admit and say so in the log, and ``/healthz`` names Redis as unreachable while it stays 200.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client

from collection import study_flow as flow
from tests.web.test_participant_flow import Walker

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server program"),
]


class PrivateRedis:
    """A redis-server of the test's own on a free port (never the shared one), stopped and started at will."""

    def __init__(self, workdir: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait for it to say it is ready (its own log line, not a length of time)."""
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.workdir,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if b"Ready to accept connections" in line:
                return
        raise RuntimeError(f"redis-server exited before it was ready (code {self.process.wait()})")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@pytest.fixture
def redis_server(tmp_path, settings, monkeypatch) -> Iterator[PrivateRedis]:
    server = PrivateRedis(str(tmp_path))
    server.start()
    settings.REDIS_URL = server.url
    settings.CACHES = {
        "default": {
            "BACKEND": "attune_site.resilient_cache.ResilientRedisCache",
            "LOCATION": server.url,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    monkeypatch.setattr(flow, "_window_log", None)  # the chat's rate limits take this Redis too
    yield server
    server.stop()
    monkeypatch.setattr(flow, "_window_log", None)


def test_pages_keep_working_while_redis_is_away_and_use_it_again_when_it_is_back(
    redis_server, participant, researcher, caplog
):
    walker = Walker(Client(), participant)
    walker.to_chat()
    research = Client()
    research.force_login(researcher)  # a session in the cache and the database
    assert research.get("/research/").status_code == 200
    cache.set("attune:outage-probe", "before")
    assert cache.get("attune:outage-probe") == "before"

    redis_server.stop()
    walker.turn(1)  # send, stream the reply, answer all three annotation pages
    assert research.get("/research/").status_code == 200  # the session is read from the database
    assert research.get("/research/collection/").status_code == 200
    health = Client().get("/healthz")
    assert health.status_code == 200
    assert health.json()["database"] == "ok" and health.json()["redis"].startswith("unreachable")
    assert cache.get("attune:outage-probe") is None  # a miss, not an error
    assert "Redis unreachable" in caplog.text

    redis_server.start()
    walker.turn(2)
    assert research.get("/research/").status_code == 200
    cache.set("attune:outage-probe", "after")
    assert cache.get("attune:outage-probe") == "after"
    assert Client().get("/healthz").json()["redis"] == "ok"
    assert participant.conversations.get().turns.count() == 2  # nothing sent during the outage was lost
