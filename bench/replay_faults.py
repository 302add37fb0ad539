"""Replay under provider faults and a killed worker, through Celery on Postgres + Redis.

Three runs of the same conversations on the harness of ``bench/replay_distributed.py``
(2 worker processes, shared cap), each from an empty call cache and fresh workers:

A. fault-free, uninterrupted: the reference wall time and scores;
B. faults: 10% HTTP 429 (with Retry-After), 10% HTTP 500, 2% hung requests
   (the client gives up after the model's ``timeout``), 5% malformed JSON.
   Coverage (turn and post) must be 100% and the replay within 2x of A;
C. fault-free, with ``kill -9`` of one worker once a third of the conversations
   are done (the worker holding the most conversations then, so the kill always
   interrupts replays): scores must equal A's. The run's count of requests is printed beside
   the server's and should equal it: for the killed worker's attempts the count kept is
   the one its courier made as it sent them (``SentCounts``), not the worker's own, which
   also holds requests counted just before the kill and never handed over. The server
   counts a request as answered when it writes the answer; ``abandoned`` are
   requests whose client closed the connection first (each timed-out request
   of run B; a killed worker's, when the server sees its sockets close before
   answering). ``answered_twice`` are calls answered twice, which should be 0
   (README, "Crash-safe runs", says when it is not): the workers make their calls through their call couriers
   (``scoring/call_courier.py``), which outlive them, so the killed worker's
   calls in flight are finished and journaled, and the attempt that takes over
   reads them from the journal. (Without couriers, ``ATTUNE_CALL_COURIER=0``,
   they were 1-10 a run, of the order of the calls in flight at the kill: the
   answers that reached the killed worker but were not yet cached, and those
   the server finished before it saw the closed connection.)

The fault-free and faulty runs differ by more than the faults' delays: the hung
requests alone hold a slot for the client's timeout (3 s each, about 90
slot-seconds), so at the same efficiency the faulty replay's slot time is about
1.7x the clean one's before any conversation waits for a retry (printed as the
work ratio). And a conversation's draft and analysis calls form one chain, turn
after turn: the conversation whose chain drew two or three hung requests ends
seconds after the others, with the slots nearly idle (sampled at the fake
server: about 28 calls in flight until the last 4-5 s, then 1-3).

Usage: python bench/replay_faults.py [--cap 32 --conversations 40 --turns 8 --latency-ms 200]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# isort: off
from replay_distributed import DEFAULT_DATABASE, DEFAULT_REDIS, Harness, import_conversations, register_fake, run_once
from devtools.fake_llm_server import FakeConfig  # importable once replay_distributed put the repository on the path
# isort: on

FAULTS = {
    # rng.choice over this list: 429 and 500 five parts each, hung one part, of a 22% error rate
    "error_rate": 0.22,
    "error_kinds": ["429"] * 5 + ["500"] * 5 + ["timeout"],
    "retry_after_s": 0.5,
    "timeout_hang_s": 30.0,
    # drawn only for requests that got no error: 0.05 / 0.78 of them is 5% of all
    "malformed_rate": 0.064,
    "seed": 11,
}
# Every setting the faulty run changes goes back to the server's default, the seed too: the fake model's
# answers are drawn from it, so a clean run after the faulty one must use the first run's seed.
CLEAN = {name: getattr(FakeConfig(), name) for name in [*FAULTS, "script"]}


def fresh_cache_and_workers(harness: Harness) -> None:
    """Forget every cached answer (database and Redis) and start new worker processes (empty memory)."""
    import redis

    from scoring.models import ModelCallCache

    harness.stop()
    ModelCallCache.objects.all().delete()
    client = redis.Redis.from_url(harness.redis)
    for key in client.scan_iter("attune:*"):
        client.delete(key)
    harness.start_workers()
    harness.wait_ready()


def busiest_worker(harness: Harness) -> tuple[int, int]:
    """(index, leases) of the worker process holding the most conversations now.

    One worker often takes most of a run's tasks, so killing a fixed one could
    kill an idle process and prove nothing. A lease names its holder's process.
    """
    from collections import Counter

    from scoring.models import RunConversation
    from scoring.replay_service import lease_process

    owners = RunConversation.objects.filter(status=RunConversation.Status.RUNNING).values_list("lease_owner", flat=True)
    held = Counter(lease_process(owner) for owner in owners)
    index = max(range(len(harness.processes)), key=lambda i: held[harness.processes[i].pid])
    return index, held[harness.processes[index].pid]


def coverage(run_id: int) -> tuple[float, float]:
    from scoring.models import ConversationScore

    rows = list(ConversationScore.objects.filter(run_id=run_id).values_list("coverage", "post_coverage"))
    return min(c for c, _ in rows), min(p or 0 for _, p in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description="Replay under faults and a killed worker")
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--data-dir", type=Path, default=Harness.data_dir, help="the workers' data directory")
    parser.add_argument("--cap", type=int, default=32)
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--smoke", action="store_true", help="9 conversations x 2 turns at 50 ms, cap 8: the path, not the timing"
    )
    parser.add_argument("--client-timeout", type=float, default=3.0, help="the model's timeout: a hung request's cost")
    options = parser.parse_args()
    if options.smoke:
        options.conversations, options.turns, options.latency_ms, options.cap = 9, 2, 50.0, 8

    harness = Harness(options.database, options.redis, data_dir=options.data_dir)
    harness.fresh_database()
    from devtools.fake_llm_server import http_json, root_url, start_subprocess
    from scoring.models import EvaluatedModel

    docs = import_conversations(options.conversations, options.turns)
    server, api_base = start_subprocess("--latency-ms", str(options.latency_ms))
    control = root_url(api_base)
    figures: dict[str, Any] = {}

    def measured(name: str, config: dict[str, Any], kill_at: float | None = None) -> dict[str, Any]:
        http_json(f"{control}/control", {**CLEAN, **config})
        fresh_cache_and_workers(harness)
        http_json(f"{control}/stats/reset", {})
        killed: list[int] = []
        in_flight: list[int] = []
        leases: list[int] = []

        def progress(done: int, total: int) -> None:
            if kill_at is not None and not killed and done >= kill_at * total:
                # Requests in flight now are the most the killed worker can have paid for and lost.
                in_flight.append(http_json(f"{control}/stats")["in_flight"])
                victim, held = busiest_worker(harness)
                harness.kill(victim)
                killed.append(done)
                leases.append(held)

        result = run_once(harness, docs, on_progress=progress if kill_at is not None else None)
        stats = http_json(f"{control}/stats")
        digests = http_json(f"{control}/stats/digests")
        result.update(
            server_requests=stats["requests"],
            replay_s=stats["last_answer_at"] - stats["first_request_at"],
            peak=stats["peak_in_flight"],
            errors=stats["errors"],
            malformed=stats["malformed"],
            answered_twice=sum(count - 1 for count in digests.values() if count > 1),
            abandoned=stats["abandoned"],
            killed_at=killed[0] if killed else None,
            in_flight_at_kill=in_flight[0] if in_flight else None,
            leases_at_kill=leases[0] if leases else None,
        )
        figures[name] = result
        return result

    try:
        register_fake(api_base, options.cap)
        EvaluatedModel.objects.filter(name="fake-em").update(
            params={"temperature": 0, "timeout": options.client_timeout}
        )
        clean = measured("clean", {})
        faulty = measured("faults", FAULTS)
        killed = measured("kill", {}, kill_at=1 / 3)
    finally:
        harness.stop()
        server.kill()
        server.wait()

    turn_cov, post_cov = coverage(faulty["run"])
    ratio = faulty["replay_s"] / clean["replay_s"]
    # The floor under that ratio: how long the faulty run's requests held a slot against the clean run's
    # (a request the client gave up on held it for the whole timeout; every other one about the latency).
    latency_s = options.latency_ms / 1000
    held = (faulty["server_requests"] - faulty["abandoned"]) * latency_s + faulty["abandoned"] * options.client_timeout
    work_ratio = held / (clean["server_requests"] * latency_s)
    same_scores = killed["scores"] == clean["scores"] and killed["composite"] == clean["composite"]
    load = os.getloadavg()
    print(
        f"{options.conversations} conversations x {options.turns} turns, latency {options.latency_ms:.0f} ms, "
        f"2 workers, shared cap {options.cap}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    for name, r in figures.items():
        print(
            f"  {name}: run {r['run']} {r['status']}, replay {r['replay_s']:.2f} s, server saw {r['server_requests']} "
            f"requests (errors {r['errors']}, malformed {r['malformed']}), run counted {r['calls_made']} "
            f"(recovered {r['calls_recovered']}), answered twice {r['answered_twice']}, left unanswered by "
            f"their client {r['abandoned']}, peak {r['peak']}"
            + (
                f", worker killed at {r['killed_at']} conversations done, holding {r['leases_at_kill']} of them, with "
                f"{r['in_flight_at_kill']} requests in flight at the server (both workers)"
                if r["killed_at"] is not None
                else ""
            )
        )
    print(
        f"faults: turn coverage {turn_cov:.3f}, post coverage {post_cov:.3f}, replay {ratio:.2f}x the fault-free run "
        f"(its requests held slots {work_ratio:.2f}x as long)"
    )
    print(f"kill -9: scores identical to the uninterrupted run: {same_scores}")
    print(
        "replay_faults: "
        f"coverage={turn_cov:.3f} post_coverage={post_cov:.3f} fault_wall_ratio={ratio:.2f} "
        f"fault_work_ratio={work_ratio:.2f} "
        f"kill_same_scores={int(same_scores)} kill_answered_twice={killed['answered_twice']} "
        f"kill_in_flight={killed['in_flight_at_kill']} kill_leases={killed['leases_at_kill']} "
        f"kill_recovered={killed['calls_recovered']} kill_abandoned={killed['abandoned']} "
        f"kill_run_calls={killed['calls_made']} kill_server_requests={killed['server_requests']} "
        f"clean_replay_s={clean['replay_s']:.3f} fault_replay_s={faulty['replay_s']:.3f} load1={load[0]:.2f}"
    )


if __name__ == "__main__":
    main()
