"""In the embedded default a run started from the API or the launcher returns at once and replays in the
background with the model's concurrency (``scoring.embedded_runs``).

A real ``attune serve`` process on a fresh data directory (SQLite, no REDIS_URL;
with DATABASE_URL set, the test run's own Postgres database) and the fake
OpenAI-compatible server of this process. The fake server holds every request
until the test lets them go, so:

- the request that started the run has returned while not one model call has
  been answered: it did not wait for the replay;
- the calls held at once are exactly the model's ``max_concurrency`` (8), not the
  three one conversation at a time allowed, and never more;
- the run page shows the run going, then done and scored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from devtools.served_site import ServedSite

pytestmark = pytest.mark.slow

CAP = 8
CONVERSATIONS = 10
PROBE = 1  # the launch's preflight: one real call before any run call
PATIENCE_S = 300  # generous bound on waiting for an outcome on a loaded machine; nothing is timed


def test_database_url() -> str | None:
    """The test run's own Postgres database when DATABASE_URL is set (``transactional_db`` empties it)."""
    import os

    from django.db import connection

    if not os.environ.get("DATABASE_URL"):
        return None
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


test_database_url.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.fixture
def provider() -> Iterator[FakeLLMServer]:
    # More than the cap can ever hold, for longer than the test: only the test's release lets them go. The first
    # request is the launch's preflight probe, answered at once (the launch waits for it).
    with FakeLLMServer(FakeConfig(hold_until_in_flight=CAP + 1, hold_timeout_s=600, hold_after=PROBE)) as running:
        yield running


@pytest.fixture
def site(transactional_db, tmp_path: Path, provider: FakeLLMServer) -> Iterator[tuple[ServedSite, str, int]]:
    with ServedSite(tmp_path / "data", database_url=test_database_url()) as served:
        token = served.researcher_token("rita")
        served.import_synth(CONVERSATIONS)
        model_pk = served.register_model("openai/fake-em", provider.url, max_concurrency=CAP)
        yield served, token, model_pk
    assert "Traceback" not in served.log, served.log


def wait_for(condition, what: str) -> None:
    """Poll ``condition`` until it holds (an outcome of other processes; the bound only stops a hang)."""
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)  # polling other processes for an outcome, not waiting out a duration


def test_a_run_started_from_the_api_returns_at_once_and_uses_the_models_concurrency(site, provider):
    served, token, _ = site
    api = httpx.Client(base_url=served.url, headers={"Authorization": f"Token {token}"}, timeout=120)
    started = api.post("/api/runs/", json={"models": ["openai/fake-em"], "modes": ["default"]})

    assert started.status_code == 201, started.text
    assert provider.stats()["completions"] == PROBE  # the request returned before a single run call was answered
    run_id = started.json()["runs"][0]["id"]
    wait_for(lambda: provider.stats()["in_flight"] == CAP, f"{CAP} calls in flight")
    going = api.get(f"/api/runs/{run_id}/").json()
    assert going["status"] == "running" and going["conversations_done"] == 0

    provider.configure(hold_until_in_flight=0)  # let every held call go
    wait_for(lambda: api.get(f"/api/runs/{run_id}/").json()["status"] == "done", "the run done")
    done = api.get(f"/api/runs/{run_id}/").json()
    assert done["conversations_done"] == CONVERSATIONS and done["composite_score"] is not None
    assert done["origin"] == "api" and done["provenance"]["user"] == "rita"
    assert done["calls_made"] == provider.stats()["requests"] - PROBE
    assert provider.stats()["peak_in_flight"] == CAP  # the model's cap: reached, never passed


def test_the_launcher_page_returns_at_once_too(site, provider):
    served, _, model_pk = site
    served.manage("create_researcher", "lena", "--password", "launcher-pass-8421")
    browser = httpx.Client(base_url=served.url, timeout=120, follow_redirects=False)
    login = browser.get("/research/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    signed_in = browser.post(
        "/research/login/",
        data={"csrfmiddlewaretoken": csrf, "username": "lena", "password": "launcher-pass-8421"},
        headers={"Referer": served.url + "/research/login/"},
    )
    assert signed_in.status_code == 302
    page = browser.get("/research/runs/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    assert f'name="models" value="{model_pk}"' in page.text

    launched = browser.post(
        "/research/runs/",
        data={
            "csrfmiddlewaretoken": csrf,
            "models": str(model_pk),
            "modes": "default",
            "panas_strategy": "absolute",
        },
        headers={"Referer": served.url + "/research/runs/"},
    )

    assert launched.status_code == 302 and launched.headers["Location"].endswith("/research/runs/")
    assert provider.stats()["completions"] == PROBE  # the page came back before any run call was answered
    wait_for(lambda: provider.stats()["in_flight"] == CAP, f"{CAP} calls in flight")
    run_id = served.shell("from scoring.models import EvaluationRun\nresult = EvaluationRun.objects.get().pk")
    going = browser.get(f"/research/runs/{run_id}/")
    assert "Started from <strong>Run launcher</strong> by lena" in going.text
    # The run's page shows the calls as they go out, as the CLI's progress line does.
    assert 'data-status="running"' in going.text and f"{CAP} calls sent so far" in going.text
    provider.configure(hold_until_in_flight=0)
    wait_for(lambda: 'data-status="done"' in browser.get(f"/research/runs/{run_id}/progress/").text, "the run done")
    assert provider.stats()["peak_in_flight"] == CAP
