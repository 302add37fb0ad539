"""The paced read of a streamed chat completion (``paced_stream.stream_chat_text``): a participant's live reply
from an OpenAI-compatible server, read off its own connection a batch at a time, against a real local server."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from collections.abc import Awaitable, Callable

import h11
import pytest

from attunebench.replay import paced_stream
from attunebench.replay.openai_compatible import StreamFailed, sse_text
from attunebench.replay.paced_stream import _Exchange, chat_post, reachable_directly, stream_chat_text
from tests.core.test_openai_stream import events


def chunked(body: bytes, size: int = 40) -> bytes:
    """``body`` in HTTP/1.1 chunked framing, ``size`` bytes a chunk, then the last chunk."""
    out = b"".join(
        f"{len(body[i : i + size]):x}\r\n".encode() + body[i : i + size] + b"\r\n" for i in range(0, len(body), size)
    )
    return out + b"0\r\n\r\n"


Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


def serve(answers: list[Answer], *, requests: int = 1, close_idle: bool = False) -> tuple[list[str], list[dict], int]:
    """Run ``requests`` streamed reads against a local server answering with ``answers`` in turn; returns what each
    read gave (or the failure's text), the requests the server saw, and how many connections it accepted."""
    seen: list[dict] = []
    accepted = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers["content-length"]))
            seen.append({"line": lines[0], "auth": headers["authorization"], **json.loads(body)})
            await answers.pop(0)(body, writer)
            if close_idle or writer.is_closing():
                break
        writer.close()

    async def run() -> list[str]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        got: list[str] = []
        async with server:
            for _ in range(requests):
                try:
                    stream = stream_chat_text(
                        api_base=f"http://127.0.0.1:{port}/v1/",
                        api_key="sk-x",
                        litellm_model="openai/m-1",
                        messages=[{"role": "user", "content": "hello"}],
                        timeout=5,
                        pace=0.001,
                    )
                    pieces = [text async for text in stream]
                    assert all(pieces)  # no empty pieces
                    got.append("".join(pieces))
                except StreamFailed as exc:
                    got.append(f"failed: {exc}")
        return got

    return asyncio.run(run()), seen, accepted


def answer(status: int, body: bytes, *, framing: str = "chunked", pieces: int = 3) -> Answer:
    """An answer written in ``pieces`` writes: chunked, with a content-length, or up to the connection's close."""

    async def write(_: bytes, writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: text/event-stream\r\n"
        if framing == "chunked":
            payload = chunked(body)
            head += "Transfer-Encoding: chunked\r\n"
        elif framing == "length":
            payload = body
            head += f"Content-Length: {len(body)}\r\n"
        else:
            payload = body
            head += "Connection: close\r\n"
        data = head.encode() + b"\r\n" + payload
        step = len(data) // pieces + 1
        for start in range(0, len(data), step):
            writer.write(data[start : start + step])
            await writer.drain()
            await asyncio.sleep(0)
        if framing == "close":
            writer.close()

    return write


TEXTS = ["I hear", " you.", " That sounds", " heavy — ", "what helps?"]


def test_the_text_arrives_whole_in_every_framing_and_the_request_is_the_one_litellm_sends():
    for framing in ("chunked", "length", "close"):
        got, seen, _ = serve([answer(200, events(*TEXTS), framing=framing)])
        assert got == ["".join(TEXTS)]
    assert seen[0] == {
        "line": "POST /v1/chat/completions HTTP/1.1",
        "auth": "Bearer sk-x",
        "model": "m-1",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
    }


def exchange() -> _Exchange:
    """An exchange whose request has been written, ready to read the answer."""
    ex = _Exchange(h11.Connection(our_role=h11.CLIENT))
    ex.request(chat_post("http://x/v1", "key", b"{}", accept="text/event-stream"))
    return ex


def test_chunked_bodies_decode_however_the_network_cuts_them():
    body = events(*TEXTS) + b"data: " + b"x" * 300 + b"\n\n"
    framed = chunked(body, size=17)[:-5] + b"0;ext=1\r\nTrailer: yes\r\n\r\n"  # a chunk extension and a trailer
    framed = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed
    for piece in (1, 2, 7, 64, len(framed)):
        decoder = exchange()
        raw = bytearray()
        out = b""
        for start in range(0, len(framed), piece):
            raw += framed[start : start + piece]
            out += decoder.take(raw, ended=False)
        assert out == body and decoder.status == 200 and decoder.complete and not raw
    with pytest.raises(StreamFailed, match=r"not valid HTTP/1\.1.*chunk"):
        exchange().take(bytearray(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), ended=False)
    with pytest.raises(StreamFailed, match=r"not valid HTTP/1\.1"):
        exchange().take(bytearray(b"SSH-2.0-OpenSSH\r\n\r\n"), ended=False)
    with pytest.raises(StreamFailed, match="middle of the answer's headers"):
        exchange().take(bytearray(b"HTTP/1.1 200 OK\r\nContent-"), ended=True)


def test_a_refusal_an_error_event_or_a_cut_stream_fails_the_reply():
    got, _, _ = serve(
        [
            answer(429, b'{"error": {"message": "slow down"}}', framing="length"),
            answer(200, events("Hello", done=False) + b'data: {"error": {"message": "overloaded"}}\n\n'),
            answer(200, events("Hello", " there", done=False)),
            answer(200, events("Hello", " there", done=False), framing="close"),
            answer(200, b"data: {nope\n\n"),
        ],
        requests=5,
    )
    assert got[0].startswith("failed: ") and "answered 429" in got[0] and "slow down" in got[0]
    assert "error in the stream" in got[1]
    assert "before [DONE]" in got[2] and "before [DONE]" in got[3]
    assert "not JSON" in got[4]


def test_a_kept_alive_connection_serves_the_next_reply_and_one_the_server_closed_is_replaced():
    got, seen, accepted = serve([answer(200, events("One.")), answer(200, events("Two."))], requests=2)
    assert got == ["One.", "Two."] and len(seen) == 2 and accepted == 1
    got, seen, accepted = serve([answer(200, events("One.")), answer(200, events("Two."))], requests=2, close_idle=True)
    assert got == ["One.", "Two."] and len(seen) == 2 and accepted == 2


def test_a_server_that_never_answers_fails_the_read_at_its_deadline():
    async def run() -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.Event().wait()  # reads the request, never answers

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        stream = stream_chat_text(
            api_base=f"http://127.0.0.1:{port}/v1",
            api_key="k",
            litellm_model="openai/m",
            messages=[],
            timeout=0.2,
            pace=0,
        )
        try:
            return "".join([text async for text in stream])
        except StreamFailed as exc:
            return f"failed: {exc}"
        finally:
            server.close()

    assert asyncio.run(run()) == "failed: no answer in time"


def test_batched_events_are_parsed_together_and_a_bad_one_is_still_named():
    text, rest, done = sse_text(events("a", "b", "c", done=False) + b'data: {"choi')
    assert (text, rest, done) == ("abc", b'data: {"choi', False)
    with pytest.raises(StreamFailed, match="not JSON"):
        sse_text(events("a")[: -len(b"data: [DONE]\n\n")] + b"data: 1, 2\n\n" + events("b"))
    with pytest.raises(StreamFailed, match="error in the stream"):
        sse_text(events("a", done=False) + b'data: {"error": "no"}\n\n')


def test_servers_behind_a_proxy_are_left_to_the_http_client_library(monkeypatch):
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    assert reachable_directly("https://models.example.org/v1")
    assert not reachable_directly("ftp://models.example.org/v1")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.org:3128")
    assert not reachable_directly("https://models.example.org/v1")
    assert reachable_directly("http://models.example.org/v1")
    monkeypatch.setenv("NO_PROXY", "models.example.org")
    assert reachable_directly("https://models.example.org/v1")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_an_https_server_is_read_over_tls_with_its_certificate_checked(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    reply = answer(200, events(*TEXTS))

    async def run() -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reply(await reader.readexactly(length), writer)
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_tls)
        port = server.sockets[0].getsockname()[1]
        stream = stream_chat_text(
            api_base=f"https://localhost:{port}/v1",
            api_key="k",
            litellm_model="openai/m",
            messages=[],
            timeout=5,
            pace=0,
        )
        try:
            return "".join([text async for text in stream])
        except StreamFailed as exc:
            return f"failed: {exc}"
        finally:
            server.close()

    monkeypatch.setattr(paced_stream, "_tls", None)
    assert asyncio.run(run()).startswith("failed: could not connect")  # an unknown certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setattr(paced_stream, "_tls", None)
    assert asyncio.run(run()) == "".join(TEXTS)
