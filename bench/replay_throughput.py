"""Replay throughput through the ``attune eval`` command line.

Setup: the fake OpenAI-compatible server in a subprocess with 200 ms latency;
40 synthetic conversations of 8 turns written as canonical files; then, for
each concurrency (default 32 and 64), a fresh ``attune eval`` process exactly
as a researcher runs it:

    attune eval --model openai/fake-em --api-base URL --conversations DIR \\
                --concurrency N --no-cache --out OUT

(embedded settings: no database server, no Redis; ``--no-cache`` so every
run makes every call). Times are taken from the provider's side, so the
replay is measured apart from the process's start-up and its scoring:

- startup_s  process start -> first request at the server (imports, reading files)
- replay_s   first request -> last answer (the replay itself)
- tail_s     last answer -> process exit (writing run files, recording the run, leaderboard; each
             conversation is scored and rendered as it finishes, during the replay)
- bound_s    max(longest chain x latency, calls x latency / concurrency); a
             conversation's chain is draft + analysis per turn, then post
- efficiency bound_s / replay_s
- cli_efficiency  bound_s / (process start -> exit): the whole command, start-up and tail included
             (targets at 80 conversations x 8 turns, 500 ms: >= 0.9 at 32, >= 0.85 at 64)
- peak       most requests in flight at the server at once (never above N)
- cpu_ms_per_call  the eval process's CPU time (user + system, start-up included) / calls
- replay_cpu_ms_per_call  CPU of the eval processes and the fake provider during the replay only
                 (first request -> last answer, sampled from /proc) / calls
- core_use       that CPU / (replay_s x cores): how busy the cores were during the replay
- reference_loop_s  CPU seconds of a fixed mix of Python work (proc_cpu.reference_loop_s), timed
                 after the runs: the machine's speed, which drifts on shared machines, to compare
                 figures taken on different days
- cpu_ceiling    bound_s / max(bound_s, that CPU / cores): the best efficiency the machine's
                 cores allow at that CPU per call. Efficiency near the ceiling means the replay is
                 limited by the cores, not by how it schedules calls; the targets then need faster
                 cores (or less CPU per call), not another scheduler.

``--spread-ms S`` draws each answer's latency uniformly from latency +- S/2 (the
same mean, so the same bound). The targets are for the constant latency (S = 0),
the harder case: answers sent together come back together, and a process
handles a whole wave of them one after another before it sends their next
calls, so unless the sends are spread a call waits on average about
N x (CPU per call) / (2 x cores) longer than the provider takes. The scheduler
paces its sends for that reason (``SendPacer``); a real provider's varying
latency breaks the waves up too, and the spread shows that case.

The machine is shared: the load average is printed with the figures.
``--repeat N`` runs every concurrency N times, interleaved (32, 64, 32, 64, ...),
prints each run, and reports the median of each figure with the lowest and
highest efficiency: the shared machine's speed drifts by half within an hour,
so a single run can land on a slow or a fast minute. The machine speed is then
taken after each round.

``--via-litellm`` sends the calls through litellm instead of the direct route (our own HTTP connections)
(the default route of an ``openai/...`` model at an api_base), to compare.

Usage: python bench/replay_throughput.py [--conversations 40 --turns 8 --latency-ms 200 --spread-ms 0
                                          --concurrency 32,64 --repeat 1 --via-litellm]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proc_cpu import CpuTrace, reference_loop_s, tree_cpu_s

from attunebench.canonical import dumps_canonical
from attunebench.machine import usable_cores
from attunebench.replay.protocol import critical_path_calls
from attunebench.synth import document_filename, synth_conversations
from devtools.fake_llm_server import http_json, root_url, start_subprocess

ROOT = Path(__file__).resolve().parent.parent


def run_eval(
    api_base: str,
    folder: Path,
    out: Path,
    concurrency: int,
    data_dir: Path,
    server_pid: int,
    processes: int | None = None,
    via_litellm: bool = False,
) -> tuple[float, float, str, CpuTrace]:
    """One ``attune eval`` process; returns (its start time, its exit time, its stdout, the CPU trace
    of it and the server)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"PYTHONPATH": str(ROOT), "ATTUNE_DATA_DIR": str(data_dir), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    command = [
        sys.executable,
        "-m",
        "attune_site.cli",
        "eval",
        "--model",
        "openai/fake-em",
        "--api-base",
        api_base,
        "--conversations",
        str(folder),
        "--concurrency",
        str(concurrency),
        "--no-cache",
        "--temperature",
        "0",
        "--out",
        str(out),
    ]
    if processes is not None:
        command += ["--processes", str(processes)]
    if via_litellm:
        command.append("--via-litellm")
    started = time.time()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with CpuTrace([process.pid, server_pid]) as trace:
        stdout, stderr = process.communicate()
    ended = time.time()
    if process.returncode:
        raise SystemExit(f"attune eval failed ({process.returncode}):\n{stderr[-3000:]}")
    return started, ended, stdout, trace


def prepare_data_dir(data_dir: Path) -> None:
    """Set up the runs' data directory before timing them: its database is created on first use (seconds, once
    per data directory), which is no part of a replay."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"PYTHONPATH": str(ROOT), "ATTUNE_DATA_DIR": str(data_dir)})
    done = subprocess.run(
        [sys.executable, "-m", "attune_site.cli", "migrate", "--noinput"], cwd=ROOT, env=env, capture_output=True
    )
    if done.returncode:
        raise SystemExit(f"attune migrate failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Replay throughput of `attune eval` against the fake LLM server")
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--spread-ms", type=float, default=0.0, help="latency drawn from latency +- spread/2")
    parser.add_argument("--concurrency", default="32,64", help="comma-separated values, one eval run each")
    parser.add_argument("--processes", type=int, help="attune eval --processes (default: its own, the usable cores)")
    parser.add_argument(
        "--via-litellm",
        action="store_true",
        help="attune eval --via-litellm: calls through litellm, not the direct route",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every concurrency, interleaved; figures are their medians"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="4 conversations x 2 turns at 20 ms, concurrency 8: the path, not the timing",
    )
    options = parser.parse_args()
    if options.smoke:
        options.conversations, options.turns, options.latency_ms, options.concurrency = 4, 2, 20.0, "8"
        options.spread_ms, options.repeat = 0.0, 1
    if not 0 <= options.spread_ms <= 2 * options.latency_ms:
        parser.error("--spread-ms must be between 0 and twice --latency-ms (a latency is never negative)")
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    latency = options.latency_ms / 1000
    levels = [int(v) for v in options.concurrency.split(",") if v.strip()]

    conversations = synth_conversations(
        options.conversations, seed=2024, min_turns=options.turns, max_turns=options.turns
    )
    chain = max(critical_path_calls(c) for c in conversations)
    lowest = options.latency_ms - options.spread_ms / 2
    process, api_base = start_subprocess("--latency-ms", str(lowest), "--jitter-ms", str(options.spread_ms))
    control = root_url(api_base)
    results: list[dict[str, Any]] = []
    speeds: list[float] = []  # reference_loop_s after each round
    try:
        with tempfile.TemporaryDirectory(prefix="attune-bench-") as tmp:
            folder = Path(tmp) / "conversations"
            folder.mkdir()
            for document in conversations:
                (folder / document_filename(document)).write_text(dumps_canonical(document), encoding="utf-8")
            prepare_data_dir(Path(tmp) / "data")
            for round_number in range(1, options.repeat + 1):
                for level in levels:
                    http_json(f"{control}/stats/reset", {})
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    server_before = tree_cpu_s(process.pid)
                    out, data = Path(tmp) / f"out-{level}-{round_number}", Path(tmp) / "data"
                    started, ended, stdout, trace = run_eval(
                        api_base, folder, out, level, data, process.pid, options.processes, options.via_litellm
                    )
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    server_cpu = tree_cpu_s(process.pid) - server_before
                    stats = http_json(f"{control}/stats")
                    calls = stats["requests"]
                    replay = stats["last_answer_at"] - stats["first_request_at"]
                    bound = max(chain * latency, calls * latency / level)
                    replay_cpu = trace.between(stats["first_request_at"], stats["last_answer_at"])
                    cores = usable_cores()
                    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                    limit_line = next((line for line in stdout.splitlines() if line.startswith("Calls to ")), "")
                    results.append(
                        {
                            "round": round_number,
                            "concurrency": level,
                            "calls": calls,
                            "startup_s": stats["first_request_at"] - started,
                            "replay_s": replay,
                            "tail_s": ended - stats["last_answer_at"],
                            "bound_s": bound,
                            "efficiency": bound / replay,
                            "cli_efficiency": bound / (ended - started),
                            "exit_s": ended - started,
                            "peak": stats["peak_in_flight"],
                            "cpu_ms_per_call": 1000 * cpu / max(1, calls),
                            "server_cpu_ms_per_call": 1000 * server_cpu / max(1, calls),
                            "replay_cpu_ms_per_call": 1000 * replay_cpu / max(1, calls),
                            "core_use": replay_cpu / (replay * cores) if replay > 0 else 0.0,
                            "cpu_ceiling": bound / max(bound, replay_cpu / cores) if bound > 0 else 1.0,
                            "limit_line": limit_line,
                        }
                    )
                speeds.append(reference_loop_s())  # the machine speed over this round
    finally:
        process.kill()
        process.wait()

    load = os.getloadavg()
    print(
        f"attune eval, {options.conversations} conversations x {options.turns} turns, no judge, "
        f"latency {options.latency_ms:.0f} ms (+- {options.spread_ms / 2:.0f}), longest chain {chain} calls, "
        f"--processes {options.processes or 'default (the usable cores)'}, "
        f"calls through {'litellm' if options.via_litellm else 'the direct route'}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
        "machine speed: a fixed mix of Python work (bench/proc_cpu.py) took "
        + ", ".join(f"{s:.2f}" for s in speeds)
        + (" s of CPU" if len(speeds) == 1 else " s of CPU after each round")
    )
    for r in results:
        round_label = f"round {r['round']}, " if options.repeat > 1 else ""
        print(f"  {round_label}--concurrency {r['concurrency']}: {r['limit_line']}")
        print(
            f"    {r['calls']} calls; start-up {r['startup_s']:.2f} s, replay {r['replay_s']:.2f} s, "
            f"tail (files + scoring) {r['tail_s']:.2f} s; bound {r['bound_s']:.2f} s; "
            f"efficiency {r['efficiency']:.3f} (the whole command: {r['exit_s']:.2f} s, "
            f"{r['cli_efficiency']:.3f}); peak in flight {r['peak']} (cap {r['concurrency']}); "
            f"CPU {r['cpu_ms_per_call']:.2f} ms/call (fake provider {r['server_cpu_ms_per_call']:.2f} ms/call "
            "on the same cores)"
        )
        print(
            f"    during the replay: {r['replay_cpu_ms_per_call']:.2f} ms CPU/call (eval + fake provider), "
            f"cores {100 * r['core_use']:.0f}% busy; the cores allow at most efficiency {r['cpu_ceiling']:.3f} "
            f"at that CPU per call, so this run reached {r['efficiency'] / r['cpu_ceiling']:.2f} of it"
        )
        assert r["peak"] <= r["concurrency"], "more calls in flight than --concurrency"
    summaries = [summarise([r for r in results if r["concurrency"] == level]) for level in levels]
    if options.repeat > 1:
        for m in summaries:
            print(
                f"  --concurrency {m['concurrency']} over {options.repeat} runs: efficiency median "
                f"{m['efficiency']:.3f} (lowest {m['efficiency_min']:.3f}, highest {m['efficiency_max']:.3f}); "
                f"the whole command: median {m['cli_efficiency']:.3f} (lowest {m['cli_efficiency_min']:.3f}); "
                f"CPU during the replay median {m['replay_cpu_ms_per_call']:.2f} ms/call; "
                f"the cores allowed median {m['cpu_ceiling']:.3f}"
            )
    print(
        "replay_throughput: "
        + " ".join(
            f"c{m['concurrency']}_efficiency={m['efficiency']:.3f} c{m['concurrency']}_replay_s={m['replay_s']:.3f} "
            f"c{m['concurrency']}_startup_s={m['startup_s']:.3f} c{m['concurrency']}_peak={m['peak']} "
            f"c{m['concurrency']}_cpu_ms_per_call={m['cpu_ms_per_call']:.3f} "
            f"c{m['concurrency']}_replay_cpu_ms_per_call={m['replay_cpu_ms_per_call']:.3f} "
            f"c{m['concurrency']}_cpu_ceiling={m['cpu_ceiling']:.3f} "
            f"c{m['concurrency']}_efficiency_min={m['efficiency_min']:.3f} "
            f"c{m['concurrency']}_efficiency_max={m['efficiency_max']:.3f} "
            f"c{m['concurrency']}_cli_efficiency={m['cli_efficiency']:.3f} "
            f"c{m['concurrency']}_cli_efficiency_min={m['cli_efficiency_min']:.3f}"
            for m in summaries
        )
        + f" calls={results[0]['calls'] if results else 0} spread_ms={options.spread_ms:g} load1={load[0]:.2f}"
        + f" reference_loop_s={statistics.median(speeds):.3f} repeat={options.repeat}"
        + f" via_litellm={int(options.via_litellm)}"
    )


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One concurrency's runs as one row: the median of each figure, the most in flight of any run, and the
    lowest and highest efficiency (the machine's speed drifts between runs, so one run can mislead)."""
    row: dict[str, Any] = {"concurrency": runs[0]["concurrency"], "peak": max(r["peak"] for r in runs)}
    for name in (
        "efficiency",
        "cli_efficiency",
        "replay_s",
        "startup_s",
        "cpu_ms_per_call",
        "replay_cpu_ms_per_call",
        "cpu_ceiling",
    ):
        row[name] = statistics.median(r[name] for r in runs)
    row["cli_efficiency_min"] = min(r["cli_efficiency"] for r in runs)
    row["efficiency_min"] = min(r["efficiency"] for r in runs)
    row["efficiency_max"] = max(r["efficiency"] for r in runs)
    return row


if __name__ == "__main__":
    main()
