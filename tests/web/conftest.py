"""Shared fixtures for web tests (Django test database). Keep them generic: other suites use them too."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through Playwright, one per test module.

    Module scope keeps Playwright's event loop out of the non-browser tests that follow.
    """
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it when run as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def demo_defaults(db):
    """The demo study, the offline model pool and the topics, exactly as ``attune demo`` installs them."""
    from collection.setup import ensure_defaults

    return ensure_defaults()


@pytest.fixture
def study(demo_defaults):
    return demo_defaults.study


@pytest.fixture
def participant(study):
    """A freshly invited participant of the demo study."""
    from collection.study_flow import do_enrol

    return do_enrol(study)


class FakeOpenAIServer:
    """A tiny local OpenAI-compatible chat endpoint, so live-model code paths run without any real provider.

    ``fail_next`` makes the next N chat requests answer HTTP 500; ``reply`` is
    what successful requests return (streamed word by word when asked to stream),
    after the queued ``replies`` have been given one per streamed request.
    ``model_seen`` records the model names requests asked for. Setting ``gate`` to a
    ``threading.Event`` makes streams hang after their first word (after word number
    ``hold_after``, counted from 0) until it is set; ``holding`` is released once for
    each stream that reached that point.
    """

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                import json

                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                if server.fail_next > 0:
                    server.fail_next -= 1
                    payload = json.dumps({"error": {"message": "upstream overloaded", "type": "server_error"}}).encode()
                    self.send_response(500)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                model = body.get("model", "")
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    words = (server.replies.pop(0) if server.replies else server.reply).split(" ")
                    for i, word in enumerate(words):
                        chunk = {
                            "id": "c1",
                            "object": "chat.completion.chunk",
                            "created": 1,
                            "model": model,
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {"content": word if i == 0 else " " + word},
                                    "finish_reason": None,
                                }
                            ],
                        }
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        if i == server.hold_after and server.gate is not None:  # a hung provider: silence
                            server.holding.release()
                            server.gate.wait(timeout=300)
                    end = {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": 1,
                        "model": model,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    }
                    self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                    self.wfile.flush()
                    return
                payload = json.dumps(
                    {
                        "id": "c2",
                        "object": "chat.completion",
                        "created": 1,
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": server.rewrite},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.requests: list[dict] = []
        self.fail_next = 0
        self.replies: list[str] = []  # streamed replies to give first, in order; then ``reply`` every time
        self.gate: threading.Event | None = None
        self.hold_after = 0
        self.holding = threading.Semaphore(0)
        self.reply = "I am here with you. That sounds really hard. What feels heaviest right now?"
        self.rewrite = "That sounds so hard, and it makes sense you feel this way. What would help most right now?"
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def fake_openai_server(monkeypatch):
    """A running FakeOpenAIServer; litellm gets a dummy key so it talks to it like any OpenAI endpoint."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    import litellm  # noqa: F401  (imported up front: its first import takes seconds and would eat UI timeouts)

    server = FakeOpenAIServer()
    yield server
    server.close()


# ---------------------------------------------------------------------------
# Research-side fixtures: personas and scored runs
# ---------------------------------------------------------------------------


@pytest.fixture
def researcher(db, django_user_model):
    """A staff account in the research group: the everyday research-team persona."""
    from research.access.roles import do_make_researcher

    user = django_user_model.objects.create_user("rita", password="researcher-pass-123")
    do_make_researcher(user)
    return user


@pytest.fixture
def site_admin(db, django_user_model):
    return django_user_model.objects.create_superuser("ada", "ada@example.org", "admin-pass-123")


@pytest.fixture
def rater(db, django_user_model):
    """A plain (non-staff) account that only rates conversations assigned to it."""
    return django_user_model.objects.create_user("ravi", password="rater-pass-123")


@pytest.fixture
def sample_conversations(db):
    """The 15 synthetic conversations of sample_data/, imported through the canonical importer."""
    from pathlib import Path

    from datasets.exchange import import_paths

    result = import_paths([Path(__file__).resolve().parents[2] / "sample_data"])
    assert result.ok, result.problems
    return result.imported


def make_scored_run(em_name: str, mode: str = "default", skill: float = 0.5, seed: int = 7):
    """A finished run of synthetic predictions over every complete conversation, scored and stored.

    Uses attunebench.synth.synth_run (a fake EM of tunable skill) rather than the
    replay engine, so dashboard and API tests do not depend on replay speed.
    """
    from django.utils import timezone

    from attunebench import canonical as cf
    from attunebench.synth import synth_run
    from datasets.exchange import iter_canonical
    from datasets.selection import complete_conversations
    from scoring.models import EvaluatedModel, EvaluationRun, RunConversation
    from scoring.run_scoring import do_score_evaluation_run

    kind = EvaluatedModel.Kind.OFFLINE if em_name.startswith("baseline:") else EvaluatedModel.Kind.LLM
    model, _ = EvaluatedModel.objects.get_or_create(name=em_name, defaults={"kind": kind})
    conversations = complete_conversations()
    run = EvaluationRun.objects.create(
        evaluated_model=model,
        mode=mode,
        status=EvaluationRun.Status.DONE,
        conversations_total=conversations.count(),
        conversations_done=conversations.count(),
        started_at=timezone.now(),
        finished_at=timezone.now(),
        calls_made=10 * conversations.count(),
        cost_usd=0.0,
    )
    pks = dict(conversations.values_list("conversation_id", "pk"))
    for document in iter_canonical(conversations, include_model_identity=True):
        output = synth_run(document, em_name, mode, seed, skill=skill)
        RunConversation.objects.create(
            run=run,
            conversation_id=pks[document.conversationId],
            status=RunConversation.Status.DONE,
            output=cf.to_canonical_dict(output),
        )
    do_score_evaluation_run(run.pk)
    return run


@pytest.fixture
def scored_runs(sample_conversations):
    """Three scored (model, mode) rows of different skill over the sample conversations."""
    return [
        make_scored_run("synth:strong", "default", skill=0.85),
        make_scored_run("synth:middling", "default", skill=0.5),
        make_scored_run("synth:weak", "verbose", skill=0.15),
    ]


@pytest.fixture
def export_dir(settings, tmp_path):
    """Exports written under the test's temporary directory, never into the real data dir."""
    from attune_site.object_store import EXPORTS, export_storage

    settings.ATTUNE_EXPORT_DIR = tmp_path / "exports"
    settings.STORAGES = {**settings.STORAGES, EXPORTS: export_storage("", settings.ATTUNE_EXPORT_DIR)}
    return settings.ATTUNE_EXPORT_DIR


@pytest.fixture
def schema_restored():
    """Migrates forward to the newest schema afterwards, even when a migration test failed half-way back in time."""
    from tests.migrations import migrate_to_newest

    yield
    migrate_to_newest()
