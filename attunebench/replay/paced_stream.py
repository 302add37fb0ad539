"""A streamed chat completion read off its socket a batch at a time: the relay route of a participant's live reply.

A provider sends one server-sent event per token, 30 to 50 a second. Read through an HTTP client library, every
event costs its own wake-up of the event loop, its own socket read and a pass through several layers of
parsing (HTTP framing, chunk decoding, the client's iterators): about 0.1 ms of CPU an event, which at a few
hundred replies at once fills a core. Here the request is written and the response read on an asyncio
transport of our own that is paused between reads: after each read the reader waits ``pace`` seconds, during
which the provider's next events wait in the kernel's socket buffer, then takes all of them in one read and
decodes them at once. A reader of the reply cannot tell 50 ms batches from single tokens.

The request is the one litellm and ``openai_compatible.stream_chat_text`` send an OpenAI-compatible server (the
served model name, the messages, ``stream: true``, the key as a bearer token), over HTTP/1.1 or HTTPS (the
system's certificate checks, with certifi's roots or ``SSL_CERT_FILE``); connections are kept alive and reused
per event loop. A server reached through a proxy (``HTTP_PROXY`` and the like) is left to the HTTP client
library: :func:`reachable_directly` says which. Failures raise ``openai_compatible.StreamFailed``, as the
library route does. Pure: no Django.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.request
import weakref
from collections.abc import AsyncGenerator
from urllib.parse import urlsplit

from attunebench.replay.openai_compatible import StreamFailed, served_model_name, sse_text

#: Idle connections kept per server and event loop, for the next reply.
MAX_IDLE = 64

_idle: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, int], list[_Connection]]] = (
    weakref.WeakKeyDictionary()
)
_tls: ssl.SSLContext | None = None


def reachable_directly(api_base: str) -> bool:
    """Whether ``api_base`` is an http(s) URL reached without a proxy (the environment's proxy settings)."""
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies and "all" not in proxies:
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


def _tls_context() -> ssl.SSLContext:
    """Certificates checked as the HTTP client library checks them: certifi's roots unless SSL_CERT_FILE says."""
    global _tls
    if _tls is None:
        cafile = os.environ.get("SSL_CERT_FILE")
        if not cafile:
            try:
                import certifi

                cafile = certifi.where()
            except ImportError:  # the system's roots
                cafile = None
        _tls = ssl.create_default_context(cafile=cafile)
    return _tls


class _Connection(asyncio.Protocol):
    """One connection whose bytes collect in ``buffer``; reading is paused except while :meth:`more` waits."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False
        self.failure: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.failure = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def more(self, deadline: float, after: float = 0.0) -> None:
        """Wait until more bytes have arrived or the connection has ended, reading nothing for the first ``after``
        seconds (what arrives meanwhile waits in the socket, to be taken in one read); StreamFailed at
        ``deadline`` (the loop's clock)."""
        if self.ended or self.transport is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= deadline:
            raise StreamFailed("no answer in time")
        waiter = self._waiter = loop.create_future()
        resume = loop.call_later(after, self.transport.resume_reading) if after else None
        if resume is None:
            self.transport.resume_reading()
        expiry = loop.call_at(deadline, self._wake)  # the deadline ends the wait as data would
        try:
            await waiter
        finally:
            expiry.cancel()
            if resume is not None:
                resume.cancel()
            self._waiter = None
            if not self.ended:
                self.transport.pause_reading()
        if not self.buffer and not self.ended and loop.time() >= deadline:
            raise StreamFailed("no answer in time")

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.ended = True


class _Body:
    """Decodes a response body as it arrives: chunked, of a given length, or up to the connection's end."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        try:
            self.left = None if self.chunked or length is None else int(length)
        except ValueError:
            raise StreamFailed(f"a response with a bad content-length: {length!r}") from None
        self.chunk_left = 0  # bytes of the current chunk still to come
        self.chunk_crlf = False  # the current chunk's data ended; its CRLF is next
        self.complete = self.left == 0

    def take(self, raw: bytearray) -> bytes:
        """The body bytes that can be decoded from ``raw`` (removed from it); what is cut short stays there."""
        if not self.chunked:
            size = len(raw) if self.left is None else min(self.left, len(raw))
            out = bytes(raw[:size])
            del raw[:size]
            if self.left is not None:
                self.left -= size
                self.complete = self.left == 0
            return out
        decoded = bytearray()
        while not self.complete:
            if self.chunk_left:
                size = min(self.chunk_left, len(raw))
                decoded += raw[:size]
                del raw[:size]
                self.chunk_left -= size
                if self.chunk_left:
                    break
                self.chunk_crlf = True
            if self.chunk_crlf:
                if len(raw) < 2:
                    break
                if raw[:2] != b"\r\n":
                    raise StreamFailed("a chunked response whose chunk does not end in CRLF")
                del raw[:2]
                self.chunk_crlf = False
            line_end = raw.find(b"\r\n")
            if line_end < 0:
                break
            try:
                size = int(bytes(raw[:line_end]).split(b";")[0].strip(), 16)
            except ValueError:
                raise StreamFailed(
                    f"a chunked response with a bad chunk size: {bytes(raw[:line_end])[:40]!r}"
                ) from None
            if size:
                del raw[: line_end + 2]
                self.chunk_left = size
                continue
            end = raw.find(b"\r\n\r\n", line_end)  # the last chunk, then trailers (if any) and an empty line
            if end < 0:
                break
            del raw[: end + 4]
            self.complete = True
        return bytes(decoded)


async def _connection(key: tuple[str, str, int], deadline: float) -> tuple[_Connection, bool]:
    """An idle connection to the server (and True), or a new one (and False)."""
    loop = asyncio.get_running_loop()
    idle = _idle.setdefault(loop, {}).get(key, [])
    while idle:
        connection = idle.pop()
        if (
            not connection.ended
            and not connection.buffer
            and connection.transport
            and not connection.transport.is_closing()
        ):
            return connection, True
        connection.close()
    scheme, host, port = key
    try:
        async with asyncio.timeout_at(deadline):
            _, connection = await loop.create_connection(
                _Connection, host, port, ssl=_tls_context() if scheme == "https" else None
            )
    except TimeoutError:
        raise StreamFailed(f"could not connect to {host}:{port} in time") from None
    except OSError as exc:
        raise StreamFailed(f"could not connect to {host}:{port}: {exc}") from exc
    assert connection.transport is not None
    connection.transport.pause_reading()
    return connection, False


def _give_back(key: tuple[str, str, int], connection: _Connection) -> None:
    idle = _idle.setdefault(asyncio.get_running_loop(), {}).setdefault(key, [])
    if len(idle) < MAX_IDLE:
        idle.append(connection)
    else:
        connection.close()


async def _response_head(connection: _Connection, deadline: float) -> tuple[int, dict[str, str]] | None:
    """The status and headers (names in lower case); None when the connection ended before any byte came."""
    while True:
        end = connection.buffer.find(b"\r\n\r\n")
        if end >= 0:
            lines = bytes(connection.buffer[:end]).decode("latin-1").split("\r\n")
            del connection.buffer[: end + 4]
            try:
                status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                raise StreamFailed(f"an answer that is not HTTP: {lines[0][:100]!r}") from None
            if 100 <= status < 200:  # an interim answer: the real one follows
                continue
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if lines[0].startswith("HTTP/1.0"):
                headers.setdefault("connection", "close")
            return status, headers
        if connection.ended:
            if not connection.buffer:
                return None
            raise StreamFailed("the connection closed in the middle of the answer's headers")
        await connection.more(deadline)


async def stream_chat_text(
    *,
    api_base: str,
    api_key: str,
    litellm_model: str,
    messages: list[dict[str, str]],
    timeout: float,
    pace: float,
) -> AsyncGenerator[str, None]:
    """The text of a streamed chat completion, one piece per read of the socket, reads at least ``pace`` s apart.

    A status other than 200, an error event, a stream that ends before ``[DONE]`` or an answer not complete
    within ``timeout`` seconds raises StreamFailed.
    """
    parts = urlsplit(api_base.rstrip("/") + "/chat/completions")
    https = parts.scheme == "https"
    host = parts.hostname or ""
    key = (parts.scheme, host, parts.port or (443 if https else 80))
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    body = json.dumps({"model": served_model_name(litellm_model), "messages": messages, "stream": True}).encode()
    request = (
        f"POST {target} HTTP/1.1\r\nHost: {parts.netloc.rpartition('@')[2]}\r\n"
        f"Authorization: Bearer {api_key}\r\nAccept: text/event-stream\r\nAccept-Encoding: identity\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nUser-Agent: attune\r\n\r\n"
    ).encode("latin-1") + body
    deadline = asyncio.get_running_loop().time() + timeout
    for _ in range(2):
        connection, reused = await _connection(key, deadline)
        assert connection.transport is not None
        connection.transport.write(request)
        try:
            head = await _response_head(connection, deadline)
        except BaseException:
            connection.close()
            raise
        if head is not None:
            break
        connection.close()
        if not reused:
            raise StreamFailed(f"{api_base} closed the connection without answering")
        # a kept-alive connection the server had closed meanwhile: asked again once on a new one
    else:  # pragma: no cover - the second round always takes a new connection, which breaks or raises
        raise StreamFailed(f"{api_base} closed the connection without answering")
    status, headers = head
    decoder = _Body(headers)
    reusable = False
    try:
        if status != 200:
            detail = decoder.take(connection.buffer)
            while not decoder.complete and not connection.ended and len(detail) < 300:
                await connection.more(deadline)
                detail += decoder.take(connection.buffer)
            raise StreamFailed(f"{api_base} answered {status}: {detail[:300].decode('utf-8', 'replace')}")
        events = b""
        while True:
            events += decoder.take(connection.buffer)
            text, events, done = sse_text(events)
            if done:
                # The body's end follows [DONE] at once: a connection read to it serves the next reply.
                reusable = decoder.complete and not connection.buffer and headers.get("connection") != "close"
                if text:
                    yield text
                return
            if text:
                yield text
            if decoder.complete or connection.ended:  # what was buffered is decoded: no more will come
                raise StreamFailed(f"{api_base} ended the stream before [DONE]")
            await connection.more(deadline, after=pace)
    finally:
        if reusable:
            _give_back(key, connection)
        else:
            connection.close()
