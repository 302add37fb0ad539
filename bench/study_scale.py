"""A whole study at N and 10 N conversations: scoring, analyses, dashboard, API, exports and import.

The paper's design is 200 conversations × 11 evaluated models × 4 replay modes × 3 PANAS strategies (26,400
scored runs of one conversation). For each size the bench builds such a study in its own PostgreSQL database
(seeded synthetic conversations from ``attunebench.synth``, one finished run per (model, mode, strategy) whose
outputs are seeded synthetic replies, as ``bench/score_speed.py`` makes them) and then measures, each step in a
process of its own so its peak memory is its own:

* ``import``: reading the conversations' JSONL file and importing it (``do_import_paths``);
* ``score``: scoring every run into the database in one job (``do_score_evaluation_runs``), in runs of one
  conversation/s;
* ``analyses``: the dashboard's report and SPEC 6 analyses with 2,000 bootstrap resamples, and the report's JSON;
* ``dashboard``: the evaluation dashboard's first load in a fresh process, then a cached load; then, after a
  run is re-scored, a load that computes the analyses itself, and one after the precompute task ran;
* ``api``: the leaderboard API's first load in a fresh process, then a cached load;
* ``export_jsonl`` / ``export_parquet``: ``export_conversations`` of the whole study.

Every figure is printed at both sizes with the ratio (10 N / N): a ratio well above 10 is a step whose cost grows
faster than the study. Each child's peak RSS (``ru_maxrss``) includes Django and the libraries it loaded. The
children run without REDIS_URL, so the cache is each process's own and every step starts cold.

Usage: python bench/study_scale.py [--conversations 200] [--models 11] [--turns 10] [--only score] [--smoke]
Needs DATABASE_URL (a server where it may create and drop ``<database>_study_scale``). ``--smoke`` runs 3 and 6
conversations × 2 models. ``--only STEP`` runs just that step (after the import and the runs it needs) and prints its
table rows, without the figures line. The last line is the figures line (``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from bench_db import migrated_copy  # noqa: E402
from figures import figures_line  # noqa: E402

STEPS = ("import", "runs", "score", "analyses", "dashboard", "api", "export_jsonl", "export_parquet")
# Figures each step reports; (step, key) -> how the table names it.
SHOWN = {
    ("import", "seconds"): "import JSONL (s)",
    ("import", "cpu_s"): "import CPU (s)",
    ("import", "rss_mb"): "import peak RSS (MB)",
    ("runs", "seconds"): "build runs (s, setup)",
    ("score", "seconds"): "score all runs (s)",
    ("score", "runs_per_s"): "scoring rate (runs/s)",
    ("score", "cpu_s"): "score CPU (s)",
    ("score", "rss_mb"): "score peak RSS (MB)",
    ("analyses", "report_s"): "report from the database (s)",
    ("analyses", "analyze_s"): "analyses, 2,000 resamples (s)",
    ("analyses", "json_s"): "report JSON written (s)",
    ("analyses", "json_mb"): "report JSON size (MB)",
    ("analyses", "cpu_s"): "analyses step CPU (s)",
    ("analyses", "rss_mb"): "analyses peak RSS (MB)",
    ("dashboard", "first_s"): "dashboard first load (s)",
    ("dashboard", "cached_s"): "dashboard cached load (s)",
    ("dashboard", "changed_s"): "dashboard after a change, computed in the request (s)",
    ("dashboard", "precompute_s"): "precompute task after a change (s)",
    ("dashboard", "after_precompute_s"): "dashboard after a change, precomputed (s)",
    ("dashboard", "cpu_s"): "dashboard step CPU (s)",
    ("dashboard", "rss_mb"): "dashboard peak RSS (MB)",
    ("api", "first_s"): "leaderboard API first (s)",
    ("api", "cached_s"): "leaderboard API cached (s)",
    ("api", "rss_mb"): "API peak RSS (MB)",
    ("export_jsonl", "seconds"): "export JSONL (s)",
    ("export_jsonl", "cpu_s"): "export JSONL CPU (s)",
    ("export_jsonl", "rss_mb"): "export JSONL peak RSS (MB)",
    ("export_parquet", "seconds"): "export Parquet (s)",
    ("export_parquet", "cpu_s"): "export Parquet CPU (s)",
    ("export_parquet", "rss_mb"): "export Parquet peak RSS (MB)",
}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------
# The steps, each run in a child process on the study's database
# ---------------------------------------------------------------------------


def step_import(args: argparse.Namespace) -> dict[str, float]:
    from datasets.imports import do_import_paths

    started = time.perf_counter()
    result, _record = do_import_paths([args.work / "conversations.jsonl"])
    if not result.ok:
        raise SystemExit(f"import failed: {[str(p) for p in result.problems[:3]]}")
    return {"seconds": time.perf_counter() - started}


def step_runs(args: argparse.Namespace) -> dict[str, float]:
    """One finished run per (model, mode, strategy), its outputs seeded synthetic replies (setup, not a figure)."""
    from score_speed import make_run

    from attunebench import catalogue as cat
    from collection.models import Conversation
    from datasets.exchange import conversation_to_dict, with_export_relations
    from scoring.models import ConversationScore, EvaluatedModel, EvaluationRun, RunConversation

    started = time.perf_counter()
    rng = random.Random(args.seed)
    conversations = list(with_export_relations(Conversation.objects.order_by("conversation_id")))
    raw = [(c.pk, conversation_to_dict(c)) for c in conversations]
    n_runs = 0
    for m in range(args.models):
        model = EvaluatedModel.objects.create(name=f"scale/model-{m:02d}", litellm_model=f"openai/scale-{m:02d}")
        for mode in cat.MODES:
            for strategy in cat.PANAS_STRATEGIES:
                run = EvaluationRun.objects.create(
                    evaluated_model=model,
                    mode=mode,
                    panas_strategy=strategy,
                    status=EvaluationRun.Status.DONE,
                    conversations_total=len(raw),
                    conversations_done=len(raw),
                )
                rows = []
                for pk, document in raw:
                    output = make_run(rng, document, model.name, mode)
                    output["post_conversation"]["panas_strategy"] = strategy
                    rows.append(
                        RunConversation(run=run, conversation_id=pk, status=RunConversation.Status.DONE, output=output)
                    )
                RunConversation.objects.bulk_create(rows, batch_size=500)
                n_runs += len(rows)
    assert not ConversationScore.objects.exists()
    return {"seconds": time.perf_counter() - started, "runs": n_runs}


def step_score(args: argparse.Namespace) -> dict[str, float]:
    from scoring.models import EvaluationRun
    from scoring.run_scoring import do_score_evaluation_run, do_score_evaluation_runs

    runs = list(EvaluationRun.objects.order_by("pk").values_list("pk", flat=True))
    do_score_evaluation_run(runs[0])  # imports and caches outside the timing; scored again below
    started = time.perf_counter()
    scored = do_score_evaluation_runs(runs)  # one pass: each conversation's ground truth read once for all runs
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "runs_per_s": scored / elapsed, "scored": scored}


def step_analyses(args: argparse.Namespace) -> dict[str, float]:
    from attunebench.metrics.analysis import analyze
    from attunebench.metrics.report import write_json
    from research.results.evaluation import build_report, leaderboard_runs

    started = time.perf_counter()
    runs = leaderboard_runs()[0]
    report, skipped = build_report(runs)
    report_s = time.perf_counter() - started
    if skipped:
        raise SystemExit(f"stored scores skipped: {skipped[:3]}")
    started = time.perf_counter()
    analysis = analyze(report, n_bootstrap=args.bootstrap)
    analyze_s = time.perf_counter() - started
    assert analysis is not None
    started = time.perf_counter()
    write_json(report, args.work / "report.json")
    json_s = time.perf_counter() - started
    return {
        "report_s": report_s,
        "analyze_s": analyze_s,
        "json_s": json_s,
        "json_mb": (args.work / "report.json").stat().st_size / 1e6,
        "rows": len(report.conversations),
    }


def _researcher_client() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from research.access.roles import do_make_researcher

    user, created = get_user_model().objects.get_or_create(username="scale-bench")
    if created:
        do_make_researcher(user)
    client = Client()
    client.force_login(user)
    return client


def _timed_get(client: Any, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"GET {url} answered {response.status_code}")
    return elapsed


def step_dashboard(args: argparse.Namespace) -> dict[str, float]:
    """Cold, cached, and after a score change: computed in the request, or precomputed as the worker does."""
    from research.results.evaluation import leaderboard_runs
    from research.results.precompute import warm_dashboard
    from scoring.run_scoring import do_score_evaluation_run

    client = _researcher_client()
    figures = {"first_s": _timed_get(client, "/research/"), "cached_s": _timed_get(client, "/research/")}
    run = leaderboard_runs()[0][0].pk  # a run the dashboard shows, so its new scores change what it shows
    do_score_evaluation_run(run)  # a score changes: the cached analyses no longer apply
    figures["changed_s"] = _timed_get(client, "/research/")
    do_score_evaluation_run(run)
    started = time.perf_counter()
    warm_dashboard()  # what the worker runs once scores change (the page's process shares the cache here)
    figures["precompute_s"] = time.perf_counter() - started
    figures["after_precompute_s"] = _timed_get(client, "/research/")
    return figures


def step_api(args: argparse.Namespace) -> dict[str, float]:
    client = _researcher_client()
    return {"first_s": _timed_get(client, "/api/leaderboard/"), "cached_s": _timed_get(client, "/api/leaderboard/")}


def _export(args: argparse.Namespace, fmt: str) -> dict[str, float]:
    from datasets.exchange import export_conversations, export_selection

    started = time.perf_counter()
    count = export_conversations(export_selection(), fmt, args.work / f"export.{fmt}")
    if count != args.size:
        raise SystemExit(f"exported {count} conversations of {args.size}")
    return {"seconds": time.perf_counter() - started}


def step_export_jsonl(args: argparse.Namespace) -> dict[str, float]:
    return _export(args, "jsonl")


def step_export_parquet(args: argparse.Namespace) -> dict[str, float]:
    return _export(args, "parquet")


def child(args: argparse.Namespace) -> None:
    import django

    django.setup()
    cpu = time.process_time()
    figures = globals()[f"step_{args.step}"](args)
    # This process's CPU over the whole step (Postgres's own is not in it): on a shared machine the wall
    # time swings with the other jobs, the CPU much less.
    figures["cpu_s"] = time.process_time() - cpu
    figures["rss_mb"] = _rss_mb()
    print("STEP " + json.dumps(figures))


# ---------------------------------------------------------------------------
# The parent: a fresh database per size, the steps in order, the table
# ---------------------------------------------------------------------------


def measure_size(args: argparse.Namespace, size: int, url: str) -> dict[tuple[str, str], float]:
    from attunebench import canonical as cf
    from attunebench.synth import synth_conversations

    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(DATABASE_URL=url, PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="attune_site.settings")
    migrated_copy(url, env)
    out: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="attune-study-scale-") as work:
        with open(Path(work) / "conversations.jsonl", "w", encoding="utf-8") as handle:
            for start in range(0, size, 200):  # in batches, so the generator's memory stays flat
                for doc in synth_conversations(min(200, size - start), args.seed, args.turns, args.turns, start=start):
                    handle.write(cf.dumps_line(doc) + "\n")
        for step in STEPS if args.only is None else ("import", "runs", args.only):
            command = [sys.executable, __file__, "--step", step, "--size", str(size), "--work", work]
            command += ["--models", str(args.models), "--seed", str(args.seed), "--bootstrap", str(args.bootstrap)]
            done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("STEP ")]
            if done.returncode != 0 or not lines:
                print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"step {step} at {size} conversations failed (exit {done.returncode})")
            figures = json.loads(lines[-1][5:])
            out.update({(step, key): value for key, value in figures.items()})
            shown = ", ".join(f"{k}={v:.3g}" for k, v in figures.items())
            print(f"  {size} conversations, {step}: {shown}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200, help="N: the smaller size (10 N is the larger)")
    parser.add_argument("--models", type=int, default=11, help="evaluated models (× 4 modes × 3 strategies)")
    parser.add_argument("--turns", type=int, default=10, help="turns per synthetic conversation")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples of the analyses")
    parser.add_argument("--smoke", action="store_true", help="3 and 6 conversations × 2 models × 3 turns")
    parser.add_argument("--only", choices=STEPS[2:], help="measure only this step (after the import and runs)")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        child(args)
        return 0
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith("postgres"):
        print("study_scale needs DATABASE_URL naming a PostgreSQL server (it makes its own database there)")
        return 2
    sizes = [args.conversations, 10 * args.conversations]
    if args.smoke:
        sizes, args.models, args.turns, args.bootstrap = [3, 6], 2, 3, 200
    url = base.rsplit("/", 1)[0] + "/" + base.rsplit("/", 1)[1].split("?")[0] + "_study_scale"
    results = {}
    for size in sizes:
        n_runs = size * args.models * 12
        print(f"{size} conversations × {args.models} models × 4 modes × 3 strategies = {n_runs} runs", flush=True)
        results[size] = measure_size(args, size, url)
    small, large = results[sizes[0]], results[sizes[1]]
    print(f"\n| figure | {sizes[0]} conversations | {sizes[1]} conversations | ratio |")
    print("|---|---|---|---|")
    for key, title in SHOWN.items():
        a, b = small.get(key), large.get(key)
        if a is None or b is None:
            continue
        print(f"| {title} | {a:.3g} | {b:.3g} | {b / a if a else float('nan'):.2f} |")
    print("(timings on a shared machine: compare ratios, and repeat before trusting a single figure)")
    if args.only is not None:
        return 0
    figures: dict[str, float] = {}
    for tag, result in (("n", small), ("n10", large)):
        figures.update(
            {
                f"score_runs_per_s_{tag}": result[("score", "runs_per_s")],
                f"analyze_s_{tag}": result[("analyses", "analyze_s")],
                f"dashboard_first_s_{tag}": result[("dashboard", "first_s")],
                f"dashboard_cached_s_{tag}": result[("dashboard", "cached_s")],
                f"dashboard_after_change_s_{tag}": result[("dashboard", "after_precompute_s")],
                f"api_first_s_{tag}": result[("api", "first_s")],
                f"export_jsonl_s_{tag}": result[("export_jsonl", "seconds")],
                f"export_parquet_s_{tag}": result[("export_parquet", "seconds")],
                f"import_s_{tag}": result[("import", "seconds")],
                f"score_cpu_s_{tag}": result[("score", "cpu_s")],
                f"analyses_cpu_s_{tag}": result[("analyses", "cpu_s")],
                f"peak_rss_mb_{tag}": max(v for (_, k), v in result.items() if k == "rss_mb"),
            }
        )
    print(figures_line("study_scale", **figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
