"""A Redis outage degrades the site, never breaks it: a real Redis server is stopped mid-session and restarted.

With REDIS_URL set, the cache (sessions are ``cached_db``, reply locks, dashboard results), the rate-limit
windows and the task broker live in Redis. While it is away, participant and research pages keep answering
from the database, the limits admit and say so in the log, ``/healthz`` names Redis as unreachable while it
stays 200, and work a participant's message needs from a worker is kept in the database and queued when
Redis is back.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client

from attune_site.resilient_cache import SKIP_S, ResilientRedisCache
from collection import study_flow as flow
from collection import task_queue
from collection.models import PendingTask, SafetyEvent
from devtools.redis_server import PrivateRedis
from scoring import run_control
from tests.web.test_participant_flow import Walker

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server program"),
]


class CacheClock:
    """The resilient cache's clock, moved by the test: Redis is skipped for a while after a failure."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def pass_the_skip_window(self) -> None:
        self.now += SKIP_S + 1


@pytest.fixture
def cache_clock(monkeypatch) -> CacheClock:
    clock = CacheClock()
    monkeypatch.setattr(ResilientRedisCache, "clock", staticmethod(clock))
    monkeypatch.setattr(ResilientRedisCache, "_down_until", 0.0)
    monkeypatch.setattr(ResilientRedisCache, "_stale", {})
    return clock


@pytest.fixture
def redis_server(tmp_path, settings, monkeypatch, cache_clock) -> Iterator[PrivateRedis]:
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
    redis_server, cache_clock, participant, researcher, caplog
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
    cache_clock.pass_the_skip_window()
    walker.turn(2)
    assert research.get("/research/").status_code == 200
    cache.set("attune:outage-probe", "after")
    assert cache.get("attune:outage-probe") == "after"
    assert Client().get("/healthz").json()["redis"] == "ok"
    assert participant.conversations.get().turns.count() == 2  # nothing sent during the outage was lost


def test_a_hung_redis_is_skipped_after_one_failure_and_a_logout_during_it_stays_a_logout(
    redis_server, cache_clock, researcher
):
    """Redis paused (it accepts connections and never answers): the first cache call waits out its timeout,
    then Redis is left alone for a while. A session ended meanwhile (a logout) stays ended when Redis resumes
    still holding it, even for a copy of its cookie: the dropped delete is done once Redis answers again."""
    research = Client()
    research.force_login(researcher)  # the session is in Redis and in the database
    assert research.get("/research/").status_code == 200
    cache.set("attune:hang-probe", "kept")

    ended = research.cookies["sessionid"].value  # a copy of the cookie (a stolen one, another tab's) outlives it
    redis_server.hang()
    assert research.post("/research/logout/").status_code in (200, 302)  # the session's delete times out
    research.cookies["sessionid"] = ended
    redis_server.resume()  # answering again, with the old session and the probe still in memory
    assert cache.get("attune:hang-probe") is None  # skipped: Redis is not asked inside the window

    cache_clock.pass_the_skip_window()
    response = research.get("/research/")
    assert response.status_code == 302 and "/login/" in response["Location"]  # logged out, not resurrected
    assert cache.get("attune:hang-probe") == "kept"  # Redis is asked again


@pytest.fixture
def broker(redis_server, monkeypatch) -> Iterator[PrivateRedis]:
    """Celery sends tasks to the private Redis (not in the process, as other tests do); no worker takes them."""
    from attune_site.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    app.conf.broker_url, app.conf.task_always_eager = redis_server.url, False
    app._after_fork()  # forget connections to the shared broker: the next task opens one to this server
    monkeypatch.setattr(task_queue, "_broker_failed_at", None)
    yield redis_server
    app.pool.force_close_all()
    app.conf.broker_url, app.conf.task_always_eager = saved
    app._after_fork()


def queued_tasks(server: PrivateRedis) -> list[tuple[str, list]]:
    """(task name, arguments) of every message waiting in the broker's queues, read from Redis itself."""
    import redis

    from attune_site import queues

    with redis.Redis.from_url(server.url) as client:
        messages = [
            json.loads(raw)
            for queue in (queues.INTERACTIVE, queues.BULK, queues.FINALIZE, queues.DEFAULT)
            for raw in client.lrange(queue, 0, -1)
        ]
    return [(m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in messages]


URGENT = "Honestly everyone would be better off without me. I have pills saved up and I might take them tonight."


def test_work_a_message_needs_from_a_worker_is_kept_while_the_broker_is_away_and_queued_when_it_is_back(
    broker, participant, django_capture_on_commit_callbacks, caplog
):
    """An urgent message needs a worker to email the safety contact, and its reply one to prepare the
    suggested rewrite. Sent while Redis is stopped, the message is accepted and answered as usual; the two
    tasks wait in the database and reach the broker's queue when Redis is back: nothing is lost."""
    study = participant.study
    study.safety_contact_email = "safety@example.org"
    study.save(update_fields=["safety_contact_email"])
    walker = Walker(Client(), participant)
    walker.to_chat()

    broker.stop()
    with django_capture_on_commit_callbacks(execute=True):
        sent = walker.send(URGENT, 1)
    assert sent.status_code == 200 and sent.json()["safety_html"]  # the panel, as without an outage
    with django_capture_on_commit_callbacks(execute=True):
        assert walker.reply(1)[-1]["type"] == "done"
    event = SafetyEvent.objects.get()
    assert event.notified_at is None and event.notify_error.startswith("not sent yet")  # the research pages say so
    turn = participant.conversations.get().turns.get()
    kept = sorted(PendingTask.objects.values_list("task", "args"))
    assert kept == [("annotation.prepare_rewrite", [turn.pk]), ("collection.notify_safety_contact", [event.pk])]
    assert "the broker is unreachable" in caplog.text

    assert run_control.sweep()["pending_sent"] == 0  # a worker's sweeper while Redis is still away: kept
    assert PendingTask.objects.count() == 2

    broker.start()
    assert run_control.sweep()["pending_sent"] == 2
    assert sorted(queued_tasks(broker)) == kept
    assert not PendingTask.objects.exists()
    # and a task queued now goes straight to the broker again
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "continue"})
    with django_capture_on_commit_callbacks(execute=True):
        walker.annotate(1)
        assert walker.send("Thanks, that helps a little.", 2).status_code == 200
        walker.reply(2)
    second = participant.conversations.get().turns.get(turn_number=2)
    assert ("annotation.prepare_rewrite", [second.pk]) in queued_tasks(broker)
    assert not PendingTask.objects.exists()
