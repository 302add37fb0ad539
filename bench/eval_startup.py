"""Time to first request of ``attune eval`` against an OpenAI-compatible server: what a quick check waits for.

Setup: the fake OpenAI-compatible server in a subprocess (20 ms latency); a few
small synthetic conversations as canonical files; a fresh data directory. Then
``attune eval`` runs ``--repeat`` times, exactly as a researcher types it:

    attune eval --model openai/fake-em --api-base URL --conversations DIR --no-cache --out OUT

Each run's clock starts when the command is started and stops when the first
request reaches the server (the preflight's probe, the first thing the command
sends). For each run:

- first_request_s      command start -> first request at the server (wall clock)
- first_request_cpu_s  the command's CPU (user + system) in that time, from /proc: the same work on a
                       machine shared with other jobs, where the wall clock also counts their turns
- exit_s               command start -> exit (the whole quick check)

The first run is the first time this data directory sees the model. For ``fake-em`` the
direct route is decided without litellm (``attunebench.replay.llm.route_without_litellm``);
a name that rule leaves to litellm (``--model-name`` with ``gpt`` in it, say) makes that
run ask litellm once and keep the answer (``remember_routes_in``), so only that run
imports litellm. ``--via-litellm`` adds one run through litellm, the route that
needs it, for comparison. ``--root`` times another checkout's ``attune eval``
(e.g. the main branch, for a before/after).

Usage: python bench/eval_startup.py [--repeat 3 --via-litellm --root PATH --model-name NAME]
The last line is machine-readable (medians of the runs after the first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from figures import figures_line  # noqa: E402
from proc_cpu import CpuTrace  # noqa: E402

from attunebench.canonical import dumps_canonical  # noqa: E402
from attunebench.synth import document_filename, synth_conversations  # noqa: E402
from devtools.fake_llm_server import http_json, root_url, start_subprocess  # noqa: E402


def one_run(
    root: Path, api_base: str, folder: Path, out: Path, data: Path, via_litellm: bool, model: str = "fake-em"
) -> dict[str, float]:
    """One ``attune eval`` process: its time (and CPU) to the first request, and to its exit."""
    control = root_url(api_base)
    http_json(f"{control}/stats/reset", {})
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"PYTHONPATH": str(root), "ATTUNE_DATA_DIR": str(data)})
    command = [sys.executable, "-m", "attune_site.cli", "eval", "--model", f"openai/{model}", "--api-base", api_base]
    command += ["--conversations", str(folder), "--no-cache", "--concurrency", "8", "--out", str(out)]
    if via_litellm:
        command.append("--via-litellm")
    started = time.time()
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with CpuTrace([process.pid], interval_s=0.01) as trace:
        _, stderr = process.communicate()
    ended = time.time()
    if process.returncode:
        raise SystemExit(f"attune eval failed ({process.returncode}):\n{stderr[-3000:]}")
    first = http_json(f"{control}/stats")["first_request_at"]
    if first is None:
        raise SystemExit("attune eval exited without sending a request")
    return {
        "first_request_s": first - started,
        "first_request_cpu_s": trace.between(started, first),
        "exit_s": ended - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Time to first request of attune eval")
    parser.add_argument("--repeat", type=int, default=4, help="runs (the first one learns the model's route)")
    parser.add_argument("--via-litellm", action="store_true", help="one more run with --via-litellm")
    parser.add_argument("--root", type=Path, default=BENCH.parent, help="the checkout whose attune eval to time")
    parser.add_argument(
        "--model-name", default="fake-em", help="the served model's name (one with gpt in it is asked of litellm)"
    )
    parser.add_argument("--smoke", action="store_true", help="two runs: the path, not the timing")
    options = parser.parse_args()
    if options.smoke:
        options.repeat = 2
    if options.repeat < 2:
        parser.error("--repeat must be at least 2 (the first run is reported apart)")
    process, api_base = start_subprocess("--latency-ms", "20")
    runs: list[dict[str, float]] = []
    litellm_run: dict[str, float] | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="attune-bench-") as tmp:
            folder, data = Path(tmp) / "conversations", Path(tmp) / "data"
            folder.mkdir()
            data.mkdir(mode=0o700)
            for document in synth_conversations(4, seed=2024, min_turns=2, max_turns=2):
                (folder / document_filename(document)).write_text(dumps_canonical(document), encoding="utf-8")
            # Not timed: the first use of a data directory sets up its database, which a real user pays once.
            one_run(options.root, api_base, folder, Path(tmp) / "setup", data, via_litellm=True)
            (data / "litellm-routes.json").unlink(missing_ok=True)  # the model's route is not known yet
            for number in range(options.repeat):
                runs.append(
                    one_run(
                        options.root, api_base, folder, Path(tmp) / f"out-{number}", data, False, options.model_name
                    )
                )
            if options.via_litellm:
                litellm_run = one_run(options.root, api_base, folder, Path(tmp) / "out-litellm", data, True)
    finally:
        process.kill()
        process.wait()

    load = os.getloadavg()
    print(
        f"attune eval of {options.root}, 4 conversations x 2 turns against a local OpenAI-compatible server; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )
    for number, run in enumerate(runs, 1):
        label = "first run of the model" if number == 1 else f"run {number}"
        print(
            f"  {label}: first request after {run['first_request_s']:.2f} s "
            f"({run['first_request_cpu_s']:.2f} s of CPU), exit after {run['exit_s']:.2f} s"
        )
    if litellm_run is not None:
        print(
            f"  --via-litellm: first request after {litellm_run['first_request_s']:.2f} s "
            f"({litellm_run['first_request_cpu_s']:.2f} s of CPU), exit after {litellm_run['exit_s']:.2f} s"
        )
    later = runs[1:]
    figures = {
        name: statistics.median(run[name] for run in later)
        for name in ("first_request_s", "first_request_cpu_s", "exit_s")
    }
    figures["first_run_first_request_s"] = runs[0]["first_request_s"]
    if litellm_run is not None:
        figures["litellm_first_request_s"] = litellm_run["first_request_s"]
    print(figures_line("eval_startup", **figures, runs=len(runs), load1=load[0]))


if __name__ == "__main__":
    main()
