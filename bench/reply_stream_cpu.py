"""Server CPU per streamed chat reply: what a participant's live reply costs the web process.

A participant's reply is streamed from the provider through litellm on the process's chat loop and handed,
piece by piece, to the server thread that writes it to the browser (``collection.chat_model.stream_reply``).
This runs that exact function in this process, as the server's threads do, against the fake
OpenAI-compatible provider in its own process (so its CPU is not counted), which streams each reply word by
word over ``--stream-ms``:

- ``--streams`` threads (default 50, as many replies at once as a busy server holds) each read one whole
  reply; a round is all of them; ``--rounds`` timed rounds follow one untimed warm-up round;
- cpu_ms_per_reply   this process's CPU (user + system, every thread: the chat loop and the readers) per reply
- pieces_per_reply   how many pieces a reader received per reply (the provider sends one per word; pieces
                     that arrive while a reader is busy reach it together)
- overhead_ms p50/p95  each reply's wall time beyond the provider's ``--stream-ms``

The machine is shared: the load average is printed with the figures.
Usage: python bench/reply_stream_cpu.py [--streams 50 --rounds 3 --stream-ms 2000]
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

from collection.chat_model import ReplyRequest, stream_reply  # noqa: E402
from devtools.fake_llm_server import CHAT_REPLY, start_subprocess  # noqa: E402


def one_round(request: ReplyRequest, streams: int) -> tuple[list[float], list[int]]:
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
            received = list(stream_reply(request))
        except BaseException as exc:  # reported below: a failed reply voids the figures
            with lock:
                failures.append(exc)
            return
        wall = time.perf_counter() - started
        if "".join(received) != CHAT_REPLY:
            failures.append(AssertionError(f"reply came back altered: {''.join(received)!r}"))
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
    parser.add_argument("--stream-ms", type=float, default=2000.0)
    options = parser.parse_args()
    process, api_base = start_subprocess("--stream-ms", str(options.stream_ms))
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
        one_round(request, options.streams)  # warm-up: imports, the loop, litellm's clients
        walls: list[float] = []
        pieces: list[int] = []
        cpu_started = time.process_time()
        for _ in range(options.rounds):
            round_walls, round_pieces = one_round(request, options.streams)
            walls += round_walls
            pieces += round_pieces
        cpu = time.process_time() - cpu_started
    finally:
        process.kill()
        process.wait()
    replies = len(walls)
    words = len(CHAT_REPLY.split(" "))
    overhead = sorted(1000 * w - options.stream_ms for w in walls)
    p50 = statistics.median(overhead)
    p95 = overhead[min(len(overhead) - 1, int(0.95 * len(overhead)))]
    load = os.getloadavg()
    print(
        f"{replies} replies ({options.streams} at once, {options.rounds} rounds), {words} words each over "
        f"{options.stream_ms:.0f} ms; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"  CPU per reply (chat loop + reading threads): {1000 * cpu / replies:.2f} ms")
    print(f"  pieces per reply: mean {statistics.mean(pieces):.1f} (the provider sent {words})")
    print(f"  wall time beyond the provider's: p50 {p50:.0f} ms, p95 {p95:.0f} ms")
    print(
        f"cpu_ms_per_reply={1000 * cpu / replies:.3f} pieces_per_reply={statistics.mean(pieces):.2f} "
        f"overhead_p50_ms={p50:.1f} overhead_p95_ms={p95:.1f} streams={options.streams} load1={load[0]:.2f}"
    )


if __name__ == "__main__":
    main()
