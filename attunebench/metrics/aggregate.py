"""Aggregates per (EM, mode), SPEC 5.4.

Works on report records only (per-conversation records, including their
``turns``), so a saved report can be re-aggregated without the source files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from attunebench.metrics.keys import METRIC_KEYS, BinaryVariant
from attunebench.metrics.results import AggregateRow, BinaryScores, ConversationRecord
from attunebench.metrics.turn_metrics import confusion_metrics


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """Mean of the non-null values; None when there are none."""
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def sample_sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n − 1); None for fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    m = math.fsum(values) / n
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))


def standard_error(values: Sequence[float]) -> float | None:
    """Sample sd / √n (SPEC 5.4); None with fewer than 2 conversations (sd undefined)."""
    sd = sample_sd(values)
    return None if sd is None else sd / math.sqrt(len(values))


def pooled_binary_metrics(records: Iterable[ConversationRecord], variant: BinaryVariant) -> BinaryScores:
    """Confusion counts pooled over every scored turn, then re-derived (SPEC 5.4)."""
    tp = fp = tn = fn = 0
    for record in records:
        counts = _pooled_counts(record, variant)
        tp += counts["tp"]
        fp += counts["fp"]
        tn += counts["tn"]
        fn += counts["fn"]
    return BinaryScores(tp=tp, fp=fp, tn=tn, fn=fn, **confusion_metrics(tp, fp, tn, fn))


def _pooled_counts(record: ConversationRecord, variant: BinaryVariant) -> dict[str, int]:
    """One record's confusion counts of a variant, summed over its turns."""
    tp = fp = tn = fn = 0
    for turn in record.turns:
        counts = turn[variant]
        tp += counts["tp"]
        fp += counts["fp"]
        tn += counts["tn"]
        fn += counts["fn"]
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn}


def folded_record(record: ConversationRecord) -> ConversationRecord:
    """The record with its turns folded into one turn of pooled confusion counts.

    :func:`aggregate_rows` reads a record's turns only to pool these counts, so a
    folded record aggregates exactly like the whole one while its size no longer
    grows with the conversation: what a job scoring a whole study keeps per run.
    """
    variants: tuple[BinaryVariant, ...] = ("binary_om", "binary_human")
    pooled: dict[str, Any] = {variant: _pooled_counts(record, variant) for variant in variants}
    return record.model_copy(update={"turns": [pooled]})


def z_scores(values: Sequence[float]) -> list[float]:
    """z of each row's composite against all rows; 0 if < 2 rows or sd 0 (SPEC 5.4)."""
    sd = sample_sd(values)
    if sd is None or sd == 0:
        return [0.0] * len(values)
    m = math.fsum(values) / len(values)
    return [(v - m) / sd for v in values]


def aggregate_rows(records: Sequence[ConversationRecord]) -> list[AggregateRow]:
    """One row per (em_model, mode), leaderboard order (composite desc, then model, mode).

    Every metric, coverage included, is the mean over conversations of the
    per-conversation value (SPEC 5.4), nulls left out and null when all are
    null. Coverage is averaged rather than pooled over turns so that a
    conversation the EM failed entirely still pulls the row's coverage down.
    """
    groups: dict[tuple[str, str], list[ConversationRecord]] = {}
    for record in records:
        groups.setdefault((record.em_model, record.mode), []).append(record)

    rows: list[dict[str, Any]] = []
    for (em_model, mode), members in groups.items():
        row: dict[str, Any] = {
            "em_model": em_model,
            "mode": mode,
            "n_conversations": len(members),
            "coverage": mean_or_none(r.coverage for r in members),
            "post_coverage": mean_or_none(r.post_coverage for r in members),
        }
        for key in METRIC_KEYS:
            row[key] = mean_or_none(r.metric(key) for r in members)
        row["se_composite"] = standard_error([r.composite_score for r in members])
        row["pooled_binary_om_metrics"] = pooled_binary_metrics(members, "binary_om")
        row["pooled_binary_human_metrics"] = pooled_binary_metrics(members, "binary_human")
        rows.append(row)

    for row, z in zip(rows, z_scores([row["composite_score"] for row in rows]), strict=True):
        row["z_score"] = z
    rows.sort(key=lambda r: (-r["composite_score"], r["em_model"], r["mode"]))
    return [AggregateRow.model_validate(row) for row in rows]
