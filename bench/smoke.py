"""Runs every benchmark's ``--smoke`` mode and fails when one breaks: what keeps the benchmarks from rotting.

Each ``bench/*.py`` script (but the helper modules below) runs with ``--smoke``: the real path end to end at
tiny sizes, in seconds. A benchmark fails the run when it exits non-zero, or when its last line is not its
figures line (``bench/figures.py``). Timings are printed, never judged. A benchmark that needs PostgreSQL or
Redis reads ``DATABASE_URL`` / ``REDIS_URL``; without them it is skipped here and says so.

    .venv/bin/python bench/smoke.py [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

from figures import parse_figures_line  # noqa: E402  (the script's own folder is on the path)

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
TIMEOUT_SECONDS = 600


def benchmarks() -> list[str]:
    return sorted(path.stem for path in BENCH.glob("*.py") if path.stem not in HELPERS)


def run(name: str) -> tuple[str, str]:
    """(outcome, detail): outcome is ok, skipped or FAILED."""
    missing = [variable for variable in NEEDS_SERVICES.get(name, ()) if not os.environ.get(variable)]
    if missing:
        return "skipped", f"needs {', '.join(missing)}"
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = Path(scratch) / "data"  # each benchmark starts from an empty data directory of its own
        data_dir.mkdir(mode=0o700)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ATTUNE_DATA_DIR": str(data_dir)}
        return _judge(name, env)


def _judge(name: str, env: dict[str, str]) -> tuple[str, str]:
    try:
        result = subprocess.run(
            [sys.executable, str(BENCH / f"{name}.py"), "--smoke"],
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run every benchmark's --smoke mode")
    parser.add_argument("names", nargs="*", help="only these benchmarks (default: all)")
    args = parser.parse_args(argv)
    names = args.names or benchmarks()
    unknown = sorted(set(names) - set(benchmarks()))
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)}")
    failed = 0
    for name in names:
        started = time.monotonic()
        outcome, detail = run(name)
        failed += outcome == "FAILED"
        print(f"{outcome:8s} {name:28s} {time.monotonic() - started:6.1f} s  {detail}", flush=True)
    print(
        f"{len(names) - failed} of {len(names)} benchmarks passed their smoke run"
        + (f", {failed} FAILED" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
