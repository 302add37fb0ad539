"""The SPEC 6 analyses' speed at N and 10 N conversations × 11 models × 4 modes, with 2,000 bootstrap resamples.

Builds a scoring report in memory (``bench/score_speed.py``'s seeded conversations and runs, scored with
details, 100 conversations at a time so the runs never all sit in memory), then times
``attunebench.metrics.analysis.analyze`` on it in CPU seconds of this process (``time.process_time``), which a
shared machine inflates far less than wall time. Prints both sizes and the ratio; a ratio well above 10 is a
step growing faster than the study.

Usage: python bench/analysis_speed.py [--conversations 200] [--models 11] [--turns 10] [--bootstrap 2000]
                                      [--cache DIR] [--smoke]
The 10 N report is the N report's records copied ten times under new conversation ids (each copy
keeps its scores): scoring 88,000 runs for it would take tens of minutes of CPU here, and the analyses' cost
depends on the numbers of records, turns and rows, not on the values. ``--score-large`` scores it for real instead.
``--cache DIR`` keeps each built report as a pickle there and reuses it. The last line is the figures line
(``bench/figures.py``).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from figures import figures_line
from score_speed import make_conversation, make_run

from attunebench import catalogue as cat
from attunebench.canonical import parse_conversation, parse_run
from attunebench.metrics import score_documents
from attunebench.metrics.aggregate import aggregate_rows
from attunebench.metrics.results import ConversationRecord, ScoringReport

BATCH = 100


def build_report(n_conversations: int, n_models: int, n_turns: int, seed: int) -> ScoringReport:
    """A scored report of every (conversation, model, mode), each record with its details."""
    rng = random.Random(seed)
    models = [f"bench/model-{m:02d}" for m in range(n_models)]
    records: list[ConversationRecord] = []
    for start in range(0, n_conversations, BATCH):
        conversations, runs = [], []
        for i in range(start, min(n_conversations, start + BATCH)):
            raw = make_conversation(rng, i, n_turns)
            conversations.append(parse_conversation(raw, raw["conversationId"]))
            for model in models:
                for mode in cat.MODES:
                    runs.append(parse_run(make_run(rng, raw, model, mode), f"{raw['conversationId']}/{model}/{mode}"))
        records.extend(score_documents(conversations, runs, include_details=True).conversations)
    records.sort(key=lambda r: (r.em_model, r.mode, r.conversationId))
    return ScoringReport(conversations=records, aggregates=aggregate_rows(records))


def replicated(report: ScoringReport, times: int) -> ScoringReport:
    """The report's records ``times`` over, each copy under its own conversation ids (``<id>~<copy>``)."""
    records = [
        record.model_copy(update={"conversationId": f"{record.conversationId}~{copy}"})
        for copy in range(times)
        for record in report.conversations
    ]
    records.sort(key=lambda r: (r.em_model, r.mode, r.conversationId))
    return ScoringReport(conversations=records, aggregates=aggregate_rows(records))


def report_for(args: argparse.Namespace, size: int) -> ScoringReport:
    copied = size > args.conversations and not args.score_large
    name = f"report-{size}{'c' if copied else ''}x{args.models}x{args.turns}-{args.seed}.pickle"
    path = args.cache / name if args.cache else None
    if path is not None and path.exists():
        with open(path, "rb") as handle:
            report: ScoringReport = pickle.load(handle)
        return report
    if copied:
        report = replicated(report_for(args, args.conversations), size // args.conversations)
    else:
        report = build_report(size, args.models, args.turns, args.seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            pickle.dump(report, handle, protocol=pickle.HIGHEST_PROTOCOL)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200, help="N: the smaller size (10 N is the larger)")
    parser.add_argument("--models", type=int, default=11, help="evaluated models (× 4 modes: the rows)")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bootstrap", type=int, default=2000)
    parser.add_argument("--cache", type=Path, help="a folder to keep the built reports in, and reuse them from")
    parser.add_argument("--score-large", action="store_true", help="score the 10 N report rather than copy N's")
    parser.add_argument("--smoke", action="store_true", help="3 and 30 conversations × 2 models × 3 turns")
    args = parser.parse_args()
    if args.smoke:
        args.conversations, args.models, args.turns, args.bootstrap = 3, 2, 3, 200
    from attunebench.metrics.analysis import analyze

    analyze(report_for(args, args.conversations), n_bootstrap=10)  # scipy imported and warmed outside the timing
    figures: dict[str, float] = {}
    for tag, size in (("n", args.conversations), ("n10", 10 * args.conversations)):
        started = time.perf_counter()
        report = report_for(args, size)
        built = time.perf_counter() - started
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        analyze(report, n_bootstrap=args.bootstrap)
        figures[f"analyze_cpu_s_{tag}"] = time.process_time() - cpu
        figures[f"analyze_wall_s_{tag}"] = time.perf_counter() - wall
        print(
            f"{size} conversations × {args.models * len(cat.MODES)} rows ({len(report.conversations)} records, "
            f"built or read in {built:.1f} s): analyses with {args.bootstrap} resamples "
            f"{figures[f'analyze_cpu_s_{tag}']:.2f} s CPU, {figures[f'analyze_wall_s_{tag}']:.2f} s wall",
            flush=True,
        )
        del report
    figures["ratio_cpu"] = figures["analyze_cpu_s_n10"] / figures["analyze_cpu_s_n"]
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ratio (10 N / N, CPU): {figures['ratio_cpu']:.2f}")
    print(figures_line("analysis_speed", **figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
