"""The direct route's own HTTP call (``direct_call``) against the OpenAI SDK's, answer for answer.

Each test runs a local server that answers with exactly the bytes given, and makes the same call through both
(the SDK's by making ``direct_call.suits`` say no, as it does for a server behind a proxy): whatever the server
does, the replay must see the same completion or the same error (kind, status, Retry-After, whether it was
sent, message), so that which of the two carried a call changes nothing but its CPU.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from attunebench.replay import direct_call
from attunebench.replay import prompts as P
from attunebench.replay.llm import EMSpec, LiteLLMBackend
from attunebench.replay.preflight import describe_call_error
from attunebench.replay.scheduler import PermanentCallError, TransientCallError
from tests.core.replay_calls import draft_context

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m-1",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"response": "Go on."}'}}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 100}},
}


def raw(status: int, body: bytes, headers: dict[str, str] | None = None, *, length: int | None = None) -> Answer:
    """An answer of ``status`` with ``body`` (its Content-Length ``length`` when given: a body cut short)."""

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body) if length is None else length}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {"Content-Type": "application/json"}).items())
        writer.write(head.encode() + b"\r\n" + body)
        await writer.drain()
        if length is not None:
            writer.close()

    return send


def as_json(status: int, data: Any, headers: dict[str, str] | None = None) -> Answer:
    return raw(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.Event().wait()


async def close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


class Served:
    """What the server saw: each request's first line and body, and how many connections it accepted."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.connections = 0


def call(
    answers: list[Answer], *, sdk: bool, spec_params: dict | None = None, calls: int = 1, pause: float = 0.0
) -> tuple[list, Served]:
    """Make ``calls`` draft calls, ``pause`` seconds apart, through the route (the SDK's when ``sdk``) to a server
    answering with ``answers`` in turn; returns each call's completion or error, and what the server saw."""
    served = Served()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.connections += 1
        try:
            while not writer.is_closing():
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                lines = head.decode("latin-1").split("\r\n")
                fields = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                served.lines.append(lines[0])
                served.bodies.append(json.loads(await reader.readexactly(int(fields["content-length"]))))
                await answers.pop(0)(reader, writer)
        except asyncio.CancelledError:
            pass  # the test is over: a kept-alive connection or a hung answer ends with it
        writer.close()

    async def run() -> list:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        spec = EMSpec(
            name="m",
            litellm_model="openai/m-1",
            api_base=f"http://127.0.0.1:{port}/v1",
            params={"timeout": 5.0, **(spec_params or {})},
            input_cost_per_million=1.0,
            output_cost_per_million=2.0,
        )
        ctx = draft_context()
        got: list = []
        async with server:
            for number in range(calls):
                if number:
                    await asyncio.sleep(pause)
                try:
                    got.append(await LiteLLMBackend().complete(spec, P.build_messages(ctx), ctx))
                except (TransientCallError, PermanentCallError) as exc:
                    got.append(exc)
        return got

    original = direct_call.suits
    direct_call.suits = (lambda api_base: False) if sdk else original  # type: ignore[assignment]
    try:
        return asyncio.run(run()), served
    finally:
        direct_call.suits = original  # type: ignore[assignment]


def described(outcome: object) -> tuple:
    """What the replay acts on of an outcome: a completion's fields, or an error's kind, status, wait, whether it
    was sent, and its message."""
    if isinstance(outcome, TransientCallError):
        return ("transient", outcome.kind, outcome.status, outcome.retry_after, outcome.sent, str(outcome))
    if isinstance(outcome, PermanentCallError):
        return ("permanent", outcome.status, outcome.sent, str(outcome))
    return ("completion", vars(outcome))


def both(make_answers: Callable[[], list[Answer]], **options: Any) -> tuple[list, list]:
    """The outcomes of the same calls through the direct route and through the SDK."""
    direct, _ = call(make_answers(), sdk=False, **options)
    sdk, _ = call(make_answers(), sdk=True, **options)
    return direct, sdk


def test_an_answer_is_read_and_priced_as_the_sdk_reads_it_plain_or_compressed():
    plain = json.dumps(COMPLETION).encode()
    direct, sdk = both(lambda: [as_json(200, COMPLETION)])
    assert [described(o) for o in direct] == [described(o) for o in sdk]
    completion = direct[0]
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == (
        '{"response": "Go on."}',
        120,
        9,
    )
    # $1 / $2 per million; the 100 prompt tokens served from the provider's cache cost what litellm says they cost
    assert completion.cost_usd == sdk[0].cost_usd and completion.cost_usd is not None
    squeezed = gzip.compress(plain)
    direct, sdk = both(lambda: [raw(200, squeezed, {"Content-Type": "application/json", "Content-Encoding": "gzip"})])
    assert described(direct[0]) == described(sdk[0]) == described(completion)


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (400, {"error": {"message": "temperature must be at most 2", "type": "invalid_request_error"}}, {}),
        (401, {"error": {"message": "Incorrect API key provided"}}, {}),
        (403, {"error": {"message": "not allowed"}}, {}),
        (404, {"error": {"message": "The model m-1 does not exist"}}, {}),
        (409, {"message": "busy"}, {}),
        (422, {"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}, {}),
        (418, {"error": {"message": "teapot"}}, {}),
        (408, {"error": {"message": "request timeout"}}, {}),
        (429, {"error": {"message": "Rate limit reached"}}, {"retry-after-ms": "1500"}),
        (429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "2"}),
        (429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        (500, {"error": {"message": "boom"}}, {}),
        (502, "<html>Bad gateway</html>", {"Content-Type": "text/html"}),
        (503, {"error": {"message": "overloaded"}}, {"Retry-After": "3"}),
    ],
)
def test_a_refusal_or_a_failure_is_the_same_error_on_both(status, body, headers):
    def answers() -> list[Answer]:
        if isinstance(body, str):
            return [raw(status, body.encode(), headers)]
        return [as_json(status, body, headers)]

    direct, sdk = both(answers)
    assert described(direct[0]) == described(sdk[0])
    assert getattr(direct[0], "status", None) == status


@pytest.mark.parametrize(
    "make",
    [
        lambda: [as_json(200, {"error": {"message": "upstream unavailable"}})],  # the server's refusal under 200
        lambda: [raw(200, b"<html>maintenance</html>", {"Content-Type": "text/html"})],
        lambda: [raw(200, b"", {"Content-Type": "application/json"})],
        lambda: [raw(200, b'{"choices": [{"mess', {"Content-Type": "application/json"})],
        lambda: [as_json(200, {"choices": []})],
        lambda: [as_json(200, {"object": "list", "data": []})],
    ],
    ids=["error-object", "html", "empty", "cut-json", "no-choices", "no-completion"],
)
def test_a_200_that_is_no_chat_completion_is_the_same_failure_on_both(make):
    direct, sdk = both(make)
    assert described(direct[0])[:2] == described(sdk[0])[:2]  # permanent or passing, and of the same kind
    assert not isinstance(direct[0], TransientCallError) or direct[0].kind == "invalid-answer"


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: [close], "connection"),  # closed without a word: it was sent, nobody answered
        (lambda: [raw(200, b'{"choices": ', length=400)], "connection"),  # closed in the middle of the body
        (lambda: [raw(200, b"", {"Content-Type": "text/plain", "Content-Length": "x"})], "connection"),  # not HTTP
        (lambda: [hang], "timeout"),
    ],
    ids=["closed", "cut-body", "bad-http", "no-answer"],
)
def test_a_broken_exchange_is_the_same_passing_failure_on_both(make, kind):
    direct, sdk = both(make, spec_params={"timeout": 0.5})
    for outcome in (direct[0], sdk[0]):
        assert isinstance(outcome, TransientCallError) and (outcome.kind, outcome.sent) == (kind, True)


def test_a_server_nobody_listens_at_was_never_sent_and_is_described_alike():
    spec = EMSpec(name="m", litellm_model="openai/m-1", api_base="http://127.0.0.1:9/v1", params={"timeout": 5.0})
    ctx = draft_context()

    def outcome(sdk: bool) -> TransientCallError:
        original = direct_call.suits
        direct_call.suits = (lambda api_base: False) if sdk else original  # type: ignore[assignment]
        try:
            with pytest.raises(TransientCallError) as caught:
                asyncio.run(LiteLLMBackend().complete(spec, P.build_messages(ctx), ctx))
        finally:
            direct_call.suits = original  # type: ignore[assignment]
        return caught.value

    direct, sdk = outcome(sdk=False), outcome(sdk=True)
    assert (direct.kind, direct.sent) == (sdk.kind, sdk.sent) == ("connection", False)
    assert describe_call_error(direct, spec, 5) == describe_call_error(sdk, spec, 5)
    assert describe_call_error(direct, spec, 5) == "connection refused at http://127.0.0.1:9/v1"


def test_the_request_is_the_sdks_and_one_connection_carries_the_calls_one_after_another():
    params = {"temperature": 0.3, "top_k": 40, "stop": ["\n\n"], "response_format": {"type": "json_object"}}
    got, served = call([as_json(200, COMPLETION) for _ in range(3)], sdk=False, spec_params=params, calls=3)
    assert [o.text for o in got] == ['{"response": "Go on."}'] * 3
    assert served.connections == 1 and served.lines == ["POST /v1/chat/completions HTTP/1.1"] * 3
    _, through_sdk = call([as_json(200, COMPLETION)], sdk=True, spec_params=params)
    assert served.bodies[0] == through_sdk.bodies[0]
    assert {k: v for k, v in served.bodies[0].items() if k != "messages"} == {"model": "m-1", **params}


def test_a_connection_the_server_closed_while_idle_is_not_used_again():
    async def answer_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await as_json(200, COMPLETION)(reader, writer)
        await asyncio.sleep(0.05)  # the close comes after the answer, while the connection is idle
        writer.close()

    got, served = call([answer_then_close, as_json(200, COMPLETION)], sdk=False, calls=2, pause=0.3)
    assert all(not isinstance(o, Exception) for o in got)
    assert len(served.lines) == 2 and served.connections == 2  # each request reached the server once


def test_a_redirect_is_followed_through_the_sdk():
    moved = raw(307, b"", {"Location": "/v2/chat/completions", "Content-Type": "text/plain"})
    got, served = call([moved, moved, as_json(200, COMPLETION)], sdk=False)
    assert got[0].text == '{"response": "Go on."}'
    assert served.lines[-1] == "POST /v2/chat/completions HTTP/1.1"


def test_a_key_no_http_request_can_carry_is_refused_before_any_connection():
    # nobody listens at port 9: the refusal must come before a connection is tried
    request = direct_call.chat_completion(
        api_base="http://127.0.0.1:9/v1",
        api_key="sk-one\nHost: elsewhere",
        litellm_model="openai/m-1",
        messages=[{"role": "user", "content": "Hello"}],
        params={},
        timeout=5.0,
    )
    with pytest.raises(PermanentCallError, match="a request that cannot be sent") as caught:
        asyncio.run(request)
    assert caught.value.sent is False
