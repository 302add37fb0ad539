"""Replay throughput through Celery: 2 worker processes on Postgres + Redis, one shared provider cap.

Setup: a database of its own (``--database``, a fresh copy of the migrated template),
Redis (``--redis``; its queues and the ``attune:*`` keys are cleared), the
fake server in a subprocess (200 ms latency), 40 synthetic conversations of
8 turns imported, the fake model registered with ``max_concurrency`` = the cap
(shared by both workers through Redis). Each worker is one process running
conversations on threads (``--pool=threads``) over its one event loop, as
``attune worker --pool threads`` would.

The run starts once both workers answer a ping, as a study's long-lived workers
would be up already: neither figure below includes their boot, and neither worker
takes the first tasks alone while the other still imports litellm.

Reported: calls at the server, replay time from the provider's side (first
request -> last answer), bound = max(longest chain x latency, calls x
latency / cap), efficiency = bound / replay, peak in flight at the server
(must never exceed the cap), the run's own counts next to the server's, and
the workers' CPU per call (all they did during the run, scoring included:
it is what a worker can serve per core).

Usage: python bench/replay_distributed.py [--cap 32 --conversations 40 --turns 8 --latency-ms 200]
The last line is machine-readable. ``bench/replay_faults.py`` reuses this harness.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_db import fresh_database  # noqa: E402

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/attune_replay_bench"
DEFAULT_REDIS = "redis://127.0.0.1:6379/2"


def courier_listening(worker_pid: int) -> bool:
    """Whether the worker has a call courier child (scoring/call_courier.py) accepting connections."""
    import socket

    children = [
        int(child)
        for task in Path(f"/proc/{worker_pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]
    for child in children:
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        except FileNotFoundError:
            continue
        if "scoring.call_courier" in argv and "--socket" in argv:
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(argv[argv.index("--socket") + 1])
                except OSError:
                    return False
                return True
    return False


@dataclass
class Harness:
    database: str
    redis: str
    workers: int = 2
    threads: int = 32
    lease_seconds: int = 15
    data_dir: Path = ROOT / "data" / "bench"
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": self.database,
            "REDIS_URL": self.redis,
            "PYTHONPATH": str(ROOT),
            "ATTUNE_DATA_DIR": str(self.data_dir),
            "ATTUNE_REPLAY_LEASE_SECONDS": str(self.lease_seconds),
            "ATTUNE_REPLAY_CONCURRENCY": "1024",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }

    def fresh_database(self) -> None:
        """A fresh, migrated bench database with Django set up on it in this process, and Redis emptied."""
        fresh_database(self.database, self.env())
        import redis

        client = redis.Redis.from_url(self.redis)
        client.flushdb()

    def start_workers(self) -> None:
        for index in range(self.workers):
            self.processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "devtools.celery_worker",
                        f"--hostname=bench{index}@%h",
                        "--pool=threads",
                        f"--concurrency={self.threads}",
                        "--loglevel=WARNING",
                    ],
                    cwd=ROOT,
                    env=self.env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

    def wait_ready(self, timeout: float = 120) -> None:
        """Wait until every worker answers a ping: a study's workers are up before its runs start, so
        neither the start-up figure nor the CPU per call should include their boot (litellm's import)."""
        from attune_site.celery import app

        end = time.monotonic() + timeout
        while len(app.control.ping(timeout=0.5)) < len(self.processes):
            if time.monotonic() > end:
                raise SystemExit(f"the {len(self.processes)} workers did not answer a ping within {timeout:.0f} s")
        # Each worker starts its call courier at start-up (it imports litellm too): a study's are up as well.
        while os.environ.get("ATTUNE_CALL_COURIER", "1") != "0" and not all(
            courier_listening(process.pid) for process in self.processes
        ):
            if time.monotonic() > end:
                raise SystemExit(f"the workers' call couriers did not listen within {timeout:.0f} s")
            time.sleep(0.1)

    def cpu_s(self) -> float:
        """CPU seconds the worker processes have used so far (Linux /proc)."""
        from proc_cpu import tree_cpu_s

        return sum(tree_cpu_s(process.pid) for process in self.processes)

    def kill(self, index: int) -> None:
        process = self.processes[index]
        process.send_signal(signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
        self.processes.clear()


def import_conversations(n: int, turns: int) -> list[Any]:
    from attunebench.synth import synth_conversations
    from datasets.exchange import import_documents

    docs = synth_conversations(n, seed=2024, min_turns=turns, max_turns=turns)
    result = import_documents([(d.conversationId, d) for d in docs])
    assert result.ok, result.problems[:3]
    return docs


def register_fake(api_base: str, cap: int) -> None:
    from scoring.models import EvaluatedModel

    EvaluatedModel.objects.update_or_create(
        name="fake-em",
        defaults={
            "litellm_model": "openai/fake-em",
            "api_base": api_base,
            "params": {"temperature": 0},
            "input_cost_per_million": 0.15,
            "output_cost_per_million": 0.60,
            "max_concurrency": cap,
        },
    )


def run_once(
    harness: Harness, docs: list[Any], on_progress: Callable[[int, int], None] | None = None, deadline: float = 900
) -> dict[str, Any]:
    """Create, start and wait for one run of every conversation; returns the run's figures."""
    from scoring import replay_service, run_control
    from scoring.models import ConversationScore, EvaluationRun

    run = replay_service.do_create_run("fake-em", "default", conversation_ids=[d.conversationId for d in docs])
    started = time.time()
    run_control.start_run(run.pk)
    end = time.monotonic() + deadline
    while True:
        run.refresh_from_db()
        if run.status in ("done", "failed", "cancelled"):
            break
        if on_progress is not None:
            on_progress(run.conversations_done, run.conversations_total)
        if time.monotonic() > end:
            raise SystemExit(f"run {run.pk} did not finish within {deadline} s: {replay_service.run_progress(run.pk)}")
        time.sleep(0.2)
    scores = dict(
        ConversationScore.objects.filter(run=run).values_list("conversation__conversation_id", "composite_score")
    )
    return {
        "run": run.pk,
        "status": run.status,
        "started": started,
        "calls_made": run.calls_made,
        "calls_recovered": run.calls_recovered,
        "calls_cached": run.calls_cached,
        "cost_usd": run.cost_usd,
        "done": run.conversations_done,
        "scores": scores,
        "composite": EvaluationRun.objects.get(pk=run.pk).score.composite_score,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Replay through 2 Celery workers on Postgres + Redis")
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--data-dir", type=Path, default=Harness.data_dir, help="the workers' data directory")
    parser.add_argument("--cap", type=int, default=32, help="the provider's max_concurrency, shared by the workers")
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--smoke", action="store_true", help="9 conversations x 2 turns at 50 ms, cap 8: the path, not the timing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.conversations, options.turns, options.latency_ms, options.cap = 9, 2, 50.0, 8
    latency = options.latency_ms / 1000

    harness = Harness(options.database, options.redis, data_dir=options.data_dir)
    harness.fresh_database()
    from attunebench.replay.protocol import critical_path_calls
    from devtools.fake_llm_server import http_json, root_url, start_subprocess

    docs = import_conversations(options.conversations, options.turns)
    chain = max(critical_path_calls(d) for d in docs)
    server, api_base = start_subprocess("--latency-ms", str(options.latency_ms))
    try:
        register_fake(api_base, options.cap)
        harness.start_workers()
        harness.wait_ready()
        http_json(f"{root_url(api_base)}/stats/reset", {})
        cpu_before = harness.cpu_s()
        result = run_once(harness, docs)
        worker_cpu = harness.cpu_s() - cpu_before
        stats = http_json(f"{root_url(api_base)}/stats")
    finally:
        harness.stop()
        server.kill()
        server.wait()
    calls = stats["requests"]
    replay = stats["last_answer_at"] - stats["first_request_at"]
    bound = max(chain * latency, calls * latency / options.cap)
    load = os.getloadavg()
    print(
        f"Celery: {harness.workers} worker processes x {harness.threads} threads, Postgres + Redis; "
        f"{options.conversations} conversations x {options.turns} turns, latency {options.latency_ms:.0f} ms, "
        f"shared cap {options.cap}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print(
        f"run {result['run']} {result['status']}: {result['done']} conversations; server saw {calls} calls, "
        f"the run counted {result['calls_made']} (cost ${result['cost_usd']:.4f})"
    )
    print(
        f"start-up (run started -> first request) {stats['first_request_at'] - result['started']:.2f} s; "
        f"replay {replay:.2f} s; bound {bound:.2f} s; efficiency {bound / replay:.3f}; "
        f"peak in flight {stats['peak_in_flight']} (cap {options.cap})"
    )
    print(
        f"worker CPU {worker_cpu:.2f} s over the run (scoring and the sweeper included): "
        f"{worker_cpu / calls * 1000:.1f} ms per call"
    )
    assert stats["peak_in_flight"] <= options.cap, "the shared cap was exceeded"
    print(
        "replay_distributed: "
        f"efficiency={bound / replay:.3f} replay_s={replay:.3f} bound_s={bound:.3f} calls={calls} "
        f"run_calls={result['calls_made']} peak={stats['peak_in_flight']} cap={options.cap} "
        f"worker_cpu_ms_per_call={worker_cpu / calls * 1000:.2f} load1={load[0]:.2f}"
    )


if __name__ == "__main__":
    main()
