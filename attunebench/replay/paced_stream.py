"""A streamed chat completion read off its socket a batch at a time: the relay route of a participant's live reply.

A provider sends one server-sent event per token, 30 to 50 a second. Read through an HTTP client library, every
event costs its own wake-up of the event loop, its own socket read and a pass through several layers of
parsing (HTTP framing, chunk decoding, the client's iterators): about 0.1 ms of CPU an event, which at a few
hundred replies at once fills a core. Here the request is written and the response read on an asyncio
transport of our own that is paused between reads: after each read the reader waits ``pace`` seconds, during
which the provider's next events wait in the kernel's socket buffer, then takes all of them in one read and
decodes them at once. A reader of the reply cannot tell 50 ms batches from single tokens. The HTTP/1.1 itself
(the request's bytes, the answer's head, chunked or sized or close-delimited bodies, whether the connection can
carry the next request) is h11's, an I/O-free protocol library handed each batch's bytes at once; an answer it
cannot parse fails the reply with h11's reason.

The request is the one litellm and ``openai_compatible.stream_chat_text`` send an OpenAI-compatible server (the
served model name, the messages, ``stream: true``, the key as a bearer token), over HTTP/1.1 or HTTPS (the
system's certificate checks, with certifi's roots or ``SSL_CERT_FILE``); connections are kept alive and reused
per event loop. A server reached through a proxy (``HTTP_PROXY`` and the like) is left to the HTTP client
library: :func:`reachable_directly` says which. Failures raise ``openai_compatible.StreamFailed``, as the
library route does.

The replay's plain (not streamed) calls go on the same connections (``direct_call``): :func:`chat_post` makes
the request, :func:`send` sends it and waits for its answer's head, and the :class:`Answer` reads the body and
gives the connection back. Pure: no Django.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import urllib.request
import weakref
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

from attunebench.replay.openai_compatible import StreamFailed, served_model_name, sse_text

#: Idle connections kept per server and event loop, for the next reply.
MAX_IDLE = 64

_idle: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, int], list[_Connection]]] = (
    weakref.WeakKeyDictionary()
)
_tls: ssl.SSLContext | None = None


class NotSent(StreamFailed):
    """No connection to the server could be made: nothing of the request left."""


@dataclass(frozen=True)
class Post:
    """A POST to an OpenAI-compatible server's chat completions, ready for a connection of our own."""

    api_base: str
    key: tuple[str, str, int]  # the connections it may go on: (scheme, host, port)
    head: h11.Request
    body: bytes


def chat_post(api_base: str, api_key: str, body: bytes, accept: str) -> Post:
    """The POST of the JSON ``body`` to ``api_base``'s chat completions, the key as a bearer token, as the
    HTTP client libraries send it; StreamFailed for a request no HTTP/1.1 can carry (a key holding a newline)."""
    parts = urlsplit(api_base.rstrip("/") + "/chat/completions")
    https = parts.scheme == "https"
    key = (parts.scheme, parts.hostname or "", parts.port or (443 if https else 80))
    headers = [
        ("Host", parts.netloc.rpartition("@")[2]),
        ("Authorization", f"Bearer {api_key}"),
        ("Accept", accept),
        ("Accept-Encoding", "identity"),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        ("User-Agent", "attune"),
    ]
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        head = h11.Request(method="POST", target=target, headers=headers)
    except h11.LocalProtocolError as exc:
        raise StreamFailed(f"a request that cannot be sent: {exc}") from None
    return Post(api_base, key, head, body)


def warm_up(api_bases: Iterable[str]) -> None:
    """Make what the first call to these servers would otherwise make while the first answers wait: the TLS
    settings (certificate roots read, tens of milliseconds) for an https one. Sends nothing."""
    if any(urlsplit(api_base).scheme == "https" for api_base in api_bases):
        _tls_context()


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
        self.http = h11.Connection(our_role=h11.CLIENT)  # the HTTP/1.1 state of the connection, across requests
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


class _Exchange:
    """One request and its answer on a connection, framed by h11: the answer's bytes are handed over a batch at a
    time and come back as its status, then its body's bytes (chunked, of a given length or up to the close)."""

    def __init__(self, http: h11.Connection) -> None:
        self.http = http
        self.status = 0  # the answer's status once its head has arrived (interim 1xx answers are passed over)
        self.headers: list[tuple[bytes, bytes]] = []  # the answer's headers (names lower-cased), with its status
        self.complete = False  # the whole body has arrived
        self.ended = False  # the server closed the connection
        self.received = False  # a byte of the answer has arrived

    def request(self, post: Post) -> bytes:
        """The request's bytes, to be written."""
        events = (post.head, h11.Data(data=post.body), h11.EndOfMessage())
        try:
            return b"".join(self.http.send(event) or b"" for event in events)
        except h11.LocalProtocolError as exc:
            raise StreamFailed(f"a request that cannot be sent: {exc}") from None

    def take(self, raw: bytearray, ended: bool) -> bytes:
        """The body bytes decoded from ``raw`` (which is emptied: h11 keeps what is cut short), and the connection's
        end when ``ended``; StreamFailed on an answer that is not HTTP/1.1."""
        if raw:
            self.received = True
            self.http.receive_data(bytes(raw))
            raw.clear()
        body = self._events()
        if ended and not self.ended:
            self.ended = True
            self.http.receive_data(b"")
            try:
                body += self._events()
            except StreamFailed:
                if not self.status:
                    raise StreamFailed("the connection closed in the middle of the answer's headers") from None
                # a body cut short by the close: the caller says what was missing
        return body

    def _events(self) -> bytes:
        """Every event h11 can parse from what it holds: the body's bytes returned, the rest noted."""
        body: list[bytes] = []
        try:
            while True:
                event = self.http.next_event()
                if type(event) is h11.Data:
                    body.append(event.data)
                elif type(event) is h11.Response:
                    self.status = event.status_code
                    self.headers = list(event.headers)
                elif type(event) is h11.EndOfMessage:
                    self.complete = True
                elif event is h11.NEED_DATA or event is h11.PAUSED or type(event) is h11.ConnectionClosed:
                    return b"".join(body)
        except h11.RemoteProtocolError as exc:
            raise StreamFailed(f"an answer that is not valid HTTP/1.1: {exc}") from None


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


def _ready_for_next(connection: _Connection) -> bool:
    """Whether h11 agrees the connection can carry another request (both sides done, no close asked for, nothing
    left over); if so, it is readied for one."""
    http = connection.http
    if connection.ended or http.trailing_data[0]:
        return False
    try:
        http.start_next_cycle()
    except h11.LocalProtocolError:  # a side must close: HTTP/1.0, "Connection: close"
        return False
    return True


def _give_back(key: tuple[str, str, int], connection: _Connection) -> None:
    idle = _idle.setdefault(asyncio.get_running_loop(), {}).setdefault(key, [])
    if len(idle) < MAX_IDLE and connection.transport is not None:
        # Read while idle: a close by the server (its keep-alive timeout) is seen when it happens, so the
        # connection is not handed out again to carry a request nobody reads.
        connection.transport.resume_reading()
        idle.append(connection)
    else:
        connection.close()


async def _answer_head(connection: _Connection, exchange: _Exchange, deadline: float) -> bytes | None:
    """Wait for the answer's status (``exchange.status``) and return the body bytes that came with its head; None
    when the connection ended before any byte came."""
    while True:
        if connection.ended and not connection.buffer and not exchange.received:
            return None
        body = exchange.take(connection.buffer, connection.ended)
        if exchange.status:
            return body
        if exchange.ended:  # a guard: h11 itself fails a head the close cut short
            raise StreamFailed("the connection closed in the middle of the answer's headers")
        await connection.more(deadline)


class Answer:
    """The answer to a :class:`Post` on a connection of our own, from its head on; :meth:`release` ends it."""

    def __init__(self, post: Post, connection: _Connection, exchange: _Exchange, first: bytes) -> None:
        self.post = post
        self.first = first  # the body bytes that came with the head
        self._connection = connection
        self._exchange = exchange

    @property
    def status(self) -> int:
        return self._exchange.status

    @property
    def headers(self) -> dict[bytes, bytes]:
        """The answer's headers, names lower-cased."""
        return dict(self._exchange.headers)

    @property
    def over(self) -> bool:
        """Whether no more of the body will come: it is complete, or the connection ended."""
        return self._exchange.complete or self._exchange.ended

    @property
    def complete(self) -> bool:
        return self._exchange.complete

    async def more(self, deadline: float, after: float = 0.0) -> bytes:
        """The body bytes that arrive next, reading nothing for the first ``after`` seconds (``_Connection.more``);
        StreamFailed at ``deadline``."""
        await self._connection.more(deadline, after=after)
        return self._exchange.take(self._connection.buffer, self._connection.ended)

    async def body(self, deadline: float) -> bytes:
        """The whole body, ``first`` included; StreamFailed when the connection ends before it does."""
        received = self.first
        while not self.over:
            received += await self.more(deadline)
        if not self.complete:
            raise StreamFailed("the connection closed in the middle of the answer")
        return received

    def release(self, reusable: bool) -> None:
        """Keep the connection for the next request when ``reusable`` (the answer was read to its end) and h11
        agrees it can carry one; else close it."""
        if reusable and _ready_for_next(self._connection):
            _give_back(self.post.key, self._connection)
        else:
            self._connection.close()


async def send(post: Post, deadline: float) -> Answer:
    """Send ``post`` on a kept-alive connection to its server, or a new one, and wait for its answer's head; once
    more on a new connection when a kept-alive one turns out to have been closed by the server meanwhile.
    StreamFailed on failure (NotSent when no connection could be made), the connection closed."""
    for _ in range(2):
        try:
            connection, reused = await _connection(post.key, deadline)
        except StreamFailed as exc:
            raise NotSent(str(exc)) from exc
        assert connection.transport is not None
        exchange = _Exchange(connection.http)
        try:
            connection.transport.write(exchange.request(post))
            first = await _answer_head(connection, exchange, deadline)
        except BaseException:
            connection.close()
            raise
        if first is not None:
            return Answer(post, connection, exchange, first)
        connection.close()
        if not reused:
            break
    raise StreamFailed("the server closed the connection without answering")


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
    body = json.dumps({"model": served_model_name(litellm_model), "messages": messages, "stream": True}).encode()
    post = chat_post(api_base, api_key, body, accept="text/event-stream")
    deadline = asyncio.get_running_loop().time() + timeout
    answer = await send(post, deadline)
    reusable = False
    try:
        if answer.status != 200:
            detail = answer.first
            while not answer.over and len(detail) < 300:
                detail += await answer.more(deadline)
            raise StreamFailed(f"{api_base} answered {answer.status}: {detail[:300].decode('utf-8', 'replace')}")
        events = answer.first
        while True:
            text, events, done = sse_text(events)
            if done:
                # The body's end follows [DONE] at once: a connection read to it serves the next reply.
                reusable = answer.complete
                if text:
                    yield text
                return
            if text:
                yield text
            if answer.over:  # what was buffered is decoded: no more will come
                raise StreamFailed(f"{api_base} ended the stream before [DONE]")
            events += await answer.more(deadline, after=pace)
    finally:
        answer.release(reusable)
