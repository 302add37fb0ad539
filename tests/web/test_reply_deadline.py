"""A provider that hangs mid-reply ends in the calm retry error once ATTUNE_CHAT_TIMEOUT_SECONDS has passed.

litellm's own timeout is per read; a provider that sends a word and then nothing (or a
word now and then) would otherwise hold the reply, and a server thread, for ever.
"""

from __future__ import annotations

import threading

import pytest

from collection.chat_model import CALM_FAILURE_MESSAGE, ChatModelError, stream_reply
from tests.web.test_live_models import request_for

pytestmark = pytest.mark.embedded  # the chat's reply locks live in the cache: Redis or the process's memory


def test_a_reply_that_hangs_after_its_first_word_ends_in_the_calm_error(settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    settings.ATTUNE_CHAT_TIMEOUT_SECONDS = 2
    fake_openai_server.gate = threading.Event()  # never opened while the reply is read
    request = request_for(fake_openai_server, model="openai/hung-model")
    received: list[str] = []
    try:
        with pytest.raises(ChatModelError) as failure:
            for chunk in stream_reply(request):
                received.append(chunk)
    finally:
        fake_openai_server.gate.set()
    assert str(failure.value) == CALM_FAILURE_MESSAGE
    # Whatever arrived before the time ran out is the start of the reply, never the whole of it.
    assert fake_openai_server.reply.startswith("".join(received))
    assert "".join(received) != fake_openai_server.reply


def test_a_chat_loop_that_stops_answering_ends_the_reply_in_the_calm_error(settings, fake_openai_server, monkeypatch):
    from collection import chat_model

    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    monkeypatch.setattr(chat_model, "_LOOP_GRACE_SECONDS", 0.5)
    request = request_for(fake_openai_server, model="openai/any-model")
    loop, release, stuck = chat_model._background_loop(), threading.Event(), threading.Event()

    def block() -> None:  # something on the loop that never yields, until the test lets it go
        stuck.set()
        release.wait(timeout=300)

    loop.call_soon_threadsafe(block)
    assert stuck.wait(timeout=30)
    try:
        with pytest.raises(ChatModelError) as failure:
            list(stream_reply(request))
    finally:
        release.set()
    assert str(failure.value) == CALM_FAILURE_MESSAGE
    monkeypatch.setattr(chat_model, "_LOOP_GRACE_SECONDS", 30.0)  # a working loop gets the usual grace
    assert "".join(stream_reply(request)) == fake_openai_server.reply  # the loop serves replies again
    assert len(fake_openai_server.requests) == 1  # the reply given up on never reached the provider
