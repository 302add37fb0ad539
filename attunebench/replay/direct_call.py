"""A chat completion on a kept-alive HTTP/1.1 connection of our own: the replay's calls to an OpenAI-compatible server.

Why: a model on the direct route (``openai/<name>`` at an ``api_base`` of its own that litellm has no rules for,
``llm.uses_openai_sdk``) was called through the OpenAI SDK, whose client, HTTP layers and response models cost
several milliseconds of CPU a call (bench/replay_call_cpu.py), and whose import cost half a second before a
replay's first request (bench/eval_startup.py). At 64 calls in flight on two cores that CPU, not the provider, is
what a replay waits on. Here the request is written and its answer framed by h11 on the connections the
participant chat's relay keeps (``paced_stream``: one pool per event loop, HTTPS with the system's certificate
checks), and the answer is read as plain JSON.

What the SDK route did is kept, so the two are interchangeable (``tests/core/test_replay_direct_call.py``):

- the request: the served model name, the messages and every answer parameter as given (``top_k`` too), the key
  as a bearer token;
- errors as ``llm.classify_error`` makes the SDK's: 429 (with Retry-After or retry-after-ms), 408 and no answer
  within ``timeout`` (the whole call) as timeouts, 5xx as passing server errors, any other status a refusal
  named by the SDK's class for it (``BadRequestError: Error code: 400 - <its message>``); a connection that was never
  opened was not sent (``sent=False``), one that broke after the request was; a 200 that is no chat
  completion is a passing failure, one holding an error object the server's refusal;
- a server behind a proxy (``HTTP_PROXY`` and the like), and an answer that redirects, are left to the SDK
  (``DirectRouteUnsuited``), which follows its proxy settings and redirects as before.

Pure: no Django.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Mapping
from typing import Any, Final

from attunebench.replay import paced_stream
from attunebench.replay.failures import retry_after_s
from attunebench.replay.openai_compatible import StreamFailed, served_model_name
from attunebench.replay.scheduler import PermanentCallError, TransientCallError

#: The OpenAI SDK's error class for each refused status, named in the message as that route named them.
SDK_ERROR_NAMES: Final = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
}
#: Characters of an answer shown in an error's message.
SHOWN: Final = 300


class DirectRouteUnsuited(Exception):
    """The call needs what only the SDK route does (a redirect to follow): it was not answered here."""


def suits(api_base: str) -> bool:
    """Whether ``api_base`` is called on a connection of our own: an http(s) address reached without a proxy."""
    return paced_stream.reachable_directly(api_base)


async def chat_completion(
    *,
    api_base: str,
    api_key: str,
    litellm_model: str,
    messages: list[dict[str, str]],
    params: Mapping[str, Any],
    timeout: float,
) -> dict[str, Any]:
    """One chat completion, as the server's JSON (a dict with a non-empty ``choices`` list); failures raise the
    scheduler's errors (see the module docstring), a redirect ``DirectRouteUnsuited``."""
    try:
        body = json.dumps(
            {"model": served_model_name(litellm_model), "messages": messages, **params},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        post = paced_stream.chat_post(api_base, api_key, body, accept="application/json")
    except (TypeError, ValueError, StreamFailed) as exc:
        raise PermanentCallError(f"a request that cannot be sent: {exc}", sent=False) from exc
    status, answer_headers, answer = await _exchange(post, timeout)
    if 200 <= status < 300:
        return _chat_completion(api_base, status, answer_headers, answer)
    if 300 <= status < 400:
        raise DirectRouteUnsuited(f"{api_base} answered {status}: a redirect, followed by the SDK route")
    raise _status_error(status, answer_headers, answer)


async def _exchange(post: paced_stream.Post, timeout: float) -> tuple[int, dict[bytes, bytes], bytes]:
    """Send the request and read its whole answer: (status, headers, body)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        answer = await paced_stream.send(post, deadline)
    except paced_stream.NotSent as exc:  # refused, unknown host, TLS refused, or no connection in time
        raise TransientCallError("connection", f"{post.api_base}: {exc}", sent=False) from exc
    except StreamFailed as exc:
        raise _broken(post.api_base, exc, loop.time() >= deadline, timeout) from None
    reusable = False
    try:
        body = await answer.body(deadline)
        reusable = True
        return answer.status, answer.headers, body
    except StreamFailed as exc:
        raise _broken(post.api_base, exc, loop.time() >= deadline, timeout) from None
    finally:
        answer.release(reusable)


def _broken(api_base: str, exc: StreamFailed, late: bool, timeout: float) -> TransientCallError:
    """A sent request whose answer did not come whole: a timeout past the deadline, else a broken connection."""
    if late:
        return TransientCallError("timeout", f"no answer from {api_base} within {timeout:g} s")
    return TransientCallError("connection", f"{api_base}: {exc}")


def _decoded(headers: Mapping[bytes, bytes], body: bytes) -> bytes:
    """The body without its content encoding: identity is asked for, but a server may compress anyway."""
    encoding = headers.get(b"content-encoding", b"identity").strip().lower()
    if encoding in (b"", b"identity"):
        return body
    if encoding in (b"gzip", b"x-gzip", b"deflate"):
        try:
            return zlib.decompress(body, 47 if encoding != b"deflate" else 15)
        except zlib.error:
            if encoding == b"deflate":  # raw deflate without the zlib wrapper, as some servers send it
                try:
                    return zlib.decompress(body, -15)
                except zlib.error:
                    pass
    raise TransientCallError("invalid-answer", f"an answer in an encoding that cannot be read: {encoding.decode()}")


def _chat_completion(api_base: str, status: int, headers: Mapping[bytes, bytes], body: bytes) -> dict[str, Any]:
    """The chat completion of a 2xx answer; what is none is a passing failure or, with an error object, the
    server's refusal (as on the SDK route)."""
    body = _decoded(headers, body)
    try:
        data = json.loads(body)
    except ValueError as exc:  # an HTML page, an empty or cut-off body
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if "json" in content_type:
            raise TransientCallError(
                "invalid-answer", f"{api_base} answered {status} with a body that is not JSON: {exc}"
            ) from exc
        shown = body[:200].decode("utf-8", "replace")
        raise TransientCallError(
            "invalid-answer", f"{api_base} answered {status} with something other than a chat completion: {shown}"
        ) from None
    if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
        answer: dict[str, Any] = data
        return answer
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        # An error object under status 200: the server's own answer to this request; asking again gets it again.
        raise PermanentCallError(
            f"{api_base} answered {status} with an error: {str(error.get('message', error))[:SHOWN]}"
        )
    raise TransientCallError(
        "invalid-answer",
        f"{api_base} answered {status} with something other than a chat completion: {str(data)[:200]}",
    )


def _status_error(status: int, headers: Mapping[bytes, bytes], body: bytes) -> Exception:
    """The scheduler's error for a status other than 2xx or 3xx, as ``llm.classify_error`` makes it of the SDK's."""
    message = f"Error code: {status}"
    try:
        detail = json.loads(_decoded(headers, body))
    except (ValueError, TransientCallError):
        detail = None
    # The SDK's wording: the error object's message, when the body has one.
    error = detail.get("error", detail) if isinstance(detail, dict) else None
    said = error.get("message") if isinstance(error, dict) else None
    if isinstance(said, str) and said:
        message = f"{message} - {said}"[:SHOWN]
    if status == 429 or status >= 500:
        wait = retry_after_s({k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()})
        return TransientCallError(str(status), message, retry_after=wait, status=status)
    if status == 408:
        return TransientCallError("timeout", message, status=status)
    return PermanentCallError(f"{SDK_ERROR_NAMES.get(status, 'APIStatusError')}: {message}", status=status)
