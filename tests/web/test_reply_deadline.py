"""A provider that hangs mid-reply ends in the calm retry error once ATTUNE_CHAT_TIMEOUT_SECONDS has passed.

litellm's own timeout is per read; a provider that sends a word and then nothing (or a
word now and then) would otherwise hold the reply, and a server thread, for ever.
"""

from __future__ import annotations

import threading

import pytest

from collection.chat_model import CALM_FAILURE_MESSAGE, ChatModelError, ReplyRequest, stream_reply


def test_a_reply_that_hangs_after_its_first_word_ends_in_the_calm_error(settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    settings.ATTUNE_CHAT_TIMEOUT_SECONDS = 2
    fake_openai_server.gate = threading.Event()  # never opened while the reply is read
    request = ReplyRequest(
        model_key="om-hung",
        litellm_model="openai/hung-model",
        api_base=fake_openai_server.api_base,
        messages=[{"role": "user", "content": "I feel anxious about exams."}],
        category="Study",
        subtopic="Exams",
        turn_number=1,
    )
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
