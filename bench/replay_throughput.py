"""Replay throughput benchmark (issue 4 item 9).

Setup: the fake OpenAI-compatible server in a subprocess (so its CPU is not
counted) with 200 ms latency; 40 synthetic conversations of 8 turns; judge
on; global concurrency 32; every call goes through litellm exactly as in
production (EM and judge are ``openai/...`` models with ``api_base``).

Reported:
- calls      requests the server answered during the timed run
- wall_s     wall time of the timed run
- bound_s    critical-path lower bound: max(longest chain × latency,
             calls × latency / concurrency); a conversation's chain is
             draft + analysis per turn, then post (protocol.critical_path_calls)
- efficiency bound_s / wall_s (target ≥ 0.8)
- speedup    sequential time / wall_s; the sequential time is the measured
             per-call time of a one-call-at-a-time replay of one conversation,
             times ``calls`` (a full sequential run would take ~6 minutes)
- cpu_ms_per_call  this process's CPU time during the timed run / calls
             (target ≤ 10 ms; the server runs in another process)

The timed run is repeated (``--repeat``, default 3; a fresh cache each time,
so every run makes the same calls) and wall time and CPU are the medians:
on a shared 2-vCPU machine one run can be 10-20% off. Every run is printed.
Replays run on the per-process event loop (``aio.run_sync``), as in the CLI
and the Celery tasks.

Usage: python bench/replay_throughput.py [--conversations 40 --turns 8 --latency-ms 200 --concurrency 32 --repeat 3]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from attunebench.replay.aio import run_sync
from attunebench.replay.cache import MemoryCache
from attunebench.replay.llm import EMSpec, LiteLLMBackend, _litellm
from attunebench.replay.protocol import ReplayConfig, Replayer, critical_path_calls
from attunebench.replay.scheduler import Scheduler
from attunebench.synth import synth_conversations
from devtools.fake_llm_server import http_json, root_url, start_subprocess


def _specs(api_base: str, concurrency: int) -> tuple[EMSpec, EMSpec]:
    # Prices are given so that cost accounting runs as it would for a priced model.
    common = {
        "api_base": api_base,
        "max_in_flight": concurrency,
        "input_cost_per_million": 0.15,
        "output_cost_per_million": 0.60,
    }
    em = EMSpec(
        name="fake/em",
        litellm_model="openai/fake-em",
        params={"temperature": 0, "seed": 7, "max_tokens": 800},
        **common,
    )
    judge = EMSpec(name="fake/judge", litellm_model="openai/fake-judge", params={"temperature": 0}, **common)
    return em, judge


async def _replay(conversations, em, judge, concurrency: int) -> tuple[Replayer, float, float]:
    backend = LiteLLMBackend()
    replayer = Replayer(
        em,
        backend,
        ReplayConfig(judge=judge),
        judge_backend=backend,
        scheduler=Scheduler(max_concurrency=concurrency),
        cache=MemoryCache(),
    )
    cpu, wall = time.process_time(), time.perf_counter()
    await replayer.replay_many(conversations)
    return replayer, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="Replay throughput against the fake LLM server")
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the medians are reported")
    parser.add_argument("--skip-sequential", action="store_true", help="assume sequential = calls × latency")
    options = parser.parse_args()
    latency = options.latency_ms / 1000

    process, api_base = start_subprocess("--latency-ms", str(options.latency_ms))
    control = root_url(api_base)
    try:
        conversations = synth_conversations(
            options.conversations, seed=2024, min_turns=options.turns, max_turns=options.turns
        )
        em, judge = _specs(api_base, options.concurrency)
        _litellm()  # the import takes seconds; it is start-up, not per-call work

        # Warm-up: litellm builds its HTTP client and caches on the first calls.
        warm = synth_conversations(1, seed=99, min_turns=1, max_turns=1)
        run_sync(_replay(warm, em, judge, options.concurrency))

        sequential_per_call = latency
        if not options.skip_sequential:
            http_json(f"{control}/stats/reset", {})
            _, seq_wall, _ = run_sync(_replay(conversations[:1], em, judge, 1))
            seq_calls = http_json(f"{control}/stats")["requests"]
            sequential_per_call = seq_wall / max(1, seq_calls)

        runs: list[tuple[float, float]] = []  # (wall s, CPU s) per timed run
        for _ in range(max(1, options.repeat)):
            http_json(f"{control}/stats/reset", {})
            replayer, wall, cpu = run_sync(_replay(conversations, em, judge, options.concurrency))
            stats = http_json(f"{control}/stats")
            runs.append((wall, cpu))
    finally:
        process.kill()
        process.wait()

    calls = stats["requests"]  # every run makes the same calls: the cache is fresh each time
    chain = max(critical_path_calls(c) for c in conversations)
    bound = max(chain * latency, calls * latency / options.concurrency)
    wall = statistics.median(w for w, _ in runs)
    cpu_ms = 1000 * statistics.median(c for _, c in runs) / max(1, calls)
    efficiency = bound / wall
    speedup = sequential_per_call * calls / wall
    print(
        f"conversations: {len(conversations)} x {options.turns} turns, judge on, "
        f"concurrency {options.concurrency}, latency {options.latency_ms:.0f} ms"
    )
    print(
        f"calls by type: {stats['by_call_type']}; engine counted {replayer.totals.calls_made} sent, "
        f"{replayer.totals.calls_failed} failed, peak in flight {replayer.scheduler.peak_in_flight}"
    )
    print(f"total calls: {calls}")
    print(
        "timed runs: "
        + "; ".join(
            f"{w:.2f} s wall, efficiency {bound / w:.3f}, {1000 * c / max(1, calls):.2f} ms CPU/call" for w, c in runs
        )
    )
    print(f"wall time: {wall:.2f} s (median of {len(runs)})")
    print(
        f"critical-path bound: {bound:.2f} s (chain {chain} calls x {latency:.3f} s = {chain * latency:.2f} s; "
        f"{calls} calls x {latency:.3f} s / {options.concurrency} = {calls * latency / options.concurrency:.2f} s)"
    )
    print(f"efficiency: {efficiency:.3f} (target >= 0.8)")
    print(
        f"sequential estimate: {sequential_per_call * 1000:.1f} ms/call measured one at a time -> "
        f"{sequential_per_call * calls:.1f} s; speed-up {speedup:.1f}x"
    )
    print(
        f"CPU per call (client process only, median): {cpu_ms:.2f} ms (target <= 10 ms); "
        f"cost per run ${replayer.totals.cost_spent:.4f}"
    )
    print(
        f"calls={calls} wall_s={wall:.3f} bound_s={bound:.3f} efficiency={efficiency:.3f} "
        f"speedup={speedup:.2f} cpu_ms_per_call={cpu_ms:.3f}"
    )


if __name__ == "__main__":
    main()
