"""``/metrics``: the Prometheus text an operator scrapes, who may scrape it, and figures that move with the work."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from annotation.tasks import prepare_rewrite
from attune_site import queues
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from devtools.fake_llm_server import FakeConfig, FakeLLMServer
from scoring import replay_service, run_control
from scoring.models import EvaluatedModel, EvaluationRun

LOCAL = {"REMOTE_ADDR": "127.0.0.1"}


def scrape(client: Client, **extra: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape, keyed by name and sorted labels."""
    response = client.get("/metrics", **{**LOCAL, **extra})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.django_db
def test_metrics_are_served_to_this_machine_and_to_the_token_only(client, settings):
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403
    # through a proxy on this machine: the client is elsewhere
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 403
    assert client.get("/metrics", **LOCAL).status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200

    settings.ATTUNE_METRICS_TOKEN = "s3cret-metrics-token"
    elsewhere = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token", **elsewhere).status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong", **elsewhere).status_code == 403
    refused = client.get("/metrics", **elsewhere)
    assert refused.status_code == 403 and b"ATTUNE_METRICS_TOKEN" in refused.content
    assert client.post("/metrics", **LOCAL).status_code == 405


@pytest.mark.django_db
def test_every_queue_and_export_state_is_reported_even_when_empty(client):
    samples = scrape(client)
    for queue in queues.ALL_QUEUES:
        assert ("attune_queue_depth", (("queue", queue),)) in samples
    for state in ("queued", "running", "done", "failed"):
        assert ("attune_export_jobs", (("state", state),)) in samples


@pytest.mark.celery  # tasks go to the broker: no worker runs here, so they stay queued
@pytest.mark.django_db
@pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real broker)")
def test_queue_depth_moves_when_tasks_are_queued(client):
    import redis

    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete(*queues.ALL_QUEUES)
    try:
        before = scrape(client)
        for _ in range(3):
            prepare_rewrite.delay(10**9)
        after = scrape(client)
        assert (
            value(after, "attune_queue_depth", queue="interactive")
            == value(before, "attune_queue_depth", queue="interactive") + 3
        )
        assert value(after, "attune_queue_depth", queue="bulk") == value(before, "attune_queue_depth", queue="bulk")
    finally:
        broker.delete(*queues.ALL_QUEUES)


@pytest.mark.django_db
def test_task_runs_are_counted_by_outcome_with_their_duration(client):
    before = scrape(client)
    assert prepare_rewrite.delay(10**9).get() is False  # in-process here: the turn does not exist
    after = scrape(client)
    runs = ("attune_task_runs_total", {"task": "annotation.prepare_rewrite", "outcome": "success"})
    assert value(after, runs[0], **runs[1]) == value(before, runs[0], **runs[1]) + 1
    count = ("attune_task_duration_seconds_count", {"task": "annotation.prepare_rewrite"})
    assert value(after, count[0], **count[1]) == value(before, count[0], **count[1]) + 1


@pytest.mark.django_db(transaction=True)
def test_replay_calls_are_counted_per_provider_with_their_latency(client):
    docs = synth_conversations(1, seed=51, min_turns=2, max_turns=2)
    assert import_documents([(d.conversationId, d) for d in docs]).ok
    before = scrape(client)
    with FakeLLMServer(FakeConfig()) as server:
        EvaluatedModel.objects.create(
            name="fake-em", litellm_model="openai/fake-em", api_base=server.url, params={"temperature": 0}
        )
        run = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(run.pk)
        sent = server.stats()["requests"]
    assert EvaluationRun.objects.get(pk=run.pk).status == EvaluationRun.Status.DONE and sent > 0
    after = scrape(client)
    calls = value(after, "attune_replay_calls_total", provider="openai") - value(
        before, "attune_replay_calls_total", provider="openai"
    )
    assert calls == sent
    latency = value(after, "attune_replay_call_seconds_count", provider="openai") - value(
        before, "attune_replay_call_seconds_count", provider="openai"
    )
    assert latency == sent
    assert value(after, "attune_replay_call_failures_total", provider="openai") == value(
        before, "attune_replay_call_failures_total", provider="openai"
    )


@pytest.mark.django_db
def test_participant_pages_are_timed_by_view_name_never_by_their_link(client, participant):
    from collection.study_flow import do_issue_link

    link = f"/s/{do_issue_link(participant)}/"
    before = scrape(client)
    assert Client().get(link).status_code in (200, 302)
    after = scrape(client)
    timed = {
        labels
        for (name, labels), count in after.items()
        if name == "attune_participant_request_seconds_count" and count > before.get((name, labels), 0)
    }
    assert timed == {(("view", "resume"),)}
    assert ("attune_reply_streams_open", ()) in after
