"""How the ``baseline:prior`` replay grows with the dataset: a run at n and at 10 n conversations.

The prior learns from every conversation of its run (leave-one-out), so a replay that tallied the
whole dataset again for each conversation took time quadratic in the run's size. It now tallies once
per run; at ten times the conversations a run should take about ten times as long (the target: within
12x).

For each size (default 200 and 2,000) the bench makes a fresh embedded database (SQLite in a temporary
data folder, Celery tasks in-process, as ``attune demo`` runs), imports that many synthetic
conversations, then times one ``baseline:prior`` run end to end exactly as the demo starts it
(``do_create_run`` then ``start_run``: prepare, replay every conversation, score), and one
``baseline:random`` run beside it for comparison. It also counts the prior tallies the run built
(``PriorTally.builds``): one per run, or the bench exits non-zero.

Usage: python bench/prior_baseline_scale.py [--sizes 200,2000 --turns 4 --smoke]
``--smoke`` runs 20 and 200 conversations. The last line is machine-readable:
``prior_s_<n>=... random_s_<n>=... prior_cpu_s_<n>=... ratio=<prior at the largest / prior at the smallest>
cpu_ratio=<the same in CPU seconds> builds_per_run=1``. The database lives in /dev/shm where there is one, and
the CPU seconds are printed beside the wall time: on a shared machine both the disk and the cores are
contended, and the CPU is what the replay itself costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(size: int, turns: int) -> dict[str, float]:
    """In a child process (a fresh database each): import ``size`` conversations, time a prior and a random run."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)
    from attune_site.management.commands.demo import tasks_in_process
    from attunebench.replay.baselines import PriorTally
    from attunebench.synth import synth_conversations
    from datasets.exchange import import_documents
    from scoring.replay_service import do_create_run, run_progress
    from scoring.run_control import start_run

    docs = synth_conversations(size, seed=11, min_turns=turns, max_turns=turns)
    imported = import_documents([(d.conversationId, d) for d in docs])
    if not imported.ok:
        raise SystemExit(f"import failed: {imported.problems[:3]}")
    figures: dict[str, float] = {}
    for model in ("baseline:prior", "baseline:random"):
        builds = PriorTally.builds
        started, cpu_started = time.perf_counter(), time.process_time()
        run = do_create_run(model, "default")
        with tasks_in_process():
            start_run(run.pk)
        elapsed = time.perf_counter() - started
        figures[model + " cpu"] = time.process_time() - cpu_started
        progress = run_progress(run.pk)
        if progress["status"] != "done" or progress["conversations_done"] != size:
            raise SystemExit(f"{model} at {size}: {progress}")
        figures[model] = elapsed
        if model == "baseline:prior":
            figures["builds"] = PriorTally.builds - builds
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200,2000", help="conversations per run, comma-separated")
    parser.add_argument("--turns", type=int, default=4, help="turns per synthetic conversation")
    parser.add_argument("--smoke", action="store_true", help="20 and 200 conversations")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        figures = measure(args.child, args.turns)
        print(
            f"{figures['baseline:prior']:.3f} {figures['baseline:random']:.3f} {figures['baseline:prior cpu']:.3f} "
            f"{figures['baseline:random cpu']:.3f} {int(figures['builds'])}"
        )
        return 0
    sizes = [20, 200] if args.smoke else [int(s) for s in args.sizes.split(",")]
    results: dict[int, tuple[float, float, int]] = {}
    cpu: dict[int, tuple[float, float]] = {}
    for size in sizes:
        # In memory where the machine has it: a shared disk's fsyncs would time the disk, not the replay.
        memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
        with tempfile.TemporaryDirectory(prefix="attune-prior-bench-", dir=memory) as data_dir:
            env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
            env.update(ATTUNE_DATA_DIR=data_dir, DJANGO_SETTINGS_MODULE="attune_site.settings", PYTHONPATH=str(ROOT))
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(size), "--turns", str(args.turns)],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                print(done.stdout + done.stderr, file=sys.stderr)
                print(f"the run at {size} conversations failed", file=sys.stderr)
                return 1
            prior, random_s, prior_cpu, random_cpu, builds = done.stdout.split()[-5:]
            results[size] = (float(prior), float(random_s), int(builds))
            cpu[size] = (float(prior_cpu), float(random_cpu))
        prior_s, random_s, builds = results[size]
        print(
            f"{size:>6} conversations: baseline:prior {prior_s:7.2f} s ({cpu[size][0]:.2f} s CPU), "
            f"baseline:random {random_s:7.2f} s ({cpu[size][1]:.2f} s CPU), prior tallies built: {builds}",
            flush=True,
        )
    if any(builds != 1 for _, _, builds in results.values()):
        print("a prior run built its tally more than once", file=sys.stderr)
        return 1
    smallest, largest = min(results), max(results)
    ratio = results[largest][0] / results[smallest][0]
    cpu_ratio = cpu[largest][0] / cpu[smallest][0]
    print(
        f"prior at {largest} / prior at {smallest}: {ratio:.1f}x the time, {cpu_ratio:.1f}x the CPU, "
        f"for {largest / smallest:.0f}x the conversations"
    )
    print(
        "prior_baseline_scale: "
        + " ".join(
            f"prior_s_{n}={p:.2f} random_s_{n}={r:.2f} prior_cpu_s_{n}={cpu[n][0]:.2f}"
            for n, (p, r, _) in sorted(results.items())
        )
        + f" ratio={ratio:.2f} cpu_ratio={cpu_ratio:.2f} builds_per_run=1"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
