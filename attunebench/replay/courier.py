"""Paid calls that outlive the worker which asked for them.

A replay worker killed with ``kill -9`` loses the answers it was waiting for,
and the provider has already been paid for them: chat completions take no
idempotency key, so asking again pays again. The courier is a small process
beside the worker that makes the worker's provider calls for it. It does not
die with the worker, so every call it was asked to make is finished, and each
answer is written to a journal (``CompletionJournal``, Redis in a deployment)
before it is handed back. The attempt that replays the conversation after the
crash looks each request up in the journal before sending it
(``recover_from``) and takes the answer the dead worker paid for.

The worker keeps everything else: the scheduler (limits, retries, adaptive
concurrency), parsing, the call cache, accounting. The courier makes one
attempt per request and reports errors back as the worker's own error types,
so the worker retries exactly as if it had called the provider itself.

The journal also counts, per attempt, the requests the courier sent
(``begin``). The worker counts each request before handing it over, so that a
crash never hides one that was sent; a crash between that count and the
hand-over leaves the worker's count one high, and the courier's count is the
exact one. Once another attempt has taken the conversation over, the journal
refuses the old attempt's requests (``AttemptSuperseded``), so its count is
final. A request the journal cannot mark (Redis away) is not sent at all: it
could be neither recovered after a crash nor counted, and the worker retries
it as a passing failure. Either refusal says ``sent=False``: the worker takes
the request back out of its own count.

Wire format on a Unix socket (in a folder only its user can open): frames of
a 4-byte big-endian length and a JSON object. Requests ``{"id", "spec",
"messages", "key", "api_key"}`` (the provider key as the worker read it, so
the worker's environment decides, as without a courier); replies ``{"id",
"ok": completion}`` or ``{"id", "error": {...}}``. Pure: no Django, no Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, fields
from typing import Any, Protocol

from attunebench.replay.llm import Completion, EMSpec, LiteLLMBackend
from attunebench.replay.prompts import PROMPT_VERSION, CallContext
from attunebench.replay.scheduler import PermanentCallError, TransientCallError

log = logging.getLogger("attune.replay")

_LENGTH = struct.Struct(">I")
#: How long past the model's timeout a worker waits for its courier's reply before calling it stuck.
REPLY_MARGIN_S = 30.0
#: Largest frame accepted: a long conversation's prompt is well under a megabyte.
MAX_FRAME_BYTES = 32 * 1024 * 1024


def request_key(spec: EMSpec, messages: list[dict[str, str]]) -> str:
    """The journal's name for one request: what the provider is asked, as the call cache names it."""
    return spec.cache_key(messages, PROMPT_VERSION)


def spec_to_dict(spec: EMSpec) -> dict[str, Any]:
    data = {f.name: getattr(spec, f.name) for f in fields(EMSpec)}  # not asdict: it deep-copies the params proxy
    data["params"] = dict(spec.params)
    data["allowed_key_env"] = sorted(spec.allowed_key_env)
    return data


def spec_from_dict(data: dict[str, Any]) -> EMSpec:
    known = {f.name for f in fields(EMSpec)}
    values = {k: v for k, v in data.items() if k in known}
    values["allowed_key_env"] = frozenset(values.get("allowed_key_env") or ())
    return EMSpec(**values)


def completion_to_dict(completion: Completion) -> dict[str, Any]:
    return asdict(completion)


def completion_from_dict(data: dict[str, Any]) -> Completion:
    return Completion(
        text=data.get("text"),
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        cost_usd=data.get("cost_usd"),
    )


def _error_to_dict(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, TransientCallError):
        return {
            "transient": True,
            "kind": exc.kind,
            "message": str(exc),
            "retry_after": exc.retry_after,
            "status": exc.status,
            "sent": exc.sent,
        }
    if isinstance(exc, PermanentCallError):
        return {"transient": False, "message": str(exc), "sent": exc.sent, "status": exc.status}
    return {"transient": False, "message": repr(exc), "sent": True}


def _error_from_dict(data: dict[str, Any]) -> Exception:
    sent = data.get("sent") is not False  # only a reply that says so was certainly not sent
    if data.get("transient"):
        return TransientCallError(
            str(data.get("kind") or "courier"),
            str(data.get("message") or ""),
            retry_after=data.get("retry_after"),
            status=data.get("status"),
            sent=sent,
        )
    return PermanentCallError(
        str(data.get("message") or "the courier refused the call"), sent=sent, status=data.get("status")
    )


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next frame, or None at the end of the stream."""
    try:
        head = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"courier frame of {length} bytes is over the {MAX_FRAME_BYTES} limit")
    data = json.loads(await reader.readexactly(length))
    if not isinstance(data, dict):
        raise ValueError("courier frame is not a JSON object")
    return data


def encode_frame(data: dict[str, Any]) -> bytes:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _LENGTH.pack(len(body)) + body


class AttemptSuperseded(Exception):
    """Another attempt has taken this request's conversation over: the request is not sent."""


class CompletionJournal(Protocol):
    """Where the courier keeps every answer it got, before anyone uses it."""

    async def begin(self, key: str, seconds: float) -> None:
        """``key`` is being asked now (one more request sent by its attempt, ``journal_tag(key)``); its answer
        is due within ``seconds``. Raising means the request must not be sent: ``AttemptSuperseded`` when
        another attempt has taken the conversation over, anything else when the journal is unreachable."""

    async def put(self, key: str, completion: Completion) -> None:
        """The answer to ``key`` arrived (this ends ``begin``); kept long enough for a crash to be noticed."""

    async def keep(self, key: str) -> None:
        """The answer to ``key`` could not be handed to its worker: keep it until a later attempt asks."""

    async def abandon(self, key: str) -> None:
        """``key`` got no answer (an error): nothing to wait for."""

    async def get(self, key: str) -> Completion | None:
        """The journaled answer, if any."""

    async def pending(self, key: str) -> bool:
        """Whether ``key`` is being asked now (``begin`` without ``put``/``abandon``, not expired)."""


async def recover_from(
    journal: CompletionJournal,
    key: str,
    wait_s: float,
    poll_s: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Completion | None:
    """The answer a dead attempt paid for, waiting up to ``wait_s`` while its courier still awaits it.

    None when nobody asked (or the request failed): the caller sends it itself.
    """
    deadline = clock() + wait_s
    while True:
        # The mark first, then the answer: ``put`` writes one and clears the other at once, so an answer
        # that lands between the two reads is still found (the other order could miss it and pay again).
        pending = await journal.pending(key)
        found = await journal.get(key)
        if found is not None:
            return found
        if not pending or clock() >= deadline:
            return None
        await sleep(poll_s)


class CourierServer:
    """Serves worker connections: each request is one provider call, finished even if its asker leaves."""

    def __init__(self, backend: LiteLLMBackend, journal: CompletionJournal) -> None:
        self.backend = backend
        self.journal = journal
        self.in_flight = 0
        self.calls = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.clients = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One worker connection: read requests, answer each when its call ends."""
        self.clients += 1
        lock = asyncio.Lock()
        try:
            while True:
                try:
                    request = await read_frame(reader)
                except (ValueError, ConnectionError) as exc:
                    log.warning("courier: dropping a connection that sent a bad frame: %s", exc)
                    return
                except asyncio.CancelledError:
                    return  # the courier is shutting down (SIGTERM): the connection just ends
                if request is None:
                    return
                task = asyncio.get_running_loop().create_task(self._serve(request, writer, lock))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            self.clients -= 1
            writer.close()

    async def _serve(self, request: dict[str, Any], writer: asyncio.StreamWriter, lock: asyncio.Lock) -> None:
        reply: dict[str, Any] = {"id": request.get("id")}
        self.in_flight += 1
        try:
            reply.update(await self._call(request))
        finally:
            self.in_flight -= 1
        delivered = False
        if not writer.is_closing():
            with contextlib.suppress(ConnectionError, RuntimeError):
                async with lock:
                    writer.write(encode_frame(reply))
                    await writer.drain()
                delivered = True
        if not delivered and "ok" in reply:
            # The worker is gone: its answer must wait in the journal for the attempt that takes over.
            try:
                await self.journal.keep(str(request.get("key")))
            except Exception as exc:
                log.warning("courier: could not keep an undelivered answer (the next attempt may pay again): %s", exc)

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            spec = spec_from_dict(request["spec"])
            messages = list(request["messages"])
            key = str(request["key"])
            api_key = request.get("api_key")
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": _error_to_dict(PermanentCallError(f"malformed courier request: {exc}", sent=False))}
        try:
            await self.journal.begin(key, spec.timeout + 30)
        except AttemptSuperseded as exc:
            return {"error": _error_to_dict(PermanentCallError(f"not sent: {exc}", sent=False))}
        except Exception as exc:
            # Sent unmarked, a crash would pay for it again and nobody could count it: a passing failure.
            log.warning("courier: could not mark a request in flight in the journal: %s", exc)
            refused = TransientCallError("journal", f"not sent: the call journal is not reachable: {exc}", sent=False)
            return {"error": _error_to_dict(refused)}
        self.calls += 1
        try:
            completion = await self.backend.complete(spec, messages, _NO_CONTEXT, api_key=api_key)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await self.journal.abandon(key)
            return {"error": _error_to_dict(exc)}
        try:
            await self.journal.put(key, completion)
        except Exception as exc:
            log.warning("courier: could not journal an answer (a crash now would pay for it again): %s", exc)
        return {"ok": completion_to_dict(completion)}

    def idle(self) -> bool:
        return self.in_flight == 0 and not self._tasks


_NO_CONTEXT: CallContext = None  # type: ignore[assignment]  # litellm backends never read the view


class CourierConnection:
    """A worker process's connection to its courier, shared by all its replays.

    ``ensure`` is awaited before connecting: it starts the courier if it is not
    running and returns the socket path. One connection, made on first use and
    again after it breaks; a request whose connection breaks is a transient
    error (the scheduler retries it on a new connection). All use must be on
    one event loop (the process's replay loop).
    """

    def __init__(self, ensure: Callable[[], Awaitable[str]]) -> None:
        self.ensure = ensure
        self._writer: asyncio.StreamWriter | None = None
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._connecting: asyncio.Lock | None = None
        self._readers: set[asyncio.Task[None]] = set()

    async def _connection(self) -> asyncio.StreamWriter:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is None or self._writer.is_closing():
                path = await self.ensure()
                reader, writer = await asyncio.open_unix_connection(path, limit=MAX_FRAME_BYTES)
                self._writer = writer
                task = asyncio.get_running_loop().create_task(self._read_replies(reader, writer))
                self._readers.add(task)
                task.add_done_callback(self._readers.discard)
            return self._writer

    async def _read_replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        error: Exception = TransientCallError("courier", "the connection to the call courier closed")
        try:
            while True:
                reply = await read_frame(reader)
                if reply is None:
                    break
                waiter = self._waiting.pop(int(reply.get("id") or 0), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(reply)
        except (ValueError, ConnectionError) as exc:
            error = TransientCallError("courier", f"the call courier's connection broke: {exc}")
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            waiting, self._waiting = self._waiting, {}
            for waiter in waiting.values():
                if not waiter.done():
                    waiter.set_exception(error)

    async def prepare(self) -> None:
        """Connect (starting the courier if needed) before a request is counted as sent.

        A courier that cannot be reached is a transient error of its own: nothing went to the provider.
        """
        try:
            await self._connection()
        except OSError as exc:
            raise TransientCallError("courier", f"the call courier is not reachable: {exc}") from exc

    def close(self) -> None:
        """Drop the connection (calls waiting on it fail as transient; the courier still finishes them)."""
        if self._writer is not None:
            self._writer.close()

    async def request(self, spec: EMSpec, messages: list[dict[str, str]], key: str) -> Completion:
        """Have the courier make one call, journaled under ``key``."""
        try:
            writer = await self._connection()
        except OSError as exc:
            raise TransientCallError("courier", f"the call courier is not reachable: {exc}", sent=False) from exc
        # The key is read here, from the worker's environment (the courier's was fixed when it started);
        # a missing one is this call's permanent error, before anything is sent.
        api_key = spec.api_key()
        request_id = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        frame = {"id": request_id, "spec": spec_to_dict(spec), "messages": messages, "key": key, "api_key": api_key}
        # The courier's own call gives up at the model's timeout; past that and a margin, the courier is stuck.
        patience = spec.timeout + REPLY_MARGIN_S
        try:
            writer.write(encode_frame(frame))
            await writer.drain()
            reply = await asyncio.wait_for(waiter, patience)
        except (ConnectionError, RuntimeError) as exc:
            raise TransientCallError("courier", f"could not send to the call courier: {exc}") from exc
        except TimeoutError as exc:
            raise TransientCallError("courier", f"no reply from the call courier within {patience:.0f} s") from exc
        finally:
            self._waiting.pop(request_id, None)
        if "ok" in reply:
            return completion_from_dict(reply["ok"])
        raise _error_from_dict(reply.get("error") or {})


def journal_key(tag: str, spec: EMSpec, messages: list[dict[str, str]]) -> str:
    """One attempt's request in the journal: the attempt that pays (``tag``) and what it asks."""
    return f"{tag}/{request_key(spec, messages)}"


def journal_tag(key: str) -> str:
    """The attempt that pays for a journaled request (tags have no slash)."""
    return key.partition("/")[0]


class CourierBackend:
    """One replay attempt's ``ModelBackend`` whose calls the courier makes, journaled under its ``tag``.

    The tag (the attempt that pays, as in the call cache) keeps one run's
    recovery from taking an answer another run paid for.
    """

    cacheable = True

    def __init__(self, connection: CourierConnection, tag: str) -> None:
        self.connection = connection
        self.tag = tag

    async def prepare(self) -> None:
        await self.connection.prepare()

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: CallContext) -> Completion:
        return await self.connection.request(spec, messages, journal_key(self.tag, spec, messages))
