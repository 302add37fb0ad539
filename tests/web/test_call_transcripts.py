"""Call transcripts: every model call of a run-conversation, as the provider saw it.

A replay against the local fake OpenAI-compatible server (devtools.fake_llm_server)
through the same run path workers use; the stored records are checked against
what the server received and answered, then read back on the researcher page and
through the API.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from attunebench.replay import prompts as P
from attunebench.replay.scheduler import Scheduler
from attunebench.replay.transcript import MAX_TEXT_CHARS, CallRecord, capped
from attunebench.synth import synth_conversations
from collection.models import Conversation
from datasets.exchange import import_documents
from devtools.fake_llm_server import FakeConfig, FakeLLMServer, answer_for, request_digest
from scoring import replay_service, run_control, transcripts
from scoring.models import CallTranscript, EvaluatedModel, EvaluationRun, RunConversation
from tests.web.test_research_api import assert_conforms

INPUT_PER_MILLION = 2.0
OUTPUT_PER_MILLION = 8.0


@pytest.fixture(autouse=True)
def fresh_replay_state():
    """Empty call caches (Redis's are emptied in tests/conftest.py) and a scheduler that retries at once
    (no backoff wait in tests)."""
    replay_service.reset_process_state()
    replay_service._state.scheduler = Scheduler(max_concurrency=4, base_delay=0.0)
    yield
    replay_service.reset_process_state()


def import_one() -> str:
    (doc,) = synth_conversations(1, seed=5, min_turns=2, max_turns=2)
    result = import_documents([(doc.conversationId, doc)])
    assert result.ok, result.problems
    return doc.conversationId


def fake_answer(messages: list[dict], seed: int) -> str:
    """The reply the fake server gives to these messages (its seed rule, see devtools.fake_llm_server)."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    return answer_for(messages, int.from_bytes(digest[:8], "big") ^ seed)[1]


def the_calls(run: EvaluationRun, conversation_id: str) -> list[CallTranscript]:
    item = RunConversation.objects.get(run=run, conversation__conversation_id=conversation_id)
    return list(CallTranscript.objects.filter(run_conversation=item).order_by("sequence"))


# transaction=True: the call cache writes from its own thread, which SQLite's shared in-memory
# test database would refuse while this test held a transaction open.
@pytest.mark.django_db(transaction=True)
def test_a_replay_stores_the_exact_prompts_replies_tokens_and_retries_and_shows_them(researcher):
    conversation_id = import_one()
    # Request 1 fails with a 500 (retried by the scheduler); request 3 gets an unusable reply (re-asked).
    with FakeLLMServer(FakeConfig(script=["500", "ok", "malformed"])) as server:
        EvaluatedModel.objects.create(
            name="fake-em",
            litellm_model="openai/fake-em",
            api_base=server.url,
            params={"temperature": 0},
            input_cost_per_million=INPUT_PER_MILLION,
            output_cost_per_million=OUTPUT_PER_MILLION,
        )
        run = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(run.pk)
        run.refresh_from_db()
        assert run.status == EvaluationRun.Status.DONE
        received = server.digests()
        stats = server.stats()
        calls = the_calls(run, conversation_id)

        # One row per request that was answered: the 500 is a transport retry inside the first row.
        assert len(calls) == stats["completions"]
        assert run.calls_made == len(calls) + 1  # the run counts every request sent, the 500 too
        assert [c.sequence for c in calls] == list(range(len(calls)))
        first, analysis, reask = calls[0], calls[1], calls[2]
        assert (first.call_type, first.turn_number, first.transport_attempts) == (P.DRAFT, 1, 2)
        assert (analysis.call_type, analysis.attempt, analysis.parsed) == (P.ANALYSIS, 1, None)
        assert analysis.parse_error and analysis.raw_reply
        assert (reask.call_type, reask.attempt) == (P.ANALYSIS, 2) and reask.parsed is not None
        # The re-ask is the first prompt plus the unusable reply and the correction.
        assert reask.messages[: len(analysis.messages)] == analysis.messages
        assert reask.messages[len(analysis.messages)]["content"] == analysis.raw_reply
        assert {c.call_type for c in calls} >= {P.DRAFT, P.ANALYSIS, P.POST}

        for call in calls:
            assert not call.cached and call.role == "em" and call.model == "fake-em"
            # Exactly the messages the server received ...
            assert request_digest(call.messages) in received
            prompt_chars = sum(len(m["content"]) for m in call.messages)
            assert call.prompt_tokens == prompt_chars // 4 + 1
            assert call.completion_tokens == len(call.raw_reply) // 4 + 1
            assert call.cost_usd == pytest.approx(
                (call.prompt_tokens * INPUT_PER_MILLION + call.completion_tokens * OUTPUT_PER_MILLION) / 1e6
            )
            assert call.latency_s is not None and call.latency_s >= 0
            if call.pk != analysis.pk:
                # ... and exactly the reply it gave, parsed.
                assert call.raw_reply == fake_answer(call.messages, 0)
                assert call.parsed is not None and call.parse_error == "" and call.error == ""
        assert sum(c.cost_usd for c in calls) == pytest.approx(run.cost_usd)

        # The researcher page shows the prompt, the raw reply and the numbers.
        client = Client()
        client.force_login(researcher)
        page = client.get(reverse("research:transcript", args=[run.pk, conversation_id]))
        assert page.status_code == 200
        body = page.content.decode()
        post = calls[-1] if calls[-1].call_type == P.POST else next(c for c in calls if c.call_type == P.POST)
        assert escape(post.messages[-1]["content"]) in body
        assert escape(post.raw_reply) in body
        assert escape(analysis.parse_error) in body and "unusable" in body
        assert f'data-call="{len(calls) - 1}"' in body and "cache hit" not in body
        assert "Research use only" in body
        # ... linked from the run's drill-down.
        drill = client.get(reverse("research:drilldown", args=[run.pk, conversation_id])).content.decode()
        assert reverse("research:transcript", args=[run.pk, conversation_id]) in drill

        # The API returns the same records.
        api = client.get(reverse("api:run-transcript", args=[run.pk, conversation_id]))
        assert api.status_code == 200
        data = api.json()
        assert data["run"] == run.pk and data["conversation_id"] == conversation_id and data["status"] == "done"
        assert [c["messages"] for c in data["calls"]] == [c.messages for c in calls]
        assert [c["raw_reply"] for c in data["calls"]] == [c.raw_reply for c in calls]
        assert data["totals"]["sent"] == len(calls) and data["totals"]["retried"] == 2
        assert data["totals"]["prompt_tokens"] == sum(c.prompt_tokens for c in calls)

        # A second run is answered from the call cache: records say so, nothing is sent or paid.
        server.reset()
        replay_service.reset_process_state()
        replay_service._state.scheduler = Scheduler(max_concurrency=4, base_delay=0.0)
        again = replay_service.do_create_run("fake-em", "default")
        run_control.start_run(again.pk)
        assert server.stats()["requests"] == 0
        cached = the_calls(again, conversation_id)
        answered = [c for c in calls if c.parsed is not None]
        assert len(cached) == len(answered) and all(c.cached and c.latency_s is None for c in cached)
        assert sorted(c.raw_reply for c in cached) == sorted(c.raw_reply for c in answered)
        totals = client.get(reverse("api:run-transcript", args=[again.pk, conversation_id])).json()["totals"]
        assert (totals["sent"], totals["cached"], totals["prompt_tokens"]) == (0, len(cached), 0)
        assert (
            "cache hit" in client.get(reverse("research:transcript", args=[again.pk, conversation_id])).content.decode()
        )


@pytest.mark.django_db
def test_offline_models_and_their_judge_leave_records_too(researcher):
    conversation_id = import_one()
    run = replay_service.do_create_run("baseline:lexicon", "default", judge_name="baseline:random")
    run_control.start_run(run.pk)
    calls = the_calls(run, conversation_id)
    item = RunConversation.objects.get(run=run, conversation__conversation_id=conversation_id)
    assert len(calls) > 0 and item.calls_made == 0  # offline predictions are recorded, but are not calls
    assert {c.role for c in calls} == {"em", "judge"}
    assert {c.model for c in calls if c.role == "judge"} == {"baseline:random"}
    assert all(c.messages and c.raw_reply and c.parsed is not None for c in calls)
    assert all(c.cost_usd == 0 and not c.cached and c.transport_attempts == 1 for c in calls)
    client = Client()
    client.force_login(researcher)
    path = reverse("api:run-transcript", args=[run.pk, conversation_id])
    response = client.get(path)
    data = response.json()
    assert data["totals"]["calls"] == len(calls) and data["totals"]["cost_usd"] == 0
    # The response is what the OpenAPI schema documents.
    template = "/api/runs/{id}/conversations/{conversation_id}/transcript/"
    assert_conforms("GET", path, response, template=template)


@pytest.mark.django_db
def test_a_conversation_without_output_or_unknown_says_so(researcher):
    conversation_id = import_one()
    run = replay_service.do_create_run("baseline:lexicon", "default")  # created, not started
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("research:transcript", args=[run.pk, conversation_id])).content.decode()
    assert 'id="transcript-empty"' in page
    missing = client.get(reverse("api:run-transcript", args=[run.pk, "no-such-conversation"]))
    # The answer never repeats the id asked for: a withdrawn participant's id is not confirmed either way.
    assert (
        missing.status_code == 404 and missing.json()["detail"] == "No such conversation, or its participant withdrew."
    )
    template = "/api/runs/{id}/conversations/{conversation_id}/transcript/"
    assert_conforms("GET", reverse("api:run-transcript", args=[run.pk, "no-such-conversation"]), missing, template)


def test_runaway_texts_are_capped_and_say_so():
    text = "x" * (MAX_TEXT_CHARS + 5)
    kept = capped(text)
    assert kept is not None and kept.startswith("x" * MAX_TEXT_CHARS) and "5 more characters not stored" in kept
    assert capped("short") == "short" and capped(None) is None


@pytest.mark.django_db
def test_stored_records_read_back_exactly_across_batches_and_replace_the_earlier_ones():
    """save_call_records inserts rows as VALUES (see its docstring): every field of every row must come
    back as it went in, over more rows than one insert batch holds, with the characters JSON and SQL
    escape (quotes, backslashes, newlines, non-ASCII), a null parsed answer, and a second save that
    replaces the first."""
    conversation_id = import_one()
    run = EvaluationRun.objects.create(evaluated_model=EvaluatedModel.objects.create(name="records-em"))
    item = RunConversation.objects.create(
        run=run, conversation=Conversation.objects.get(conversation_id=conversation_id)
    )
    tricky = 'She said "I can\'t" \\ then\n\ttabbed, {braces} [1,2] — café ☕ 日本'

    def records(count: int, suffix: str) -> list[CallRecord]:
        return [
            CallRecord(
                sequence=i,
                call_type=P.DRAFT if i % 2 else P.ANALYSIS,
                turn_number=None if i == 0 else i,
                role="judge" if i % 5 == 0 else "em",
                model=f"records-em{suffix}",
                attempt=1 + i % 3,
                messages=[{"role": "system", "content": f"{tricky} {i}"}, {"role": "user", "content": suffix}],
                raw_reply=None if i % 7 == 0 else f"{tricky} reply {i}{suffix}",
                parsed=None if i % 4 == 0 else {"response": tricky, "n": i, "nested": {"list": [i, None, "x"]}},
                parse_error="" if i % 4 else f"bad {tricky}",
                error="" if i % 7 else "timeout",
                prompt_tokens=i,
                completion_tokens=2 * i,
                cost_usd=None if i % 6 == 0 else i / 1e6,
                latency_s=None if i % 7 == 0 else i / 100,
                transport_attempts=i % 4,
                cached=i % 3 == 0,
            )
            for i in range(count)
        ]

    first = records(450, "-first")  # more rows than one insert batch (200) holds
    with CaptureQueriesContext(connection) as queries:
        assert transcripts.save_call_records(item.pk, first) == 450
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert inserts and not any("UNNEST" in sql for sql in inserts)  # the VALUES form, on PostgreSQL too
    assert transcripts.call_dicts(item) == [r.to_dict() for r in first]

    second = records(3, "-second")
    assert transcripts.save_call_records(item.pk, second) == 3
    assert transcripts.call_dicts(item) == [r.to_dict() for r in second]
    assert CallTranscript.objects.filter(run_conversation=item).count() == 3
