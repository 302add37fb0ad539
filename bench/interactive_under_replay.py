"""How long a participant's suggested rewrite waits for a worker while a large replay is queued.

Setup: a database of its own (``--database``, a fresh copy of the migrated template), Redis (``--redis``, emptied),
the fake provider in a subprocess (``--latency-ms`` per call), ``--conversations`` synthetic conversations
imported and a run of all of them started against the fake model. Then a simulated participant stores a
reply every ``--interval`` seconds through the participant actions (``devtools/participant_turns.py``):
each stored reply queues its rewrite exactly as the chat page does, and the wait is the time from the
reply's commit to the rewrite being in the database. Only rewrites queued while replay tasks were still
waiting in the queue are counted.

Two layouts, the same code:

- ``reserved`` (today's default): ``attune worker`` as compose runs it, the bulk worker (replays, exports,
  scoring) plus its own worker for the ``interactive`` queue (attune_site/queues.py).
- ``shared`` (the layout before the queues were split): one worker pool, every task on one FIFO queue
  (``celery``), as when rewrites, replays and exports shared the default queue.

Usage: .venv/bin/python bench/interactive_under_replay.py [--layout reserved|shared] [--conversations 200]
[--rewrites 20] [--interval 2] [--latency-ms 200] [--smoke]

``--smoke`` replays 12 short conversations and takes 3 rewrites, and exits non-zero on any error (a
rewrite not made within ``--max-wait``, a run that failed), never on a timing. The last line is
machine-readable: ``interactive_under_replay: layout=... rewrites=N p50_s=... p95_s=... max_s=...``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_db import fresh_database  # noqa: E402
from replay_distributed import import_conversations, register_fake  # noqa: E402

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/attune_interactive_bench"
DEFAULT_REDIS = "redis://127.0.0.1:6379/3"
# The routes before the queues were split: rewrites, replays and exports on the default queue.
SHARED_ROUTES = {"scoring.finalize_run": {"queue": "finalize"}, "scoring.rescore_run": {"queue": "finalize"}}


def worker_command(layout: str, concurrency: int) -> list[str]:
    command = [sys.executable, "-m", "attune_site.cli", "worker", f"--concurrency={concurrency}", "--loglevel=WARNING"]
    if layout == "shared":
        # one pool for everything; it also consumes the split queues in case a worker's own requeue uses them
        return [*command, "--queues=celery,finalize,bulk,interactive", "--interactive-concurrency=0"]
    return [*command, "--interactive-concurrency=2"]


def queued(client: Any, name: str) -> int:
    return int(client.llen(name))


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (the smallest value with at least ``share`` of the values at or below it)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * share // 1))
    return ordered[int(rank) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description="Rewrite waits while a large replay is queued")
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--data-dir", type=Path, default=ROOT / "data" / "bench-interactive")
    parser.add_argument("--layout", choices=["reserved", "shared"], default="reserved")
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--rewrites", type=int, default=20)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between the participant's replies")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=2, help="bulk worker processes (compose: 2)")
    parser.add_argument("--max-wait", type=float, default=300.0, help="a rewrite not made by then is an error")
    parser.add_argument("--smoke", action="store_true")
    options = parser.parse_args()
    if options.smoke:
        options.conversations, options.turns, options.rewrites, options.interval = 12, 2, 3, 0.5

    env = {
        **os.environ,
        "DATABASE_URL": options.database,
        "REDIS_URL": options.redis,
        "PYTHONPATH": str(ROOT),
        "ATTUNE_DATA_DIR": str(options.data_dir),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    fresh_database(options.database, env)
    import redis

    client = redis.Redis.from_url(options.redis)
    client.flushdb()

    from annotation.models import AlternateResponses
    from attune_site.celery import app
    from devtools.fake_llm_server import start_subprocess
    from devtools.participant_turns import chatting_conversation, store_reply
    from scoring import replay_service, run_control
    from scoring.models import EvaluationRun

    if options.layout == "shared":
        app.conf.task_routes = SHARED_ROUTES  # this process queues both the run and the rewrites
    bulk_queue = "celery" if options.layout == "shared" else "bulk"

    docs = import_conversations(options.conversations, options.turns)
    conversations = [chatting_conversation() for _ in range(options.rewrites)]
    server, api_base = start_subprocess("--latency-ms", str(options.latency_ms))
    worker = subprocess.Popen(
        worker_command(options.layout, options.concurrency), cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    waits: list[float] = []
    backlog: list[int] = []
    errors: list[str] = []
    try:
        register_fake(api_base, 64)
        expected = 1 if options.layout == "shared" else 2
        deadline = time.monotonic() + 180
        while len(app.control.ping(timeout=0.5)) < expected:
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the {options.layout} worker(s) did not answer a ping (exit {worker.poll()})")
        run = replay_service.do_create_run("fake-em", "default", conversation_ids=[d.conversationId for d in docs])
        run_control.start_run(run.pk)
        started = time.monotonic()
        pending: dict[int, tuple[float, int]] = {}  # turn id -> (reply committed at, replay tasks queued then)
        sent_count = 0
        while sent_count < len(conversations) or pending:
            if sent_count < len(conversations) and time.monotonic() >= started + sent_count * options.interval:
                waiting = queued(client, bulk_queue)
                text = f"I keep thinking about what happened at work, day {sent_count}."
                turn = store_reply(conversations[sent_count], text)
                pending[turn.pk] = (time.monotonic(), waiting)
                sent_count += 1
            made = AlternateResponses.objects.filter(turn_id__in=list(pending)).exclude(llm_improved="")
            for turn_pk in made.values_list("turn_id", flat=True):
                sent, waiting = pending.pop(turn_pk)
                if waiting == 0:
                    print(f"the rewrite of turn {turn_pk} was queued after the replay's: not counted", file=sys.stderr)
                    continue
                waits.append(time.monotonic() - sent)
                backlog.append(waiting)
            for turn_pk, (sent, _) in list(pending.items()):
                if time.monotonic() - sent > options.max_wait:
                    errors.append(f"the rewrite of turn {turn_pk} was not made within {options.max_wait:.0f} s")
                    del pending[turn_pk]
            time.sleep(0.01)  # the poll's pace; every figure is taken from the clock, not from this
        status = EvaluationRun.objects.get(pk=run.pk).status
        if status == "failed":
            errors.append(f"run {run.pk} failed: {replay_service.run_progress(run.pk)}")
        progress = replay_service.run_progress(run.pk)
    finally:
        worker.terminate()
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        server.kill()
        server.wait()
        client.flushdb()

    load = os.getloadavg()
    print(
        f"layout {options.layout}: {options.conversations} conversations x {options.turns} turns replayed at "
        f"{options.latency_ms:.0f} ms per call by {options.concurrency} bulk worker processes; a reply every "
        f"{options.interval:g} s; load average {load[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"replay tasks queued when each rewrite was: {backlog}; run at the end: {progress}")
    for error in errors:
        print(f"ERROR: {error}", file=sys.stderr)
    if not waits:
        print("ERROR: no rewrite was queued while the replay was", file=sys.stderr)
        return 1
    p50, p95 = statistics.median(waits), percentile(waits, 0.95)
    print(f"rewrite waits: {', '.join(f'{w:.2f}' for w in waits)} s")
    print(
        f"interactive_under_replay: reserved={int(options.layout == 'reserved')} rewrites={len(waits)} p50_s={p50:.3f} "
        f"p95_s={p95:.3f} max_s={max(waits):.3f} load1={load[0]:.2f}"
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
