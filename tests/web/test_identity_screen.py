"""Anonymity with live models: a provider that names itself, driven through the real chat flow."""

from __future__ import annotations

import json
import re
import threading

import pytest
from django.core.cache import cache

from annotation.models import AlternateResponses
from attunebench import catalogue as cat
from collection.identity_guard import MAX_REGENERATIONS, REGENERATION_REMINDER
from collection.models import OriginalModel, Turn
from tests.web.test_participant_flow import Walker, leaks

LEAKING = (
    "Thank you for telling me this. It sounds like a heavy week, and you have been carrying it mostly alone. "
    "To be honest with you, I'm GPT-4o, made by OpenAI, so I can only offer so much."
)
CLEAN = "That sounds like a heavy week to carry alone. What part of it is weighing on you most right now?"
NAMES = ["GPT-4o", "GPT 4o", "OpenAI", "gpt", "acme-frontier-9000"]


@pytest.fixture(autouse=True)
def _clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()


@pytest.fixture
def walker(client, participant) -> Walker:
    return Walker(client, participant)


@pytest.fixture
def live(settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name="acme-frontier-9000",
        provider="acme",
        litellm_model="openai/acme-frontier-9000",
        api_base=fake_openai_server.api_base,
    )
    fake_openai_server.reply = CLEAN  # what it says once the queued replies are used up
    return fake_openai_server


def _shown(events: list[dict]) -> str:
    """What the chat bubble holds at the end: deltas after the last restart."""
    text = ""
    for event in events:
        if event["type"] == "restart":
            text = ""
        elif event["type"] == "delta":
            text += event["text"]
    return text


def _reply_releasing_the_gate_once_shown(walker: Walker, gate: threading.Event) -> list[dict]:
    """The reply's events, read one at a time as a browser reads them; ``gate`` is set once text is shown."""
    response = walker.post(walker.url("chat/reply/1/"), HTTP_ACCEPT="application/x-ndjson")
    assert response.status_code == 200
    events = []
    for piece in response.streaming_content:
        for line in piece.decode().splitlines():
            if line:
                events.append(json.loads(line))
                if events[-1]["type"] == "delta":
                    gate.set()
    return events


def test_a_reply_that_names_its_model_is_asked_again_and_the_participant_never_sees_the_name(
    walker, live, client, researcher
):
    live.replies = [LEAKING]
    live.rewrite = "As ChatGPT I would say: that sounds like a heavy week. What would help most right now?"
    # The provider pauses after the clean start of the leaking reply until the participant has been shown
    # some of it: the name then arrives in text already on screen, which must be cleared.
    live.gate, live.hold_after = threading.Event(), LEAKING.split(" ").index("alone.")
    walker.to_chat()
    walker.send("This week has been so heavy and I feel alone with it.", 1)
    events = _reply_releasing_the_gate_once_shown(walker, live.gate)

    assert events[-1]["type"] == "done"
    assert "restart" in [e["type"] for e in events]  # a clean prefix of the leaking reply was shown, then cleared
    assert _shown(events) == CLEAN
    assert len(live.requests) == 2
    first, second = (r["messages"][0]["content"] for r in live.requests)
    assert "do not reveal, hint at or guess which AI model" in first and REGENERATION_REMINDER not in first
    assert second.endswith(REGENERATION_REMINDER)

    turn = Turn.objects.get()
    assert turn.llm_response == CLEAN
    # The first attempt is dropped at the first screen after "GPT-4o" arrived ("OpenAI" may be in by then).
    assert turn.identity_screen == "regenerated" and turn.identity_leaks[0] == "GPT"
    assert set(turn.identity_leaks) <= {"GPT", "OpenAI"}

    walker.get(walker.url("chat/"))
    walker.annotate(1)  # the live rewrite named a product: it is masked before the participant sees it
    rewrite = AlternateResponses.objects.get().llm_improved
    assert "ChatGPT" not in rewrite and cat.IDENTITY_MASK in rewrite
    assert leaks(walker.responses, [*NAMES, "ChatGPT"]) == []

    client.force_login(researcher)
    page = client.get("/research/collection/").content.decode()
    block = re.search(r'<div class="stat" id="identity-leaks">.*?</div></div>', page, re.S).group(0)
    assert '<div class="v">1</div>' in block and "1 asked again, 0 masked, of 1 screened replies" in block


def test_a_model_that_keeps_naming_itself_is_masked_after_the_bounded_retries(walker, live):
    live.replies = [LEAKING] * (MAX_REGENERATIONS + 1)
    walker.to_chat()
    walker.send("I feel alone with all of it.", 1)
    events = walker.reply(1)
    assert len(live.requests) == MAX_REGENERATIONS + 1
    shown = _shown(events)
    assert shown == LEAKING.replace("GPT-4o", cat.IDENTITY_MASK).replace("OpenAI", cat.IDENTITY_MASK)
    turn = Turn.objects.get()
    assert (turn.llm_response, turn.identity_screen) == (shown, "masked")
    assert leaks(walker.responses, NAMES) == []


def test_without_javascript_the_stored_reply_is_the_screened_one(walker, live):
    live.replies = ["I'm acme-frontier-9000 by acme, here to help. " + CLEAN]
    walker.to_chat()
    walker.send("Hello there, I feel low today.", 1, as_json=False)
    response = walker.post(walker.url("chat/reply/1/"))
    assert response.status_code == 302
    turn = Turn.objects.get()
    assert (turn.llm_response, turn.identity_screen) == (CLEAN, "regenerated")
    assert turn.identity_leaks[0] == "acme-frontier-9000" and set(turn.identity_leaks) <= {"acme-frontier-9000", "acme"}
    walker.get(walker.url("chat/"))
    assert leaks(walker.responses, NAMES) == []


def test_offline_replies_are_screened_and_clean(walker):
    walker.to_chat()
    walker.send("I feel worried about my results.", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    assert Turn.objects.get().identity_screen == "clean"


def test_a_name_split_across_two_batches_of_the_stream_is_still_caught(settings, fake_openai_server, monkeypatch):
    """The chat loop hands a reply over in batches (what arrived within BATCH_SECONDS): a name whose first word
    ends one batch and whose second starts the next is caught as surely as one that came in a single piece."""
    from attunebench.identity import IdentityScanner, configured_names
    from collection import identity_guard
    from collection.chat_model import ReplyRequest, stream_reply
    from collection.identity_guard import GuardedReply

    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    leaking = "That sounds hard, and I want to help where I can. Speaking as Nimbus Lark, I think rest helps."
    clean = "That sounds hard. What would help you rest tonight?"
    fake_openai_server.replies = [leaking]
    fake_openai_server.reply = clean
    # The provider goes silent after "Nimbus" until the batch ending there has reached the reading thread.
    fake_openai_server.gate = threading.Event()
    fake_openai_server.hold_after = leaking.split(" ").index("Nimbus")
    batches: list[str] = []

    def watched(request, record):
        for batch in stream_reply(request, record):
            batches.append(batch)
            if "".join(batches).endswith(" Nimbus"):
                fake_openai_server.gate.set()  # only now does " Lark" leave the provider: in the next batch
            yield batch

    monkeypatch.setattr(identity_guard, "stream_reply", watched)
    request = ReplyRequest(
        model_key="om-1",
        litellm_model="openai/nimbus-lark",
        api_base=fake_openai_server.api_base,
        messages=[{"role": "system", "content": "You are kind."}, {"role": "user", "content": "I am tired."}],
        category="Health",
        subtopic="Sleep",
        turn_number=1,
    )
    guarded = GuardedReply(request, IdentityScanner(configured_names("Nimbus Lark", "", "openai/nimbus-lark")))
    shown = "".join(text for kind, text in guarded.events() if kind == "delta")

    first = "".join(batches[: batches.index(next(b for b in batches if b.endswith(" Nimbus"))) + 1])
    assert first.endswith(" Nimbus") and not first.endswith("Nimbus Lark")  # the name came in two batches
    assert guarded.leaks == ["Nimbus Lark"] and guarded.outcome == "regenerated"
    assert "Nimbus" not in shown and "Lark" not in shown
    assert guarded.text == clean and len(fake_openai_server.requests) == 2
