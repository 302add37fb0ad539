"""Live original models: streamed from a provider, a fallback when it fails, dollar spend vs budget.

A local OpenAI-compatible server (conftest's FakeOpenAIServer) stands in for the
provider. The priced model is registered with litellm at 0 USD per prompt token
and 0.50 USD per completion token, and replies "Hello" (one token), so one call
costs exactly 0.50 USD.
"""

from __future__ import annotations

import asyncio
import threading
from decimal import Decimal

import pytest

from annotation.alternates import improved_reply, offline_rewrite
from collection.chat_model import CallRecord, ChatModelError, ReplyRequest, _background_loop, _pump, stream_reply
from collection.live_spend import price_call, study_spend
from collection.models import Conversation, LiveCall, OriginalModel, Study, Turn
from collection.study_flow import LIVE_BUDGET_MESSAGE
from tests.web.test_participant_flow import Walker, personal_link_shown

pytestmark = pytest.mark.embedded  # the chat's reply locks and spend live in the cache: Redis or the process's memory

PRICED = "openai/attune-priced"
UNPRICED = "openai/attune-unpriced-model"


@pytest.fixture(autouse=True)
def priced_model():
    import litellm

    litellm.register_model(
        {
            PRICED: {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.5,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )


@pytest.fixture
def live(settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    fake_openai_server.reply = "Hello"
    return fake_openai_server


def request_for(server, model: str = PRICED, fallback: str = "") -> ReplyRequest:
    return ReplyRequest(
        model_key="om-live",
        litellm_model=model,
        api_base=server.api_base,
        messages=[{"role": "user", "content": "I feel anxious about exams."}],
        category="Study",
        subtopic="Exams",
        turn_number=1,
        fallback_litellm_model=fallback,
        fallback_api_base=server.api_base if fallback else "",
    )


def test_a_live_reply_reaches_the_reader_before_the_provider_has_finished(live):
    live.reply = "I am here with you and I am listening"
    held = "I am here with"
    live.gate, live.hold_after = threading.Event(), len(held.split(" ")) - 1  # then silence until let go
    record = CallRecord()
    stream = stream_reply(request_for(live), record)
    shown = ""
    try:
        while shown != held:  # whatever had arrived, piece by piece, never a word the provider held back
            shown += next(stream)
            assert held.startswith(shown), shown
    finally:
        live.gate.set()
    assert shown + "".join(stream) == live.reply
    assert record.answered_by == PRICED and live.requests[0]["stream"] is True


def replies_on_the_chat_loop() -> list[asyncio.Task]:
    """The reply tasks still running on the process's chat loop."""

    async def running() -> list[asyncio.Task]:
        return [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == _pump.__qualname__]

    return asyncio.run_coroutine_threadsafe(running(), _background_loop()).result(timeout=10)


def test_a_reader_that_leaves_early_closes_the_provider_stream_and_frees_the_reply(live):
    live.reply = "I am here with you and I am listening"
    live.gate = threading.Event()  # the provider holds after its first word
    before = set(replies_on_the_chat_loop())
    stream = stream_reply(request_for(live))
    try:
        assert next(stream) == "I"
        assert set(replies_on_the_chat_loop()) - before  # this reply's task is running
        stream.close()  # the participant's browser went away: the reply's task ends, closing the provider stream
        assert set(replies_on_the_chat_loop()) - before == set()
    finally:
        live.gate.set()
    with pytest.raises(StopIteration):
        next(stream)
    assert "".join(stream_reply(request_for(live))) == live.reply  # the chat loop serves the next reply


def test_the_fallback_answers_when_the_provider_fails(live):
    live.fail_next = 1
    record = CallRecord()
    assert "".join(stream_reply(request_for(live, model=UNPRICED, fallback=PRICED), record)) == "Hello"
    assert [r["model"] for r in live.requests] == ["attune-unpriced-model", "attune-priced"]
    assert [(a.litellm_model, a.succeeded) for a in record.attempts] == [(UNPRICED, False), (PRICED, True)]
    assert record.answered_by == PRICED


def test_without_a_fallback_or_when_it_fails_too_the_participant_gets_the_calm_error(live):
    live.fail_next = 1
    with pytest.raises(ChatModelError):
        list(stream_reply(request_for(live)))
    live.fail_next = 2
    record = CallRecord()
    with pytest.raises(ChatModelError):
        list(stream_reply(request_for(live, fallback=PRICED), record))
    assert record.answered_by == "" and len(record.attempts) == 2


def test_once_the_calls_of_a_reply_are_counted_no_further_call_starts(live):
    """A reader that gave up on a stuck chat loop counts the calls made so far; the loop, when it moves on,
    must not then pay for a fallback or a regeneration that nobody would count."""
    record = CallRecord()
    assert "".join(stream_reply(request_for(live), record)) == "Hello"
    counted = record.close()
    assert [(a.litellm_model, a.succeeded) for a in counted] == [(PRICED, True)]
    with pytest.raises(ChatModelError):
        list(stream_reply(request_for(live, fallback=PRICED), record))
    assert len(live.requests) == 1  # the refused call never reached the provider
    assert record.close() == counted
    # Closed before its first call: neither the model nor its fallback is asked.
    unused = CallRecord()
    unused.close()
    with pytest.raises(ChatModelError):
        list(stream_reply(request_for(live, fallback=PRICED), unused))
    assert len(live.requests) == 1 and unused.close() == []


def test_prices_come_from_litellm_and_unpriced_models_are_none():
    assert price_call(PRICED, [{"role": "user", "content": "anything at all"}], "Hello") == Decimal("0.5")
    assert price_call(UNPRICED, [{"role": "user", "content": "x"}], "Hello") is None


def test_the_chat_prices_calls_by_the_rule_the_replay_uses():
    """One pricing rule (attunebench.pricing): a streamed reply's tokens are counted, then priced exactly as the
    replay prices a call of that size to the same model."""
    from attunebench import pricing
    from attunebench.replay.llm import EMSpec, call_cost

    messages = [{"role": "user", "content": "I have had a long week and could use some advice."}]
    reply = "That sounds tiring. What part of the week weighed on you most?"
    prompt_tokens, completion_tokens = pricing.count_tokens("gpt-4o-mini", messages, reply)
    assert prompt_tokens > 5 and completion_tokens > 5
    replayed = call_cost(EMSpec(name="m", litellm_model="gpt-4o-mini"), prompt_tokens, completion_tokens)
    assert replayed is not None and price_call("gpt-4o-mini", messages, reply) == Decimal(str(replayed)).quantize(
        Decimal("0.00000001")
    )


def live_walker(client, participant, server, model: str = PRICED, fallback: str = "") -> tuple[Walker, Conversation]:
    walker = Walker(client, participant)
    conversation = walker.to_chat()
    OriginalModel.objects.filter(pk=conversation.original_model_id).update(
        litellm_model=model,
        api_base=server.api_base,
        fallback_litellm_model=fallback,
        fallback_api_base=server.api_base,
    )
    return walker, conversation


def test_a_participants_reply_records_who_answered_and_what_it_cost(client, participant, live):
    walker, conversation = live_walker(client, participant, live, model=UNPRICED, fallback=PRICED)
    live.fail_next = 1
    assert walker.send("I feel anxious about exams.", 1).status_code == 200
    events = walker.reply(1)
    assert events[-1]["type"] == "done"
    assert "".join(e["text"] for e in events if e["type"] == "delta") == "Hello"
    turn = Turn.objects.get(conversation=conversation, turn_number=1)
    assert (turn.llm_response, turn.answered_by) == ("Hello", PRICED)
    assert sorted(LiveCall.objects.values_list("litellm_model", "succeeded")) == [(PRICED, True), (UNPRICED, False)]
    spend = study_spend(participant.study)
    # the failed call is counted but costs nothing; the fallback's one completion token costs 0.50
    assert (spend.cost_usd, spend.calls, spend.calls_unpriced) == (Decimal("0.5"), 2, 0)
    # the model's real identity never reached the participant
    assert "attune" not in str(events)


def test_unpriced_calls_are_counted_apart(client, participant, live):
    walker, _ = live_walker(client, participant, live, model=UNPRICED)
    walker.send("Hello there.", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    spend = study_spend(participant.study)
    assert (spend.cost_usd, spend.calls, spend.calls_unpriced, spend.budget) == (Decimal("0"), 1, 1, None)


def test_no_new_live_call_once_the_dollar_budget_is_spent(client, participant, live):
    Study.objects.filter(pk=participant.study_id).update(live_spend_budget_usd=Decimal("0.50"))
    walker, conversation = live_walker(client, participant, live)
    walker.turn(1)  # 0.50 spent: the budget is reached
    spend = study_spend(Study.objects.get(pk=participant.study_id))
    assert (spend.cost_usd, spend.budget, spend.spent) == (Decimal("0.5"), Decimal("0.50"), True)
    walker.send("And another thing.", 2)
    events = walker.reply(2)
    assert events[-1] == {"type": "error", "message": LIVE_BUDGET_MESSAGE}
    assert len(live.requests) == 1  # the provider was not called again
    assert Turn.objects.get(conversation=conversation, turn_number=2).user_message == "And another thing."
    # without a script, the participant gets the calm page, not a crash
    plain = walker.post(walker.url("chat/reply/2/"))
    assert plain.status_code == 503 and LIVE_BUDGET_MESSAGE.encode() in plain.content
    # the team raises the budget: the same message gets its reply
    Study.objects.filter(pk=participant.study_id).update(live_spend_budget_usd=Decimal("5.00"))
    assert walker.reply(2)[-1]["type"] == "done"
    assert study_spend(Study.objects.get(pk=participant.study_id)).cost_usd == Decimal("1.0")


def test_the_paused_page_shows_the_personal_link_and_its_address_opens_the_chat_later(client, participant, live):
    Study.objects.filter(pk=participant.study_id).update(live_spend_budget_usd=Decimal("0.50"))
    walker, _ = live_walker(client, participant, live)
    walker.turn(1)  # the budget is spent
    walker.send("And another thing.", 2)
    paused = walker.post(walker.url("chat/reply/2/"))
    html = walker.body(paused)
    assert paused.status_code == 503 and "The study is paused for now" in html
    assert personal_link_shown(html) == f"http://testserver{walker.url()}"
    reopened = walker.get(walker.url("chat/reply/2/"))  # the paused page's address, opened again later
    assert reopened.status_code == 302 and reopened.url == walker.url("chat/")


def test_a_live_rewrite_is_priced_into_the_spend(client, participant, live):
    live.rewrite = "Hello"  # what the fake server answers a rewrite prompt with: one completion token
    walker, conversation = live_walker(client, participant, live)
    walker.send("I feel anxious about exams.", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    turn = Turn.objects.get(conversation=conversation, turn_number=1)
    assert improved_reply(turn) == "Hello"  # the rewrite, through the original model
    # the reply and the rewrite: one completion token each at 0.50
    assert list(LiveCall.objects.filter(turn=turn).values_list("litellm_model", "succeeded", "cost_usd")) == [
        (PRICED, True, Decimal("0.5")),
        (PRICED, True, Decimal("0.5")),
    ]
    assert study_spend(participant.study).cost_usd == Decimal("1.0")
    # a failed rewrite is counted (nothing billed) and the participant gets the offline rewrite instead
    live.fail_next = 1
    assert improved_reply(turn) == offline_rewrite(turn.user_message, turn.llm_response)
    spend = study_spend(participant.study)
    assert (spend.cost_usd, spend.calls) == (Decimal("1.0"), 3)
    assert LiveCall.objects.filter(turn=turn, succeeded=False).count() == 1


def test_a_rewrite_by_a_model_its_server_answers_as_given_arrives_and_is_counted(client, participant, live):
    # a model litellm has no rules for, at a server of its own: the chat's direct route, for the rewrite too
    live.rewrite = "When you say exams make you anxious, I can hear how much they weigh on you. What feels heaviest?"
    walker, conversation = live_walker(client, participant, live, model=UNPRICED)
    walker.send("I feel anxious about exams.", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    turn = Turn.objects.get(conversation=conversation, turn_number=1)
    assert improved_reply(turn) == live.rewrite
    asked = live.requests[-1]  # what the server was sent: the served name, the rewrite instructions, no stream
    assert asked["model"] == "attune-unpriced-model" and not asked.get("stream")
    assert asked["messages"][0]["content"].startswith("Rewrite the assistant's last reply")
    assert "I feel anxious about exams." in asked["messages"][1]["content"]
    spend = study_spend(participant.study)
    assert (spend.calls, spend.calls_unpriced) == (2, 2)  # the reply and the rewrite
    # the server fails: the call is counted as failed and the participant gets the offline rewrite
    live.fail_next = 1
    assert improved_reply(turn) == offline_rewrite(turn.user_message, turn.llm_response)
    assert LiveCall.objects.filter(turn=turn, succeeded=False).count() == 1
    assert study_spend(participant.study).calls == 3


def test_the_demo_keeps_its_offline_models(client, participant, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    assert all(m.is_offline for m in OriginalModel.objects.all())
    walker = Walker(client, participant)
    walker.to_chat()
    walker.turn(1)
    assert LiveCall.objects.count() == 0
    assert Turn.objects.get(turn_number=1).answered_by == ""
