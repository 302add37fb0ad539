"""Runs every benchmark's ``--smoke`` mode and fails when one breaks: what keeps the benchmarks from rotting.

Each ``bench/*.py`` script (but the helper modules below) runs with ``--smoke``: the real path end to end at
tiny sizes, in seconds. A benchmark fails the run when it exits non-zero, or when its last line is not its
figures line (``bench/figures.py``). Timings are printed, never judged. A benchmark that needs PostgreSQL or
Redis reads ``DATABASE_URL`` / ``REDIS_URL``; without them it is skipped here and says so.

The benchmarks run ``--jobs`` at a time, the longest first (default: one per usable core; most of a smoke run
waits on a fake provider, a server or a child process, but more at once on a loaded machine made benchmarks miss
their own start-up deadlines, such as two Celery workers answering a ping within 120 s). Two never share a
database, a Redis database or a data directory: each gets an empty data directory of its own, and those that
name their database and Redis database (``--database`` / ``--redis``) get their own beside DATABASE_URL's and
on REDIS_URL's server. Each one's line is printed as it ends.

    .venv/bin/python bench/smoke.py [--jobs N] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from figures import parse_figures_line  # noqa: E402  (the script's own folder is on the path)

from attunebench.machine import usable_cores  # noqa: E402  (the repository is on the path above)

HELPERS = {"smoke", "figures", "bench_db", "proc_cpu", "publish"}  # modules the benchmarks import, not benchmarks
NEEDS_SERVICES = {  # benchmark -> the variables it needs (it makes its own database on that server)
    "replay_distributed": ("DATABASE_URL", "REDIS_URL"),
    "replay_faults": ("DATABASE_URL", "REDIS_URL"),
    "interactive_under_replay": ("DATABASE_URL", "REDIS_URL"),
    "transcript_insert": ("DATABASE_URL",),
    "participant_load": ("DATABASE_URL",),
    "participant_request_cpu": ("DATABASE_URL",),
    "redis_outage": ("DATABASE_URL",),
    "study_scale": ("DATABASE_URL",),
}
# Benchmarks that take the database (``--database``) and Redis database (``--redis``) they use: each gets its own,
# so two running at once never drop each other's database or flush each other's queues. The Redis databases
# are apart from the test suite's (15 downwards, one per worker).
OWN_DATABASE = {"replay_distributed", "replay_faults", "interactive_under_replay", "transcript_insert",
                "participant_request_cpu"}  # fmt: skip
OWN_REDIS_DATABASE = {"replay_distributed": 2, "replay_faults": 4, "interactive_under_replay": 3}
# Benchmarks that take a data directory for the worker processes they start (``--data-dir``).
TAKES_DATA_DIR = {"replay_distributed", "replay_faults", "interactive_under_replay"}
# The longest smoke runs (seconds, one at a time on a loaded 2-core machine): started first, so that none of them
# starts last and runs alone at the end.
SLOW = {
    "study_scale": 490,
    "first_request": 435,
    "participant_load": 390,
    "eval_startup": 360,
    "replay_faults": 350,
    "interactive_under_replay": 220,
    "redis_outage": 190,
}
TIMEOUT_SECONDS = 600


def benchmarks() -> list[str]:
    return sorted(path.stem for path in BENCH.glob("*.py") if path.stem not in HELPERS)


def own_services(name: str, data_dir: Path) -> list[str]:
    """The arguments that give benchmark ``name`` a database, Redis database and data directory of its own."""
    args: list[str] = []
    database_url = os.environ.get("DATABASE_URL", "")
    if name in OWN_DATABASE and database_url:
        server, _, database = database_url.rpartition("/")
        args += ["--database", f"{server}/{database}_smoke_{name}"]
    redis_url = os.environ.get("REDIS_URL", "")
    if name in OWN_REDIS_DATABASE and redis_url:
        args += ["--redis", urlunsplit(urlsplit(redis_url)._replace(path=f"/{OWN_REDIS_DATABASE[name]}"))]
    if name in TAKES_DATA_DIR:
        args += ["--data-dir", str(data_dir)]
    return args


def run(name: str) -> tuple[str, str]:
    """(outcome, detail): outcome is ok, skipped or FAILED."""
    missing = [variable for variable in NEEDS_SERVICES.get(name, ()) if not os.environ.get(variable)]
    if missing:
        return "skipped", f"needs {', '.join(missing)}"
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = Path(scratch) / "data"  # each benchmark starts from an empty data directory of its own
        data_dir.mkdir(mode=0o700)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ATTUNE_DATA_DIR": str(data_dir)}
        return _judge(name, env, own_services(name, data_dir))


def _judge(name: str, env: dict[str, str], args: list[str]) -> tuple[str, str]:
    try:
        result = subprocess.run(
            [sys.executable, str(BENCH / f"{name}.py"), "--smoke", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return "FAILED", f"still running after {TIMEOUT_SECONDS} s"
    if result.returncode != 0:
        return "FAILED", f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[-1500:]}"
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    try:
        reported, figures = parse_figures_line(lines[-1] if lines else "")
    except ValueError as error:
        return "FAILED", str(error)
    if reported != name:
        return "FAILED", f"its figures line names {reported!r}, not {name!r}"
    return "ok", " ".join(f"{key}={value:g}" for key, value in figures.items())


def timed(name: str) -> tuple[str, str, float]:
    """run(name) with its wall time."""
    started = time.monotonic()
    outcome, detail = run(name)
    return outcome, detail, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmark's --smoke mode")
    parser.add_argument("names", nargs="*", help="only these benchmarks (default: all)")
    parser.add_argument(
        "--jobs", type=int, default=usable_cores(), help="benchmarks run at once (default: one per usable core)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    names = args.names or benchmarks()
    unknown = sorted(set(names) - set(benchmarks()))
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)}")
    failed = 0
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        running = {pool.submit(timed, name): name for name in sorted(names, key=lambda n: -SLOW.get(n, 0))}
        for future in as_completed(running):
            outcome, detail, seconds = future.result()
            failed += outcome == "FAILED"
            print(f"{outcome:8s} {running[future]:28s} {seconds:6.1f} s  {detail}", flush=True)
    print(f"{time.monotonic() - started:.1f} s in all, {args.jobs} at a time", flush=True)
    print(
        f"{len(names) - failed} of {len(names)} benchmarks passed their smoke run"
        + (f", {failed} FAILED" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
