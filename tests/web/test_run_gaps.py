"""The launcher and the API check every model before a run, and a run with failed turns can be finished.

Against local servers (the fake OpenAI-compatible provider and a closed port): the preflight refuses a launch
that could not work and says what and where, without creating a run; a run whose model fails one kind of call
ends "done with gaps", lists its failed turns by kind on its page, is marked on the leaderboard, and "Retry failed
turns" (web and API) replays only those: the provider receives exactly the calls that had failed.
"""

from __future__ import annotations

import socket

import pytest
from django.test import Client

from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from scoring.models import EvaluatedModel, EvaluationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def register(name: str, api_base: str) -> EvaluatedModel:
    return EvaluatedModel.objects.create(name=name, litellm_model="openai/fake-em", api_base=api_base)


def launch(api: Client, *models: str, **extra: object):
    return api.post(
        "/api/runs/",
        {"models": list(models), "modes": ["default"], "topic_categories": ["Grief", "Work"], **extra},
        content_type="application/json",
    )


def test_the_api_refuses_a_launch_whose_model_cannot_answer_and_says_why(api, sample_conversations):
    url = closed_port_url()
    register("closed", url)
    with (
        FakeLLMServer(FakeConfig(answer_text='{"text": "hi"}')) as wrong,
        FakeLLMServer(FakeConfig(api_key="sk-right")) as keyed,
    ):
        register("wrong-format", wrong.url)
        register("keyed", keyed.url)
        closed = launch(api, "closed")
        unusable = launch(api, "wrong-format")
        refused = launch(api, "keyed", "baseline:lexicon")
    assert closed.status_code == 409
    assert closed.json()["detail"] == f"Preflight failed, nothing was started: closed: connection refused at {url}"
    assert (
        unusable.status_code == 409
        and 'wrong-format: the answer to a draft call has no "response" field' in (unusable.json()["detail"])
    )
    host = keyed.url.split("//")[1].split("/")[0]
    assert refused.status_code == 409 and f"keyed: 401 from {host}" in refused.json()["detail"]
    assert not EvaluationRun.objects.exists()  # nothing started, not even the baseline launched beside it


def test_the_launcher_page_refuses_a_closed_port_with_the_preflights_message(api, sample_conversations):
    url = closed_port_url()
    model = register("closed", url)
    page = api.post(
        "/research/runs/", {"models": [model.pk], "modes": ["default"], "panas_strategy": "absolute"}, follow=True
    )
    assert f"closed: connection refused at {url}" in page.content.decode()
    assert not EvaluationRun.objects.exists()


# transaction=True: the call cache writes from its own thread, which SQLite's shared in-memory test
# database would lock out of the test's transaction.
@pytest.mark.django_db(transaction=True)
def test_a_gapped_run_is_done_with_gaps_and_retry_makes_only_the_failed_calls(
    api, sample_conversations, django_capture_on_commit_callbacks
):
    with FakeLLMServer(FakeConfig(broken_call_types=["post"])) as server:
        register("post-shy", server.url)
        with django_capture_on_commit_callbacks(execute=True):
            created = launch(api, "post-shy")
        assert created.status_code == 201, created.content
        run = EvaluationRun.objects.get()
        assert run.status == EvaluationRun.Status.DONE and run.gaps == run.conversations_total == 4
        body = api.get(f"/api/runs/{run.pk}/").json()
        assert body["status"] == "done" and body["status_label"] == "Done with gaps" and body["gaps"] == 4
        page = api.get(f"/research/runs/{run.pk}/").content.decode()
        assert "Done with gaps" in page and 'id="run-gaps"' in page
        assert 'data-reason="unusable answer"' in page and page.count('<tr class="gap">') == 4
        assert 'id="retry-failed"' in page
        board = api.get("/research/").content.decode()
        assert "partly defaults" in board

        server.configure(broken_call_types=[])
        server.reset()
        with django_capture_on_commit_callbacks(execute=True):
            retried = api.post(f"/api/runs/{run.pk}/retry-failed/")
        assert retried.status_code == 200
        stats = server.stats()
    run.refresh_from_db()
    # Only the four failed post-conversation calls reached the provider: every other answer came from the cache.
    assert stats["by_call_type"] == {"post": 4} and stats["requests"] == 4
    assert run.status == EvaluationRun.Status.DONE and run.gaps == 0 and run.status_label == "Done"
    assert run.conversations_done == 4 and run.score.metrics["post_coverage"] == 1
    assert 'id="run-gaps"' not in api.get(f"/research/runs/{run.pk}/").content.decode()
    again = api.post(f"/api/runs/{run.pk}/retry-failed/")
    assert again.status_code == 409 and "no failed or defaulted turns" in again.json()["detail"]


# transaction=True: the call cache writes from its own thread, which SQLite's shared in-memory test
# database would lock out of the test's transaction.
@pytest.mark.django_db(transaction=True)
def test_the_web_button_retries_a_failed_run(api, sample_conversations, django_capture_on_commit_callbacks):
    with FakeLLMServer(FakeConfig(broken_call_types=["analysis"])) as server:
        register("analysis-shy", server.url)
        with django_capture_on_commit_callbacks(execute=True):
            assert launch(api, "analysis-shy").status_code == 201
        run = EvaluationRun.objects.get()
        assert run.gaps == 4 and run.score.metrics["coverage"] == 0
        server.configure(broken_call_types=[])
        server.reset()
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(f"/research/runs/{run.pk}/retry-failed/", {"next": f"/research/runs/{run.pk}/"})
        assert response.status_code == 302 and response["Location"] == f"/research/runs/{run.pk}/"
        stats = server.stats()
    run.refresh_from_db()
    assert run.gaps == 0 and run.score.metrics["coverage"] == 1
    assert "draft" not in stats["by_call_type"]  # the drafts were answered the first time: from the cache
