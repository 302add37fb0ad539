"""Reading inputs from disk and presenting a report (leaderboard table, CSV, JSON).

The management commands are thin wrappers over these functions, so everything
a researcher sees from ``attune score`` can be tested without Django.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from attunebench import catalogue as cat
from attunebench.canonical import (
    CanonicalError,
    ConversationFile,
    Problem,
    RunOutput,
    check_conversation_options,
    check_run_options,
    decode_json,
    looks_like_datasheet,
    looks_like_run,
    parse_conversation,
    parse_run,
)
from attunebench.metrics.composite import CAPABILITY_LABELS, LEADERBOARD_CAPABILITIES, capability_scores
from attunebench.metrics.engine import ScoringResult, score_runs
from attunebench.metrics.keys import AGGREGATE_KEYS, POOLED_METRIC_KEYS, is_human
from attunebench.metrics.results import (
    AggregateRow,
    ConversationRecord,
    LeaderboardCapabilities,
    LeaderboardRow,
    ScoringReport,
    row_label,
    to_json,
)
from attunebench.sources import iter_documents
from attunebench.spreadsheet import csv_row


@dataclass
class LoadedInputs:
    """Documents read from disk, the problems met, and documents of the other kind ignored.

    ``warnings`` lists off-list survey answers: the files are scored anyway (an
    off-list answer matches nothing else), so they are not ``problems`` (SPEC 2.4).
    """

    conversations: list[tuple[str, ConversationFile]] = field(default_factory=list)
    runs: list[tuple[str, RunOutput]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def load_inputs(conversation_paths: Iterable[str | Path], run_paths: Iterable[str | Path]) -> LoadedInputs:
    """Read conversation files and run files from files, folders (any nesting) or zips.

    A run file found among the conversations (or a conversation among the runs)
    is ignored rather than reported as malformed, so one mixed folder can be
    given for both; the file is read once per side.
    """
    loaded = LoadedInputs()
    for want_run, paths in ((False, conversation_paths), (True, run_paths)):
        for item in iter_documents(paths):
            if isinstance(item, Problem):
                if item not in loaded.problems:  # the same folder may be given for both sides
                    loaded.problems.append(item)
                continue
            source, raw = item
            try:
                data = decode_json(source, raw)
                if looks_like_datasheet(data):
                    if source not in loaded.ignored:  # an export's datasheet.json: described data, not data
                        loaded.ignored.append(source)
                    continue
                if (
                    looks_like_run(data) != want_run
                    and isinstance(data, dict)
                    and (looks_like_run(data) or "metadata" in data)
                ):
                    loaded.ignored.append(source)
                    continue
                if want_run:
                    run = parse_run(data, source)
                    loaded.runs.append((source, run))
                    loaded.warnings.extend(check_run_options(run, source))
                else:
                    conversation = parse_conversation(data, source)
                    loaded.conversations.append((source, conversation))
                    loaded.warnings.extend(check_conversation_options(conversation, source))
            except CanonicalError as exc:
                loaded.problems.extend(p for p in exc.problems if p not in loaded.problems)
    return loaded


def score_inputs(loaded: LoadedInputs) -> ScoringResult:
    """Score loaded documents; runs without a conversation end up in ``skipped``."""
    return score_runs(
        [c for _, c in loaded.conversations],
        [r for _, r in loaded.runs],
        run_sources=[s for s, _ in loaded.runs],
    )


def problems_by_source(problems: Sequence[Problem]) -> dict[str, list[Problem]]:
    grouped: dict[str, list[Problem]] = {}
    for problem in problems:
        grouped.setdefault(problem.source, []).append(problem)
    return grouped


def format_warnings(warnings: Sequence[Problem]) -> str:
    """One line per off-list answer; the file was still scored."""
    return "\n".join(f"warning: {w} (scored: it matches no other answer)" for w in warnings)


def format_problems(problems: Sequence[Problem]) -> str:
    """One block per skipped file: its name, then each problem's JSON path and message."""
    lines = []
    for source, items in problems_by_source(problems).items():
        lines.append(f"skipped {source}")
        for p in items:
            lines.append(f"    {p.path or '(file)'}: {p.message}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Plain-text tables
# ---------------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table cell; '–' for null."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.{digits}f}"
    return str(value)


def _coverage(value: float | None) -> str:
    """A coverage share as a whole percentage; '–' when not recorded."""
    return "–" if value is None else f"{100 * value:.0f}%"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align_left: int = 1) -> str:
    """A fixed-width table; the first ``align_left`` columns are left-aligned, the rest right."""
    cells = [[str(h) for h in headers]] + [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [cell.ljust(widths[i]) if i < align_left else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        return "  ".join(parts).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in cells[1:])
    return "\n".join(out)


def row_capabilities(records: Sequence[ConversationRecord]) -> dict[tuple[str, str], dict[str, float]]:
    """Mean capability scores per (em_model, mode) over the row's conversations."""
    sums: dict[tuple[str, str], dict[str, list[float]]] = {}
    for record in records:
        bucket = sums.setdefault((record.em_model, record.mode), {})
        for name, value in capability_scores(record.metrics()).items():
            bucket.setdefault(name, []).append(value)
    return {key: {name: math.fsum(vals) / len(vals) for name, vals in bucket.items()} for key, bucket in sums.items()}


def leaderboard_row(aggregate: AggregateRow, records: Sequence[ConversationRecord]) -> LeaderboardRow:
    """The leaderboard row of one aggregate row, from the row's own conversation records.

    Capabilities are the means of the per-conversation capability scores (0–1);
    ``post_coverage`` is the mean over the records that recorded it.
    """
    caps = row_capabilities(records).get((aggregate.em_model, aggregate.mode), {})
    return LeaderboardRow(
        em_model=aggregate.em_model,
        mode=aggregate.mode,
        label=row_label(aggregate.em_model, aggregate.mode),
        human_baseline=is_human(aggregate.em_model),
        n_conversations=aggregate.n_conversations,
        composite_score=aggregate.composite_score,
        se_composite=aggregate.se_composite,
        capabilities=LeaderboardCapabilities(**{name: caps.get(name) for name in LEADERBOARD_CAPABILITIES}),
        coverage=aggregate.coverage,
        post_coverage=aggregate.post_coverage,
        holistic_imputed=sum(1 for r in records if r.holistic_imputed),
    )


def leaderboard_rows(report: ScoringReport) -> list[LeaderboardRow]:
    """One leaderboard row per aggregate row, in the report's leaderboard order."""
    by_row: dict[tuple[str, str], list[ConversationRecord]] = {}
    for record in report.conversations:
        by_row.setdefault((record.em_model, record.mode), []).append(record)
    return [leaderboard_row(agg, by_row.get((agg.em_model, agg.mode), [])) for agg in report.aggregates]


def rests_on_defaults(row: LeaderboardRow) -> bool:
    """Whether a row is below full coverage (turns or post-conversation answers missing): its scores then rest
    partly on the scorer's defaults, not only on the model."""
    return any(value is not None and value < 1 for value in (row.coverage, row.post_coverage))


def format_leaderboard(report: ScoringReport) -> str:
    """The leaderboard printed by ``attune score``; composite 0–100, capabilities 0–1 as everywhere else.

    Rows scored on another conversation set than the compared rows are marked
    (``†``) and their SE is left out below the minimum n, as on the dashboard.
    """
    from attunebench.metrics.comparison import MIN_CONVERSATIONS_FOR_CI, split_comparable

    rows = leaderboard_rows(report)
    if not rows:
        return "No run was scored."
    split = split_comparable(report)
    apart = {a.label: a for a in split.apart_rows}
    rows = [r for r in rows if r.label not in apart] + [r for r in rows if r.label in apart]  # compared rows first
    headers = (
        ["model", "mode", "n", "composite ± SE"]
        + [CAPABILITY_LABELS[c] for c in LEADERBOARD_CAPABILITIES]
        + ["turn cov.", "post cov."]
    )
    body = []
    for r in rows:
        name = (
            r.em_model
            + (" *" if r.human_baseline else "")
            + (" †" if r.label in apart else "")
            + (" ‡" if rests_on_defaults(r) else "")
        )
        se = "–" if r.se_composite is None or r.n_conversations < MIN_CONVERSATIONS_FOR_CI else f"{r.se_composite:.2f}"
        body.append(
            [name, r.mode, str(r.n_conversations), f"{fmt(r.composite_score, 2)} ± {se}"]
            + [fmt(r.capabilities.capability(c), 3) for c in LEADERBOARD_CAPABILITIES]
            + [_coverage(r.coverage), _coverage(r.post_coverage)]
        )
    table = render_table(headers, body, align_left=2)
    notes = [
        "",
        "Capability scores are 0–1: emotion = (emotion F1 + VA)/2, behaviour = (OM + human binary accuracy)/2,",
        "preference = pairwise accuracy, response = draft similarity (and judge), holistic = PANAS, survey and",
        "Four-Branch comprehension. Read the capabilities, not only the composite: they are weakly coupled.",
        f"No SE is shown below {MIN_CONVERSATIONS_FOR_CI} conversations. `attune analyze` gives intervals and the",
        "skill over the prior baseline.",
        "turn cov. = share of ground-truth turns the model answered; post cov. = share of conversations with a",
        "post-conversation prediction (below 100%, holistic rests partly on defaults, not on the model).",
    ]
    if apart:
        notes.append(
            f"† scored on another conversation set than the other rows ({len(split.reference)} conversations, "
            f"set {split.fingerprint}): not comparable with them; humans are compared paired in `attune analyze`."
        )
    if any(rests_on_defaults(r) for r in rows):
        notes.append(
            "‡ below full coverage: this row rests partly on defaults (turns the model never answered are left "
            "out, a missing post-conversation answer scores the defaults), not only on the model's answers."
        )
    if any(r.human_baseline for r in rows):
        notes.append("* human baseline (a person in the model's seat, scored exactly like a model).")
    notes.append(cat.RESEARCH_ONLY_STATEMENT)
    return table + "\n" + "\n".join(notes)


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


def write_json(data: Any, path: str | Path) -> None:
    """Write JSON (no NaN allowed: a NaN would mean a guard is missing); result models via ``to_json``.

    A scoring report is written table by table, one record at a time, so a study of hundreds of
    thousands of runs never holds its whole JSON text (or its whole dict form) in memory; the bytes
    are the same as dumping the report in one piece.
    """
    if isinstance(data, ScoringReport):
        with Path(path).open("w", encoding="utf-8") as handle:
            write_report_json(data, handle)
        return
    if isinstance(data, BaseModel):
        data = to_json(data)
    text = json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False)
    Path(path).write_text(text + "\n", encoding="utf-8")


def write_report_json(report: ScoringReport, handle: TextIO) -> None:
    """Stream ``report`` as ``json.dumps(to_json(report), indent=2)`` would write it, plus a final newline."""
    handle.write("{")
    for number, name in enumerate(("conversations", "aggregates")):
        rows: Sequence[BaseModel] = getattr(report, name)
        handle.write(("," if number else "") + f'\n  "{name}": [')
        for index, row in enumerate(rows):
            text = json.dumps(to_json(row), ensure_ascii=False, indent=2, allow_nan=False)
            # Each row sits two levels deep: every line of its own dump is indented four more spaces.
            handle.write(("," if index else "") + "\n    " + text.replace("\n", "\n    "))
        handle.write("\n  ]" if rows else "]")
    handle.write("\n}\n")


def aggregates_csv(report: ScoringReport) -> str:
    """The aggregate rows as CSV: one line per (model, mode), pooled metrics flattened."""
    caps = {(r.em_model, r.mode): r for r in leaderboard_rows(report)}
    scalar_keys = [k for k in AGGREGATE_KEYS if not k.startswith("pooled_")]
    headers = scalar_keys + ["human_baseline"] + [f"capability_{c}" for c in LEADERBOARD_CAPABILITIES]
    for prefix in ("pooled_binary_om", "pooled_binary_human"):
        headers += [f"{prefix}_{k}" for k in POOLED_METRIC_KEYS]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_row(headers))
    for agg in report.aggregates:
        lb = caps[(agg.em_model, agg.mode)]
        values = to_json(agg)
        line: list[Any] = [values[k] for k in scalar_keys]
        line.append(lb.human_baseline)
        line += [lb.capabilities.capability(c) for c in LEADERBOARD_CAPABILITIES]
        for pooled in (agg.pooled_binary_om_metrics, agg.pooled_binary_human_metrics):
            line += [getattr(pooled, k) for k in POOLED_METRIC_KEYS]
        writer.writerow(csv_row(line))
    return buffer.getvalue()
