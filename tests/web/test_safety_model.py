"""The optional moderation model beside the offline screen, against a local fake OpenAI-compatible
moderation endpoint: it adds detections, never removes one, and a failure or timeout never holds up the chat."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.cache import cache
from django.test import Client

from attunebench.safety import screen_text
from collection import safety_model
from collection.models import SafetyEvent
from tests.web.test_participant_flow import Walker

pytestmark = [pytest.mark.django_db]

CALM_PREPARATION = "I put my affairs in order this week and wrote to everyone I love."
URGENT = "I have pills saved up and I might take them tonight."
CATEGORIES = ("self-harm", "self-harm/intent", "self-harm/instructions", "violence", "harassment/threatening")


class FakeModeration:
    """``POST /v1/moderations`` in OpenAI's format. ``flag`` maps a phrase to the categories flagged for any
    input containing it; ``mode`` is "ok", "error" (HTTP 500) or "hang" (no answer until released)."""

    def __init__(self) -> None:
        server = self
        self.requests: list[dict] = []
        self.flag: dict[str, tuple[str, ...]] = {}
        self.mode = "ok"
        self.release = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append({"path": self.path, **body})
                if server.mode == "hang":
                    server.release.wait(timeout=30)
                if server.mode == "error" or self.path != "/v1/moderations":
                    self._send(500, {"error": {"message": "moderation overloaded", "type": "server_error"}})
                    return
                text = str(body.get("input", ""))
                flagged = {c for phrase, cats in server.flag.items() if phrase in text for c in cats}
                result = {
                    "flagged": bool(flagged),
                    "categories": {c: c in flagged for c in CATEGORIES},
                    "category_scores": {c: 0.9 if c in flagged else 0.01 for c in CATEGORIES},
                }
                self._send(200, {"id": "modr-1", "model": body.get("model", ""), "results": [result]})

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (the timeout case)
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def moderation(settings, monkeypatch) -> Iterator[FakeModeration]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    server = FakeModeration()
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    settings.ATTUNE_SAFETY_MODEL = "omni-moderation-latest"
    settings.ATTUNE_SAFETY_MODEL_API_BASE = server.api_base
    settings.ATTUNE_SAFETY_MODEL_TIMEOUT = 0.5
    cache.clear()
    yield server
    server.close()
    cache.clear()


@pytest.fixture
def walker(client, participant) -> Walker:
    walker = Walker(client, participant)
    walker.to_chat()
    return walker


def test_the_model_adds_what_the_offline_rules_cannot_see(walker, moderation):
    assert screen_text(CALM_PREPARATION).level == "none"  # calm, oblique preparation: the rules' blind spot
    moderation.flag[CALM_PREPARATION[:20]] = ("self-harm", "self-harm/intent")
    sent = walker.send(CALM_PREPARATION, 1).json()
    assert "Before we go on" in sent["safety_html"]  # the panel, before any question
    event = SafetyEvent.objects.get()
    assert (event.level, event.source) == ("urgent", "message")
    assert event.signals == ["model_self_harm", "model_self_harm_intent"]
    assert moderation.requests[0]["path"] == "/v1/moderations"
    assert moderation.requests[0]["model"] == "omni-moderation-latest"
    assert safety_model.health()["last_ok_at"]


def test_the_model_never_removes_a_detection(walker, moderation):
    sent = walker.send(URGENT, 1).json()  # the model flags nothing here
    assert "Before we go on" in sent["safety_html"]
    event = SafetyEvent.objects.get()
    assert event.level == "urgent" and {"means", "timeframe"} <= set(event.signals)
    assert len(moderation.requests) == 1


@pytest.mark.parametrize("mode", ["error", "hang"])
def test_a_failing_or_silent_model_never_holds_up_the_chat_and_is_reported(walker, moderation, researcher, mode):
    moderation.mode = mode
    sent = walker.send(URGENT, 1).json()
    assert "Before we go on" in sent["safety_html"]  # the offline screen stands alone
    assert walker.reply(1)[-1]["type"] == "done"
    assert SafetyEvent.objects.get().level == "urgent"
    record = safety_model.health()
    assert record["failures"] >= 1 and record["last_error"]
    research = Client()
    research.force_login(researcher)
    page = research.get(f"/research/studies/{walker.participant.study.slug}/safety/").content.decode()
    assert "omni-moderation-latest" in page and "failed" in page


def test_nothing_is_sent_unless_live_models_are_allowed(walker, moderation, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    walker.send(CALM_PREPARATION, 1)
    assert moderation.requests == [] and not SafetyEvent.objects.exists()
