"""Server CPU per streamed chat reply and per chunk: what relaying a participant's live reply costs the web process.

A participant's reply is streamed from the provider on the process's chat loop and handed, in batches, to the
server thread that screens it for model names and writes it to the browser as NDJSON events. This runs that
exact path in this process, as the server's threads do (``collection.identity_guard.GuardedReply`` over
``collection.chat_model.stream_reply``, each event encoded as the view encodes it; only the socket write is
left out), against the fake OpenAI-compatible provider in its own process (so its CPU is not counted), which
streams each reply of ``--stream-words`` words, one chunk each as a provider sends one per token, over
``--stream-ms`` (default 250 over 6.25 s: 40 a second):

- ``--streams`` threads (default 50, as many replies at once as a busy server holds) each read one whole
  reply; a round is all of them; ``--rounds`` timed rounds follow one untimed warm-up round;
- cpu_ms_per_reply   this process's CPU (user + system, every thread: the chat loop and the readers) per reply
- cpu_ms_per_chunk   the same per chunk the provider sent (target: 0.1 ms or less)
- pieces_per_reply   how many pieces a reader received per reply (the provider sends one per word; pieces
                     that arrive while a reader is busy reach it together)
- overhead_ms p50/p95  each reply's wall time beyond the provider's ``--stream-ms``

The machine is shared: the load average is printed with the figures.
Usage: python bench/reply_stream_cpu.py [--streams 50 --rounds 3 --stream-words 250 --stream-ms 6250 --smoke]
(``--smoke``: 4 streams, 1 round, 40 words in 1 s.)
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")
os.environ["ATTUNE_ALLOW_LIVE_MODELS"] = "1"
os.environ.setdefault("ATTUNE_DATA_DIR", tempfile.mkdtemp(prefix="attune-bench-"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")

import django  # noqa: E402

django.setup()

import litellm  # noqa: E402, F401  (up front, as the server's workers import it before taking requests)

from attunebench.identity import IdentityScanner, configured_names  # noqa: E402
from collection.chat_model import ReplyRequest  # noqa: E402
from collection.identity_guard import GuardedReply  # noqa: E402
from collection.views import _event  # noqa: E402
from devtools.fake_llm_server import CHAT_REPLY, start_subprocess  # noqa: E402

SCANNER = IdentityScanner(configured_names("bench-model", "fake", "openai/bench-model"))


def expected_reply(words: int) -> str:
    """What the fake provider streams for ``words`` words (CHAT_REPLY's words over and over)."""
    parts = CHAT_REPLY.split(" ")
    return " ".join(parts[i % len(parts)] for i in range(words)) if words else CHAT_REPLY


def one_round(request: ReplyRequest, streams: int, expected: str) -> tuple[list[float], list[int]]:
    """Every thread reads one whole reply; returns each reply's wall seconds and piece count."""
    walls: list[float] = []
    pieces: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    go = threading.Barrier(streams)

    def read() -> None:
        go.wait()
        started = time.perf_counter()
        try:
            guarded = GuardedReply(request, SCANNER)
            received = [_event({"type": kind, "text": text}) for kind, text in guarded.events()]
        except BaseException as exc:  # reported below: a failed reply voids the figures
            with lock:
                failures.append(exc)
            return
        wall = time.perf_counter() - started
        if guarded.text != expected.strip():
            failures.append(AssertionError(f"reply came back altered: {guarded.text[:200]!r}"))
        with lock:
            walls.append(wall)
            pieces.append(len(received))

    threads = [threading.Thread(target=read) for _ in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{len(failures)} of {streams} replies failed, first: {failures[0]!r}")
    return walls, pieces


def main() -> None:
    parser = argparse.ArgumentParser(description="Server CPU per streamed chat reply")
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stream-ms", type=float, default=6250.0)
    parser.add_argument("--stream-words", type=int, default=250)
    parser.add_argument("--smoke", action="store_true")
    options = parser.parse_args()
    if options.smoke:
        options.streams, options.rounds, options.stream_ms, options.stream_words = 4, 1, 1000.0, 40
    expected = expected_reply(options.stream_words)
    process, api_base = start_subprocess(
        "--stream-ms", str(options.stream_ms), "--stream-words", str(options.stream_words)
    )
    request = ReplyRequest(
        model_key="om-bench",
        litellm_model="openai/bench-model",
        api_base=api_base,
        messages=[{"role": "user", "content": "I feel anxious about my exams."}],
        category="Study",
        subtopic="Exams",
        turn_number=1,
    )
    try:
        one_round(request, options.streams, expected)  # warm-up: imports, the loop, litellm's clients
        walls: list[float] = []
        pieces: list[int] = []
        cpu_started = time.process_time()
        for _ in range(options.rounds):
            round_walls, round_pieces = one_round(request, options.streams, expected)
            walls += round_walls
            pieces += round_pieces
        cpu = time.process_time() - cpu_started
    finally:
        process.kill()
        process.wait()
    replies = len(walls)
    words = len(expected.split(" "))
    overhead = sorted(1000 * w - options.stream_ms for w in walls)
    p50 = statistics.median(overhead)
    p95 = overhead[min(len(overhead) - 1, int(0.95 * len(overhead)))]
    load = os.getloadavg()
    print(
        f"{replies} replies ({options.streams} at once, {options.rounds} rounds), {words} words each over "
        f"{options.stream_ms:.0f} ms; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"  CPU per reply (chat loop + reading threads): {1000 * cpu / replies:.2f} ms")
    print(f"  CPU per chunk the provider sent: {1000 * cpu / replies / words:.3f} ms")
    print(f"  events per reply: mean {statistics.mean(pieces):.1f} (the provider sent {words} chunks)")
    print(f"  wall time beyond the provider's: p50 {p50:.0f} ms, p95 {p95:.0f} ms")
    print(
        "reply_stream_cpu: "
        f"cpu_ms_per_reply={1000 * cpu / replies:.3f} cpu_ms_per_chunk={1000 * cpu / replies / words:.4f} "
        f"pieces_per_reply={statistics.mean(pieces):.2f} "
        f"overhead_p50_ms={p50:.1f} overhead_p95_ms={p95:.1f} streams={options.streams} load1={load[0]:.2f}"
    )


if __name__ == "__main__":
    main()
