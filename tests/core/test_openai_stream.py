"""The direct read of a streamed chat completion (``openai_compatible.stream_chat_text``): the route a
participant's live reply from an OpenAI-compatible server takes, without litellm's per-chunk machinery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from attunebench.replay import openai_compatible
from attunebench.replay.openai_compatible import StreamFailed, stream_chat_text


def events(*texts: str, done: bool = True) -> bytes:
    """Server-sent chat completion chunks, one per text, then ``[DONE]``."""
    body = b"".join(
        b"data: "
        + json.dumps({"object": "chat.completion.chunk", "choices": [{"delta": {"content": t}}]}).encode()
        + b"\n\n"
        for t in texts
    )
    return body + (b"data: [DONE]\n\n" if done else b"")


def read(body: bytes, *, status: int = 200, piece: int = 7) -> tuple[list[str], list[dict]]:
    """What the stream yields for ``body`` arriving ``piece`` bytes at a time, and the requests the server saw."""
    seen: list[dict] = []

    async def arriving() -> AsyncIterator[bytes]:
        for start in range(0, len(body), piece):
            yield body[start : start + piece]

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append({"url": str(request.url), "auth": request.headers["authorization"], **json.loads(request.content)})
        return httpx2.Response(status, content=arriving())

    async def run() -> list[str]:
        openai_compatible._pools[asyncio.get_running_loop()] = httpx2.AsyncClient(
            transport=httpx2.MockTransport(answer)
        )
        messages = [{"role": "user", "content": "hello"}]
        stream = stream_chat_text(
            api_base="http://model.test/v1/", api_key="sk-x", litellm_model="openai/m-1", messages=messages, timeout=5
        )
        return [text async for text in stream]

    return asyncio.run(run()), seen


def test_the_text_arrives_whole_and_in_order_however_the_events_are_cut_by_the_network():
    texts = ["I hear", " you.", " That sounds", " heavy — ", "what helps?"]
    for piece in (1, 7, 64, 10_000):
        got, seen = read(events(*texts), piece=piece)
        assert "".join(got) == "".join(texts)
        assert all(got)  # no empty pieces
    # Events that came in one read are handed on as one piece; the request is the one litellm would send.
    assert got == ["".join(texts)]
    assert seen[0] == {
        "url": "http://model.test/v1/chat/completions",
        "auth": "Bearer sk-x",
        "model": "m-1",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
    }


def test_a_refusal_an_error_event_or_a_cut_stream_fails_the_reply():
    with pytest.raises(StreamFailed, match="answered 429"):
        read(b'{"error": {"message": "slow down"}}', status=429)
    with pytest.raises(StreamFailed, match="error in the stream"):
        read(events("Hello", done=False) + b'data: {"error": {"message": "overloaded"}}\n\n')
    with pytest.raises(StreamFailed, match="before \\[DONE\\]"):
        read(events("Hello", " there", done=False))
    with pytest.raises(StreamFailed, match="not JSON"):
        read(b"data: {nope\n\n")
