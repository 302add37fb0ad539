"""Calls to an OpenAI-compatible server of the model's own, through the OpenAI SDK.

A model registered as ``openai/<name>`` at its own ``api_base`` (vLLM,
llama.cpp, TGI, a gateway, the fake provider of the tests and benchmarks)
speaks OpenAI's chat completions protocol, which is all litellm would do for
it too. litellm's per-call bookkeeping (logging objects, cost lookups, hidden
parameters, a thread hop for the request's preparation) costs about 3 ms of
CPU a call on top of the OpenAI SDK's 1.5 ms (bench/replay_call_cpu.py), and
that CPU, not the provider, is what limited a replay at 64 calls in flight on
a two-core machine (bench/replay_throughput.py: 0.68 through litellm, 0.87
this way). So such a model is called with ``openai.AsyncOpenAI``
directly (the SDK litellm itself uses for it), through its public API:

- the request is the one litellm sends: the model name without its ``openai/``
  prefix, the messages and the model's answer parameters (``top_k``, which
  OpenAI's own API lacks, goes in the request body as OpenAI-compatible servers
  expect it);
- the SDK's own retries are off: the scheduler owns retries;
- its errors are the OpenAI SDK's, the same classes litellm's subclass, so
  ``classify_error`` treats them alike (429 with Retry-After, 5xx, timeouts,
  connection failures); a 200 that is no chat completion is a passing failure
  (an HTML page, an empty body) or the server's refusal (an error object), as
  through litellm;
- one client per event loop, server and key, all of a loop's clients on one
  connection pool: a pool belongs to the loop that opened it;
- ``warm_up`` makes one call to an in-process transport before the replay,
  as litellm's warm-up does for litellm: the SDK's first call in a process
  costs about 80 ms of CPU (bench/replay_first_call.py), which the first wave
  of answers would otherwise wait behind.

Such calls now go over connections of our own (``direct_call``: the same request
and the same errors, a fifth of the CPU); the SDK carries them still for a server
behind a proxy and for an answer that redirects. A model can still be sent
through litellm with the parameter ``"client": "litellm"``. Pure: no Django.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from attunebench.replay.scheduler import PermanentCallError, TransientCallError

#: Answer parameters OpenAI's chat completions API does not take as arguments; OpenAI-compatible
#: servers read them from the request body.
BODY_ONLY_PARAMS = frozenset({"top_k"})

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], Any]] = weakref.WeakKeyDictionary()
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def served_model_name(litellm_model: str) -> str:
    """The name the server knows the model by: litellm's ``openai/`` prefix is litellm's, not the server's."""
    return litellm_model.removeprefix("openai/")


def _pool() -> Any:
    """This event loop's HTTP connection pool, shared by its clients: making one (its TLS set-up) takes
    about 20 ms of CPU, so not once per server and key."""
    import openai

    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = openai.DefaultAsyncHttpxClient()
    return pool


def client_for(api_base: str, api_key: str) -> Any:
    """This event loop's client for ``api_base`` with ``api_key``, made on first use."""
    import openai

    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get((api_base, api_key))
    if client is None:
        client = openai.AsyncOpenAI(base_url=api_base, api_key=api_key, max_retries=0, http_client=_pool())
        per_loop[(api_base, api_key)] = client
    return client


async def warm_up() -> None:
    """This event loop's connection pool, and one chat completion through the SDK answered in this process by
    an ``httpx2.MockTransport`` (the documented test transport of the HTTP client the SDK is built on): the
    SDK's lazy set-up happens now, and nothing is sent anywhere."""
    import httpx2
    import openai

    _pool()

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            json={
                "id": "warm-up",
                "object": "chat.completion",
                "created": 0,
                "model": "warm-up",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    transport = openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(answer))
    async with openai.AsyncOpenAI(
        base_url="http://warm-up.invalid/v1", api_key="warm-up", max_retries=0, http_client=transport
    ) as client:
        await client.chat.completions.create(model="warm-up", messages=[{"role": "user", "content": "warm-up"}])


async def chat_completion(
    *,
    api_base: str,
    api_key: str,
    litellm_model: str,
    messages: list[dict[str, str]],
    params: Mapping[str, Any],
    timeout: float,
) -> Any:
    """One chat completion (the SDK's ``ChatCompletion``); errors are the SDK's, for the caller to classify."""
    arguments = {k: v for k, v in params.items() if k not in BODY_ONLY_PARAMS}
    body = {k: v for k, v in params.items() if k in BODY_ONLY_PARAMS}
    try:
        response = await client_for(api_base, api_key).chat.completions.create(
            model=served_model_name(litellm_model),
            messages=messages,
            timeout=timeout,
            extra_body=body or None,
            **arguments,
        )
    except json.JSONDecodeError as exc:  # an empty or cut-off body under a JSON content type
        raise TransientCallError(
            "invalid-answer", f"{api_base} answered 200 with a body that is not JSON: {exc}"
        ) from exc
    if not isinstance(getattr(response, "choices", None), list) or not response.choices:
        error = getattr(response, "error", None)
        if isinstance(error, dict):
            # An error object under status 200: the server's own answer to this request, which litellm
            # reports as a bad request; asking again would get it again.
            raise PermanentCallError(f"{api_base} answered 200 with an error: {str(error.get('message', error))[:300]}")
        # An HTML page (the SDK hands back its text), an empty answer: a gateway's or a proxy's passing
        # trouble, as litellm also treats it.
        raise TransientCallError(
            "invalid-answer",
            f"{api_base} answered 200 with something other than a chat completion: {str(response)[:200]}",
        )
    return response


class StreamFailed(Exception):
    """A streamed chat completion that could not be read to its end: a refusal, an error event, a cut stream."""


def _event_text(data: bytes, event: Any = None) -> str:
    """The text of one server-sent event's data (a chat completion chunk, or ``event`` when already decoded from
    it); raises StreamFailed on an error event."""
    if event is None:
        try:
            event = json.loads(data)
        except ValueError as exc:
            raise StreamFailed(f"a streamed chunk that is not JSON: {data[:200]!r}") from exc
    if not isinstance(event, dict):
        raise StreamFailed(f"a streamed chunk that is not an object: {data[:200]!r}")
    if "error" in event:
        raise StreamFailed(f"the server sent an error in the stream: {str(event['error'])[:300]}")
    choices = event.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return ""
    delta = choices[0].get("delta")
    text = delta.get("content") if isinstance(delta, dict) else None
    return text if isinstance(text, str) else ""


def _events_text(datas: list[bytes]) -> str:
    """The text of several events' data, decoded as one JSON array (one parse for a batch of tokens); any that
    does not decode on its own is found, and reported, one by one."""
    if len(datas) > 1:
        try:
            decoded = json.loads(b"[" + b",".join(datas) + b"]")
        except ValueError:
            decoded = None
        if isinstance(decoded, list) and len(decoded) == len(datas) and None not in decoded:
            return "".join(_event_text(data, event) for data, event in zip(datas, decoded, strict=True))
    return "".join(_event_text(data) for data in datas)


def sse_text(buffer: bytes) -> tuple[str, bytes, bool]:
    """The text of the complete server-sent events at the start of ``buffer``, the rest (an event cut short), and
    whether ``[DONE]`` came; raises StreamFailed on an error event."""
    *events, rest = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
    datas: list[bytes] = []
    for event in events:
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue  # comments, event names and ids: nothing to show
            data = line[5:].strip()
            if data == b"[DONE]":
                return _events_text(datas), b"", True
            datas.append(data)
    return _events_text(datas), rest, False


async def stream_chat_text(
    *, api_base: str, api_key: str, litellm_model: str, messages: list[dict[str, str]], timeout: float
) -> AsyncGenerator[str, None]:
    """The text of a streamed chat completion as it arrives, read straight off the server-sent events.

    A participant's live reply comes one chunk per token, 30 to 50 a second: through litellm's stream
    wrapper each chunk cost about a millisecond of CPU (bench/reply_stream_cpu.py). This sends the
    request litellm would send an OpenAI-compatible server (the served model name, the messages,
    ``stream: true``) on this loop's connection pool and parses each event's ``delta.content`` itself;
    every event that came in one network read is yielded as one piece. A status other than 200, an
    error event or a stream that ends before ``[DONE]`` raises StreamFailed.
    """
    body = {"model": served_model_name(litellm_model), "messages": messages, "stream": True}
    headers = {"Authorization": f"Bearer {api_key}", "Accept": "text/event-stream"}
    url = api_base.rstrip("/") + "/chat/completions"
    async with _pool().stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
        if response.status_code != 200:
            detail = (await response.aread())[:300].decode("utf-8", "replace")
            raise StreamFailed(f"{api_base} answered {response.status_code}: {detail}")
        buffer = b""
        async for received in response.aiter_bytes():
            text, buffer, done = sse_text(buffer + received)
            if text:
                yield text
            if done:
                return
    raise StreamFailed(f"{api_base} ended the stream before [DONE]")
