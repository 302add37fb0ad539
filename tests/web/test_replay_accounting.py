"""Honest accounting: every request the provider saw is counted once, crash or not.

The fake server counts what it was sent; the run's counters, its API and its
page must agree with it. A worker that dies after paying for answers leaves
them in the cache tagged with its attempt: the next attempt reuses them as
*recovered* (paid by this run, counted as paid) rather than as free cache hits,
and requests that were in flight when it died are counted from the write-ahead
count kept in the database.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from attunebench.replay.aio import run_sync
from attunebench.replay.courier import CourierBackend
from attunebench.synth import synth_conversations
from datasets.exchange import import_documents
from devtools.fake_llm_server import FakeConfig, FakeLLMServer, http_json
from scoring import replay_service, run_control
from scoring.models import LEGACY_PAID_KEY, EvaluatedModel, EvaluationRun, ModelCallCache, RunConversation
from tests.migrations import migrate_to_newest, unapply


@pytest.fixture(autouse=True)
def fresh_process_state():
    replay_service.reset_process_state()
    yield
    replay_service.reset_process_state()


def register(server_url: str) -> EvaluatedModel:
    return EvaluatedModel.objects.create(
        name="fake-em",
        litellm_model="openai/fake-em",
        api_base=server_url,
        params={"temperature": 0},
        input_cost_per_million=2.0,
        output_cost_per_million=8.0,
    )


def import_synth(seed: int) -> list[str]:
    docs = synth_conversations(1, seed=seed, min_turns=2, max_turns=2)
    assert import_documents([(d.conversationId, d) for d in docs]).ok
    return [d.conversationId for d in docs]


def die_after_paying(pk: int, counted_not_sent: int = 0) -> None:
    """A worker claims the conversation, pays for every answer, has one more request in flight, and is killed.

    Its answers reach the cache (written before use) tagged with its attempt; it stores nothing. Its calls
    go the way a worker's go here: through its call courier where there is one (Redis), else straight.
    ``counted_not_sent``: requests it counted and was killed before handing over.
    """
    item = replay_service._claim(pk, "doomed-host:1:abc")
    replay_service._mark_running(item.run)
    spec = replay_service.em_spec(item.run.evaluated_model)
    replayer = replay_service.attempt_replayer(item, spec, replay_service.run_config(item.run))
    run_sync(replayer.replay(replay_service.load_canonical([item.conversation_id])[item.conversation_id]))
    # One more request went out (the server saw it) and its answer died with the worker.
    count = replay_service._count_sent(pk)
    run_sync(count(1))
    messages = [{"role": "user", "content": "in flight when the worker died"}]
    if settings.ATTUNE_CALL_COURIER:
        courier = CourierBackend(replay_service._courier_connection(), replay_service.paid_tag(item, item.attempts))
        run_sync(courier.complete(spec, messages, None))  # type: ignore[arg-type]  # a courier reads no context
    else:
        http_json(f"{spec.api_base}/chat/completions", {"model": "fake-em", "messages": messages})
    for _ in range(counted_not_sent):
        run_sync(count(1))
    RunConversation.objects.filter(pk=pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    replay_service.reset_process_state()  # the worker's memory is gone with it


@pytest.mark.django_db(transaction=True)
def test_a_crash_neither_hides_nor_doubles_what_was_paid(client, researcher):
    import_synth(seed=31)
    with FakeLLMServer(FakeConfig()) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default")
        (pk,) = replay_service.do_prepare_run(run.pk)
        die_after_paying(pk)
        answered = ModelCallCache.objects.filter(paid_by=replay_service.paid_tag(RunConversation.objects.get(pk=pk), 1))
        logical_calls = answered.count()
        paid_cost = sum(row.cost_usd for row in answered)
        assert logical_calls > 0 and server.stats()["requests"] == logical_calls + 1

        assert run_control.sweep()["requeued"] == [pk]  # eager: the survivor replays it from the cache
        run.refresh_from_db()
        item = RunConversation.objects.get(pk=pk)

        # What the provider saw, counted once: the dead attempt's answered calls and the one lost in flight.
        assert server.stats()["requests"] == logical_calls + 1  # nothing was paid twice
        assert run.calls_made == item.calls_made == server.stats()["requests"]
        # Its answers are this run's own, recovered: not free hits from someone else's cache.
        assert (run.calls_recovered, run.calls_cached) == (logical_calls, 0)
        assert run.status == EvaluationRun.Status.DONE and (item.attempts, item.requeued) == (2, 1)
        assert run.cost_usd == pytest.approx(paid_cost) and run.cost_usd > 0

        client.force_login(researcher)
        api = client.get(f"/api/runs/{run.pk}/").json()
        assert (api["calls_made"], api["calls_recovered"], api["calls_cached"]) == (logical_calls + 1, logical_calls, 0)
        assert api["cost_usd"] == pytest.approx(paid_cost)
        page = client.get(reverse("research:run_progress", args=[run.pk])).content.decode()
        assert f"calls {logical_calls + 1}" in page and f"recovered after a crash {logical_calls}" in page

        # Another run of the same conversation pays nothing: its hits are another run's cache.
        server.reset()
        replay_service.reset_process_state()
        second = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(second.pk)
        second.refresh_from_db()
        assert server.stats()["requests"] == 0
        assert (second.calls_made, second.calls_cached, second.calls_recovered, second.cost_usd) == (
            0,
            logical_calls,
            0,
            0.0,
        )
        # Per conversation too: the first run paid for it what the run paid, the second nothing (its output
        # still prices the answers it holds, in api_cost).
        assert item.cost_usd == pytest.approx(run.cost_usd)
        states = client.get(f"/api/runs/{second.pk}/conversations/").json()["results"]
        assert [(s["calls_made"], s["calls_cached"], s["cost_usd"]) for s in states] == [(0, logical_calls, 0.0)]
        output = RunConversation.objects.get(run=second).output
        assert output["api_cost"] == pytest.approx(paid_cost)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not settings.ATTUNE_CALL_COURIER, reason="needs REDIS_URL (the call courier journals in Redis)")
@pytest.mark.parametrize("then", ["replayed", "withdrawn"])
def test_a_request_counted_by_a_worker_that_died_before_handing_it_to_its_courier_is_not_counted_as_paid(then):
    """The worker counts a request before handing it to its courier; dying in between, it counted one the
    provider never saw. The courier's own count (in Redis) is the provider's, whether the next attempt
    stores the conversation or fails it (the participant withdrew meanwhile)."""
    from collection.models import Conversation

    (conversation_id,) = import_synth(seed=37)
    with FakeLLMServer(FakeConfig()) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default")
        (pk,) = replay_service.do_prepare_run(run.pk)
        die_after_paying(pk, counted_not_sent=1)
        item = RunConversation.objects.get(pk=pk)
        answered = ModelCallCache.objects.filter(paid_by=replay_service.paid_tag(item, 1)).count()
        assert answered > 0 and server.stats()["requests"] == answered + 1
        assert item.paid_sent == answered + 2  # the worker's own count is one high
        if then == "withdrawn":
            Conversation.objects.filter(conversation_id=conversation_id).update(status=Conversation.Status.WITHDRAWN)

        assert run_control.sweep()["requeued"] == [pk]  # eager: the survivor replays it from the cache
        run.refresh_from_db()
        item.refresh_from_db()
        assert server.stats()["requests"] == answered + 1  # nothing was paid twice
        assert run.calls_made == item.calls_made == answered + 1
        if then == "replayed":
            assert (run.calls_recovered, run.calls_cached, run.status) == (answered, 0, EvaluationRun.Status.DONE)
        else:
            assert (item.status, item.error) == ("failed", replay_service.WITHDRAWN_NOT_REPLAYED)


@pytest.mark.django_db(transaction=True)
def test_retried_requests_are_counted_as_the_provider_saw_them():
    import_synth(seed=32)
    # Two 500s and a malformed reply: five logical calls cost eight requests at the provider.
    with FakeLLMServer(FakeConfig(script=["500", "500", "malformed"])) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default")
        in_this_process_fast_retries()
        run_control.start_run(run.pk)
        run.refresh_from_db()
        assert run.status == EvaluationRun.Status.DONE
        assert run.calls_made == server.stats()["requests"] == ModelCallCache.objects.count() + 3


def in_this_process_fast_retries() -> None:
    """Retries after a 500 wait a few milliseconds here instead of seconds."""
    from attunebench.replay.scheduler import Scheduler

    replay_service._state.scheduler = Scheduler(max_concurrency=8, base_delay=0.001, max_delay=0.01)


@pytest.mark.django_db(transaction=True)
def test_a_conversation_withdrawn_after_the_run_was_prepared_is_never_sent(client, researcher):
    from collection.models import Conversation

    kept, withdrawn = import_synth(seed=33) + import_synth(seed=34)
    with FakeLLMServer(FakeConfig()) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default", conversation_ids=[kept, withdrawn])
        replay_service.do_prepare_run(run.pk)
        # The participant withdraws while the run waits for a worker.
        Conversation.objects.filter(conversation_id=withdrawn).update(status=Conversation.Status.WITHDRAWN)
        run_control.start_run(run.pk)
        run.refresh_from_db()

        item = RunConversation.objects.get(run=run, conversation__conversation_id=withdrawn)
        assert (item.status, item.output, item.calls_made) == ("failed", None, 0)
        assert item.error == replay_service.WITHDRAWN_NOT_REPLAYED
        # Not one of its words reached the provider: every request the server saw is the other conversation's.
        other = RunConversation.objects.get(run=run, conversation__conversation_id=kept)
        assert other.status == "done" and server.stats()["requests"] == run.calls_made == other.calls_made > 0
        assert (run.status, run.conversations_done, run.conversations_failed) == ("done", 1, 1)

        # The researcher sees it nowhere, and the run page says why its lists are one short.
        client.force_login(researcher)
        states = client.get(f"/api/runs/{run.pk}/conversations/").json()
        assert [s["conversation_id"] for s in states["results"]] == [kept]
        page = client.get(reverse("research:run", args=[run.pk])).content.decode()
        assert withdrawn not in page
        assert "1 conversation of this run is left out of its lists, scores and download" in page


@pytest.mark.django_db(transaction=True)
def test_a_transcript_prices_what_was_answered_when_some_requests_got_no_answer(client, researcher):
    (conversation_id,) = import_synth(seed=35)
    # The first request is answered; every later one fails with a 500 until its retries run out.
    with FakeLLMServer(FakeConfig(script=["ok"] + ["500"] * 400)) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default")
        in_this_process_fast_retries()
        run_control.start_run(run.pk)
        run.refresh_from_db()
        assert server.stats()["completions"] == 1 and run.calls_failed > 0 and run.cost_usd > 0

        client.force_login(researcher)
        transcript = client.get(f"/api/runs/{run.pk}/conversations/{conversation_id}/transcript/").json()
        unanswered = [c for c in transcript["calls"] if c["error"] and not c["raw_reply"]]
        assert unanswered and all(c["cost_usd"] is None for c in unanswered)
        # The requests nobody answered were not billed: the total is the one answer's price, not "unknown".
        assert transcript["totals"]["cost_usd"] == pytest.approx(run.cost_usd)


@pytest.mark.django_db(transaction=True)
def test_a_resumed_failed_conversation_reuses_its_own_answers_as_this_runs_not_another_runs(client, researcher):
    import_synth(seed=36)
    # Two answers, then the provider fails every request: the conversation fails with two answers paid.
    with FakeLLMServer(FakeConfig(script=["ok", "ok"] + ["500"] * 400)) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default")
        in_this_process_fast_retries()
        run_control.start_run(run.pk)
        run.refresh_from_db()
        assert (run.status, run.conversations_failed) == ("failed", 1)
        first_requests = server.stats()["requests"]
        assert server.stats()["completions"] == 2 and run.calls_made == first_requests

        # The provider recovers and the researcher resumes the run.
        server.configure(script=[])
        run_control.resume_run(run.pk)
        run.refresh_from_db()
        assert run.status == "done"
        # The two answers come from the cache as this run's own (already counted in the first attempt):
        # not paid again, and not "cache hits" on another run's answers.
        assert (run.calls_reused, run.calls_cached, run.calls_recovered) == (2, 0, 0)
        assert max(server.digests().values()) == 1  # nothing was answered twice
        assert run.calls_made == server.stats()["requests"]  # every request, both attempts, counted once

        client.force_login(researcher)
        api = client.get(f"/api/runs/{run.pk}/").json()
        assert (api["calls_reused"], api["calls_cached"]) == (2, 0)
        (state,) = client.get(f"/api/runs/{run.pk}/conversations/").json()["results"]
        assert (state["calls_reused"], state["calls_cached"]) == (2, 0)
        page = client.get(reverse("research:run_progress", args=[run.pk])).content.decode()
        assert "reused from an earlier attempt 2" in page and "cache hits 0" in page


@pytest.mark.django_db(transaction=True)
def test_a_recreated_databases_answers_are_not_taken_for_this_conversations_own():
    """The call cache and the call journal outlive the database they were paid for (Redis, or rows kept).

    In a recreated database ids start again, so a run-conversation can have the id of one whose attempt
    paid for answers before: those are another run's cache hits here, not answers this one paid for.
    """
    import_synth(seed=38)
    with FakeLLMServer(FakeConfig()) as server:
        register(server.url)
        run = replay_service.do_create_run("fake-em", "default")
        (pk,) = replay_service.do_prepare_run(run.pk)
        earlier = RunConversation.objects.get(pk=pk)
        die_after_paying(pk)
        logical_calls = ModelCallCache.objects.filter(paid_by=replay_service.paid_tag(earlier, 1)).count()
        assert logical_calls > 0

        # The same id in the recreated database: a new row (its own key), nothing paid yet, and its first
        # attempt died too, so the next one looks for what attempt 1 paid.
        RunConversation.objects.filter(pk=pk).update(paid_key=uuid.uuid4(), paid_sent=0)
        server.reset()
        assert run_control.sweep()["requeued"] == [pk]
        run.refresh_from_db()

        assert run.status == EvaluationRun.Status.DONE
        assert (run.calls_recovered, run.calls_cached) == (0, logical_calls)
        assert run.calls_made == server.stats()["requests"] == 0 and run.cost_usd == 0.0


@pytest.mark.django_db(transaction=True)
def test_rows_from_before_the_paid_key_keep_their_tags_and_new_rows_get_their_own(schema_restored):
    """An upgrade must not cost a conversation interrupted across it what its earlier attempts paid for."""
    import_synth(seed=39)
    register("http://127.0.0.1:9/v1")
    first = replay_service.do_create_run("fake-em", "default")
    (pk,) = replay_service.do_prepare_run(first.pk)

    unapply("scoring", "0010_run_conversation_paid_key")
    migrate_to_newest()

    earlier = RunConversation.objects.get(pk=pk)
    assert earlier.paid_key == LEGACY_PAID_KEY
    assert replay_service.paid_tag(earlier, 1) == f"rc{pk}.a1"  # the tag its attempts were paid under
    assert replay_service.paid_attempt(f"rc{pk}.a1", earlier) == 1

    second = replay_service.do_create_run("fake-em", "default")
    (later_pk,) = replay_service.do_prepare_run(second.pk)
    later = RunConversation.objects.get(pk=later_pk)
    assert later.paid_key != LEGACY_PAID_KEY
    assert replay_service.paid_tag(later, 1) == f"rc{later_pk}.{later.paid_key.hex}.a1"
    assert replay_service.paid_attempt(f"rc{later_pk}.a1", later) is None
