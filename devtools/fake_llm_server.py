"""A local fake OpenAI-compatible chat-completions server for tests and benchmarks.

It stands in for a provider so that the replay engine can be exercised through
litellm end to end without keys or network. It recognises the
call type from the ``TASK:`` line our prompts end with, and answers as the
core's ``baseline:random`` does for that call (right question ids, comparison
indices, PANAS keys, reasoning in verbose modes). Faults are injectable:

- latency (fixed plus jitter), to measure scheduling efficiency;
- an error rate spread over 429 (with Retry-After), 500, 503 and timeouts
  (the server holds the request open past the client's timeout);
- a malformed-reply rate (prose or truncated JSON: needs a retry) and a messy
  rate (fenced, raw newlines, trailing commas: the lenient parser copes);
- a script of forced outcomes consumed in order, for deterministic tests,
  among them answers with status 200 that are no chat completion (an HTML
  page, an empty body, a JSON error object);
- a hold: the first requests (of chosen call types) wait until a given number
  are in flight at once, so a test can check a client's concurrency without
  racing the latency on a loaded machine; lowering the hold (``POST /control``)
  to what is held, or to 0, releases them.

Every request is counted (``GET /stats``, reset with ``POST /stats/reset``) so
a test can assert that a cached re-run made zero calls. ``POST /control``
changes the configuration while running.

Run: ``python -m devtools.fake_llm_server --port 8799 --latency-ms 200``
(``--port 0`` picks a free port; the chosen URL is printed on a line starting
with ``FAKE_LLM_SERVER_READY``). In-process: ``FakeLLMServer(...).start()``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from aiohttp import web

from attunebench.replay import prompts as P
from attunebench.replay.baselines import RandomBaseline

READY_PREFIX = "FAKE_LLM_SERVER_READY"
ERROR_KINDS = ("429", "500", "503", "timeout")
# A 200 that is not a chat completion, as a misconfigured gateway or proxy sends: an HTML page, an empty body,
# a JSON error object. Scripted only.
BROKEN_200_KINDS = ("html", "empty", "error-json")
SCRIPT_OUTCOMES = (*ERROR_KINDS, *BROKEN_200_KINDS, "malformed", "ok")

#: What a streamed participant-chat request (no TASK line of ours) is answered with.
CHAT_REPLY = (
    "That sounds like a lot to carry right now, and it makes sense that you feel this way. "
    "What part of it feels heaviest today, and what would help you most?"
)

_QUESTION_LINE = re.compile(r"^- (B\d+):", re.MULTILINE)
_COMPARISON_LINE = re.compile(r"^Comparison (\d+):", re.MULTILINE)


@dataclass
class FakeConfig:
    """Behaviour of the fake server; every field can be changed via POST /control."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    error_rate: float = 0.0
    error_kinds: list[str] = field(default_factory=lambda: ["429", "500", "timeout"])
    retry_after_s: float = 1.0
    timeout_hang_s: float = 30.0
    malformed_rate: float = 0.0
    messy_rate: float = 0.0
    seed: int = 0
    script: list[str] = field(default_factory=list)
    # A streamed reply (``"stream": true``, as the participant chat asks) arrives word by word over this long.
    stream_ms: float = 0.0
    # How many words (one chunk each) a streamed participant-chat reply has: CHAT_REPLY's words over and over
    # (0: CHAT_REPLY as it is). A real provider sends one chunk per token, about 250 for a reply.
    stream_words: int = 0
    # Requests of ``hold_call_types`` (every type when empty) wait, before anything else, until
    # ``hold_until_in_flight`` of them are in flight at once (from then on none waits) or ``hold_timeout_s``
    # has passed: a test sees a client's whole concurrency without racing the latency (0: no hold).
    hold_until_in_flight: int = 0
    hold_call_types: list[str] = field(default_factory=list)
    hold_timeout_s: float = 30.0
    # The first ``hold_after`` requests to arrive are never held (a client's one-call probe before its run).
    hold_after: int = 0
    # Share of each prompt's tokens reported as served from the provider's prompt cache
    # (``usage.prompt_tokens_details.cached_tokens``, as OpenAI reports it), priced lower by litellm.
    cached_prompt_share: float = 0.0
    # A key the server insists on (``Authorization: Bearer <key>``): any other answers 401, as a provider
    # does for a wrong key ("": every key is accepted).
    api_key: str = ""
    # Every chat answer is this text instead of the call's JSON (""): a server that ignores the answer format.
    answer_text: str = ""
    # Calls of these types are answered in prose, never in JSON (a model that fails one kind of call only).
    broken_call_types: list[str] = field(default_factory=list)

    def update(self, changes: dict[str, Any]) -> None:
        known = {f.name for f in fields(self)}
        for key, value in changes.items():
            if key not in known:
                raise ValueError(f"unknown setting {key!r}")
            setattr(self, key, value)
        for kind in self.error_kinds:
            if kind not in ERROR_KINDS:
                raise ValueError(f"unknown error kind {kind!r}")
        for outcome in self.script:
            if outcome not in SCRIPT_OUTCOMES:
                raise ValueError(f"unknown script outcome {outcome!r}")
        for call_type in [*self.hold_call_types, *self.broken_call_types]:
            if call_type not in P.CALL_TYPES:
                raise ValueError(f"unknown call type to hold {call_type!r}")


@dataclass
class FakeStats:
    requests: int = 0
    completions: int = 0
    by_call_type: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    malformed: int = 0
    messy: int = 0
    # Chat requests being answered right now, and the most at once since the last reset:
    # what a provider would see of a client's concurrency.
    in_flight: int = 0
    peak_in_flight: int = 0
    # sha256 of each request's messages (json, sorted keys) -> times answered (a request whose client left
    # first is not: see ``abandoned``); lets a test prove that no call was paid twice.
    digests: Counter = field(default_factory=Counter)
    # Requests whose client closed the connection before their answer was complete (a client that timed out,
    # a killed worker): cancelled. Cancelled before answering, they are not in ``digests``; a streamed reply
    # cut off part-way is in both. A benchmark reports them apart.
    abandoned: int = 0
    # The bearer token of each request -> times sent: lets a test prove which key (if
    # any) a client handed to this host.
    bearer_tokens: Counter = field(default_factory=Counter)
    # Wall-clock (epoch seconds) of the first request received and the last answer written since the last
    # reset: a benchmark driving another process measures the replay from the provider's side with them (a
    # request whose client gave up is cancelled, so a hung one no longer stretches it).
    first_request_at: float | None = None
    last_answer_at: float | None = None
    # The last request's fields other than its messages (model, temperature, ...): what a client sent.
    last_request_fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["by_call_type"] = dict(self.by_call_type)
        data["errors"] = dict(self.errors)
        data["bearer_tokens"] = dict(self.bearer_tokens)
        del data["digests"]
        return data


# ---------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------


def request_digest(messages: list[dict[str, Any]]) -> str:
    """The key under which the server counts a request (see FakeStats.digests)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


def context_of(messages: list[dict[str, Any]]) -> P.CallContext:
    """The call context a request built by our prompts was made from, as far as its task shows it.

    Enough for an answer of the right shape: the call type, the question ids,
    the comparison indices, verbose or not, and absolute ratings or changes.
    """
    call_type = P.call_type_of(messages) or P.DRAFT
    last = P.task_text(messages)
    task = last[last.rfind(P.TASK_MARKER) :]
    comparisons = tuple(
        P.ComparisonView(index=int(i), question_id="", question_text="", label_a="", label_b="")
        for i in _COMPARISON_LINE.findall(task)
    )
    return P.CallContext(
        call_type=call_type,
        conversation_id="",
        category="",
        subtopic="",
        mode="verbose" if '"reasoning"' in task else "default",
        turns=(),
        question_ids=tuple(_QUESTION_LINE.findall(task)),
        comparisons=comparisons,
        panas_strategy="delta" if f'"{P.KEY_PANAS_CHANGE}"' in task else "absolute",
    )


def answer_for(messages: list[dict[str, Any]], seed: int) -> tuple[str | None, str]:
    """(call type, schema-valid JSON answer) for a request built by our prompts.

    The answer is the core's random baseline's for the request's context, so
    the fake provider answers exactly as ``baseline:random`` would; ``seed``
    (derived from the request) makes identical requests get identical answers.
    """
    ctx = context_of(messages)
    answer = RandomBaseline(seed).answer(ctx)
    if ctx.verbose:
        answer = {P.KEY_REASONING: "The participant's words and the reply's tone suggest these answers.", **answer}
    return P.call_type_of(messages), json.dumps(answer, ensure_ascii=False)


def _malformed(text: str, rng: random.Random) -> str:
    """A reply no lenient parser can use: prose only, or JSON cut off mid-way."""
    if rng.random() < 0.5:
        return "I'm sorry, I can't provide that in JSON right now."
    return text[: max(1, len(text) // 2)]


def _messy(answer: dict[str, Any], rng: random.Random) -> str:
    """A reply the lenient parser must repair (SPEC 4): fences, raw newlines, trailing commas."""
    kind = rng.choice(("fenced", "newline", "trailing_comma", "prose_around"))
    text = json.dumps(answer, ensure_ascii=False)
    if kind == "fenced":
        return f"Here is my answer:\n```json\n{json.dumps(answer, indent=2)}\n```\nLet me know if you need more."
    if kind == "newline":
        return text.replace(". ", ".\n", 1) if ". " in text else text.replace('": "', '": "line one\nline two ', 1)
    if kind == "trailing_comma":
        return text[:-1] + ",}"
    return f"Sure. {text} Hope this helps."


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------


class _App:
    def __init__(self, config: FakeConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.reset()

    def reset(self) -> None:
        """Forget the counts, and whether the hold was reached (``FakeConfig.hold_until_in_flight``)."""
        self.stats = FakeStats()
        self._hold_reached = asyncio.Event()
        self._holding = 0
        self._arrived = 0

    async def _hold(self, messages: list[Any]) -> None:
        config = self.config
        self._arrived += 1
        if config.hold_until_in_flight <= 0 or self._hold_reached.is_set() or self._arrived <= config.hold_after:
            return
        if config.hold_call_types and P.call_type_of(messages) not in config.hold_call_types:
            return
        self._holding += 1
        try:
            if self._holding >= config.hold_until_in_flight:
                self._hold_reached.set()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._hold_reached.wait(), config.hold_timeout_s)
        finally:
            self._holding -= 1

    def _next_outcome(self) -> str:
        config = self.config
        if config.script:
            return config.script.pop(0)
        if config.error_rate and self.rng.random() < config.error_rate:
            return self.rng.choice(config.error_kinds)
        if config.malformed_rate and self.rng.random() < config.malformed_rate:
            return "malformed"
        if config.messy_rate and self.rng.random() < config.messy_rate:
            return "messy"
        return "ok"

    async def completions(self, request: web.Request) -> web.StreamResponse:
        stats = self.stats
        if stats.first_request_at is None:
            stats.first_request_at = time.time()
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            response = await self._answer(request)
        except asyncio.CancelledError:
            # The client left before its answer (it timed out, or its process died): aiohttp cancels the
            # handler (``handler_cancellation``), as a provider stops generating for a closed connection.
            stats.abandoned += 1
            raise
        finally:
            stats.in_flight -= 1
        stats.last_answer_at = time.time()
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        await self._hold(body.get("messages") or [])
        self.stats.requests += 1
        self.stats.last_request_fields = {k: v for k, v in body.items() if k != "messages"}
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.stats.bearer_tokens[bearer] += 1
        config = self.config
        if config.api_key and bearer != config.api_key:
            self.stats.errors["401"] += 1
            return web.json_response(
                {"error": {"message": "Incorrect API key provided (fake)", "type": "invalid_request_error"}},
                status=401,
            )
        outcome = self._next_outcome()
        delay = config.latency_ms + (self.rng.uniform(0, config.jitter_ms) if config.jitter_ms else 0.0)
        if delay:
            await asyncio.sleep(delay / 1000)
        if outcome in ERROR_KINDS:
            self.stats.errors[outcome] += 1
            if outcome == "timeout":
                await asyncio.sleep(config.timeout_hang_s)
                return web.json_response({"error": {"message": "late", "type": "timeout"}}, status=504)
            if outcome == "429":
                headers = {
                    "Retry-After": str(max(1, math.ceil(config.retry_after_s))),
                    "retry-after-ms": str(int(config.retry_after_s * 1000)),
                }
                return web.json_response(
                    {
                        "error": {
                            "message": "Rate limit reached (fake)",
                            "type": "rate_limit_error",
                            "code": "rate_limit_exceeded",
                        }
                    },
                    status=429,
                    headers=headers,
                )
            return web.json_response(
                {"error": {"message": f"Fake server error {outcome}", "type": "server_error"}}, status=int(outcome)
            )
        if outcome in BROKEN_200_KINDS:
            self.stats.errors[outcome] += 1
            if outcome == "html":
                return web.Response(text="<html><body>Gateway maintenance</body></html>", content_type="text/html")
            if outcome == "empty":
                return web.Response(body=b"", content_type="application/json")
            return web.json_response({"error": {"message": "upstream unavailable", "type": "server_error"}})
        messages = body.get("messages") or []
        digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
        self.stats.digests[request_digest(messages)] += 1
        call_type, text = answer_for(messages, int.from_bytes(digest[:8], "big") ^ config.seed)
        self.stats.by_call_type[call_type or "unknown"] += 1
        if config.answer_text:
            text = config.answer_text
        elif call_type in config.broken_call_types:
            text = "I would rather say this in my own words than in JSON."
        if outcome == "malformed":
            self.stats.malformed += 1
            text = _malformed(text, self.rng)
        elif outcome == "messy":
            self.stats.messy += 1
            text = _messy(json.loads(text), self.rng)
        self.stats.completions += 1
        if body.get("stream"):
            return await self._stream(request, body.get("model", "fake"), text if call_type else self._chat_reply())
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        usage: dict[str, Any] = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(text) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if config.cached_prompt_share:
            usage["prompt_tokens_details"] = {"cached_tokens": int(usage["prompt_tokens"] * config.cached_prompt_share)}
        return web.json_response(
            {
                "id": f"chatcmpl-fake-{self.stats.requests}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage,
            }
        )

    def _chat_reply(self) -> str:
        """The participant-chat reply: CHAT_REPLY, or ``stream_words`` of its words over and over."""
        if not self.config.stream_words:
            return CHAT_REPLY
        words = CHAT_REPLY.split(" ")
        return " ".join(words[i % len(words)] for i in range(self.config.stream_words))

    async def _stream(self, request: web.Request, model: str, text: str) -> web.StreamResponse:
        """Server-sent chat-completion chunks, one word each, spread evenly over ``stream_ms``.

        Each chunk leaves at its own time from the start (not a pause after the previous one), so a busy
        server's delays do not add up and the stream takes ``stream_ms`` however many chunks it has.
        """
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        words = text.split(" ")
        pause = self.config.stream_ms / 1000 / len(words)
        loop = asyncio.get_running_loop()
        started = loop.time()

        def chunk(delta: dict[str, str], finish: str | None) -> bytes:
            payload = {
                "id": f"chatcmpl-fake-{self.stats.requests}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        for i, word in enumerate(words):
            if pause:
                await asyncio.sleep(max(0.0, started + (i + 1) * pause - loop.time()))
            await response.write(chunk({"content": word if i == 0 else " " + word}, None))
        await response.write(chunk({}, "stop") + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats.to_dict())

    async def get_digests(self, request: web.Request) -> web.Response:
        return web.json_response(dict(self.stats.digests))

    async def reset_stats(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def control(self, request: web.Request) -> web.Response:
        try:
            self.config.update(await request.json())
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        self.release_if_reached()
        return web.json_response(asdict(self.config))

    def release_if_reached(self) -> None:
        """Lowering the hold to what is already held (or to 0) lets the held requests go at once."""
        if self.config.hold_until_in_flight <= self._holding:
            self._hold_reached.set()

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-em", "object": "model"}]})


def make_app(config: FakeConfig | None = None) -> tuple[web.Application, _App]:
    state = _App(config or FakeConfig())
    app = web.Application(client_max_size=32 * 1024 * 1024)
    for prefix in ("", "/v1"):
        app.router.add_post(f"{prefix}/chat/completions", state.completions)
        app.router.add_get(f"{prefix}/models", state.models)
    app.router.add_get("/stats", state.get_stats)
    app.router.add_get("/stats/digests", state.get_digests)
    app.router.add_post("/stats/reset", state.reset_stats)
    app.router.add_post("/control", state.control)
    return app, state


class FakeLLMServer:
    """The server on its own event loop in a daemon thread (a test fixture).

    Its own loop keeps it independent of whatever loop the code under test
    uses, including ``asyncio.run`` calls that open and close loops.
    """

    def __init__(self, config: FakeConfig | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config or FakeConfig()
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._state: _App | None = None

    @property
    def url(self) -> str:
        """Base URL for litellm's ``api_base`` (OpenAI style, ends in /v1)."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> FakeLLMServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                app, self._state = make_app(self.config)
                self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
                loop.run_until_complete(self._runner.setup())
                site = web.TCPSite(self._runner, self.host, self.port)
                loop.run_until_complete(site.start())
                self.port = self._runner.addresses[0][1]  # the port the system chose for port 0
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-llm-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def stats(self) -> dict[str, Any]:
        assert self._state is not None, "server not started"
        return self._state.stats.to_dict()

    def digests(self) -> dict[str, int]:
        assert self._state is not None, "server not started"
        return dict(self._state.stats.digests)

    def reset(self) -> None:
        assert self._state is not None, "server not started"
        self._state.reset()

    def configure(self, **changes: Any) -> None:
        """Change behaviour while running (applied on the server's loop)."""
        assert self._loop is not None, "server not started"
        done = threading.Event()
        errors: list[Exception] = []

        def apply() -> None:
            try:
                self.config.update(changes)
                if self._state is not None:
                    self._state.release_if_reached()
            except ValueError as exc:
                errors.append(exc)
            done.set()

        self._loop.call_soon_threadsafe(apply)
        done.wait(5)
        if errors:
            raise errors[0]

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_subprocess(*args: str, python: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start the server in a child process on a free port; returns (process, base URL).

    Used where the server's CPU must not count against the client (the
    benchmark) or must outlive a worker (Celery tests).
    """
    process = subprocess.Popen(
        [python or sys.executable, "-m", "devtools.fake_llm_server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith(READY_PREFIX):
            return process, line.split()[1]
    process.kill()
    raise RuntimeError("fake LLM server did not start")


def http_json(url: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """GET (or POST ``payload`` to) a control URL of a running server, stdlib only."""
    import urllib.request

    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        url, data=data, method="GET" if payload is None else "POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def root_url(api_base: str) -> str:
    """http://host:port from an api_base ending in /v1 (where /stats and /control live)."""
    return api_base[:-3] if api_base.endswith("/v1") else api_base.rstrip("/")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--error-rate", type=float, default=0.0)
    parser.add_argument(
        "--error-kinds", default="429,500,timeout", help=f"comma-separated from {','.join(ERROR_KINDS)}"
    )
    parser.add_argument("--retry-after-s", type=float, default=1.0)
    parser.add_argument("--timeout-hang-s", type=float, default=30.0)
    parser.add_argument("--malformed-rate", type=float, default=0.0)
    parser.add_argument("--messy-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stream-ms", type=float, default=0.0, help="how long a streamed reply takes, word by word")
    parser.add_argument(
        "--stream-words", type=int, default=0, help="words (one chunk each) of a streamed chat reply (0: a short one)"
    )
    parser.add_argument("--api-key", default="", help="the only key accepted; any other gets 401")
    parser.add_argument("--answer-text", default="", help="answer every call with this text (ignore the format)")
    options = parser.parse_args(argv)
    config = FakeConfig()
    config.update(
        {
            "latency_ms": options.latency_ms,
            "jitter_ms": options.jitter_ms,
            "error_rate": options.error_rate,
            "error_kinds": [k.strip() for k in options.error_kinds.split(",") if k.strip()],
            "retry_after_s": options.retry_after_s,
            "timeout_hang_s": options.timeout_hang_s,
            "malformed_rate": options.malformed_rate,
            "messy_rate": options.messy_rate,
            "seed": options.seed,
            "stream_ms": options.stream_ms,
            "stream_words": options.stream_words,
            "api_key": options.api_key,
            "answer_text": options.answer_text,
        }
    )

    async def serve() -> None:
        app, _ = make_app(config)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, options.host, options.port)
        await site.start()
        port = runner.addresses[0][1]
        print(f"{READY_PREFIX} http://{options.host}:{port}/v1", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
