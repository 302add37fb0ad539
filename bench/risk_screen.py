"""Risk screen quality and speed: attunebench.safety against labelled messages.

Screens every message of a labelled set (JSON lines: ``{"text", "level", "kind"}``, level ``none``,
``concern`` or ``urgent``) with :func:`attunebench.safety.screen_text` and prints:

- recall per level: labelled urgent screened urgent; labelled concern screened concern or urgent;
  labelled none screened none (the complement of the false-positive rate);
- the false-positive rate: labelled none screened anything but none;
- accuracy per kind (explicit, oblique, idiom, negated, media, third_party, non_english ...), with the
  same notion of a correct answer, and the messages of each kind screened wrongly;
- speed: messages per second and µs per message (the best of several passes over the set, one process).

The main set (tests/data/risk_screen_messages.jsonl) is the one the patterns were written against;
``--heldout`` also scores tests/data/risk_screen_heldout.jsonl, written before any pattern and never
used to tune them, so its figures are the honest ones.

Usage: .venv/bin/python bench/risk_screen.py [--data PATH] [--heldout] [--repeat 5] [--smoke]

``--smoke`` scores only the first 60 messages and exits non-zero on an exception or a figure it could
not compute (a level missing from those lines), never on a timing or a target.

The last line is machine-readable, for the set given by ``--data``:
``risk_screen: urgent_recall=<float> concern_recall=<float> false_positive_rate=<float> us_per_message=<int>``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from attunebench.safety import screen_text  # noqa: E402

MAIN_SET = REPO / "tests" / "data" / "risk_screen_messages.jsonl"
HELDOUT_SET = REPO / "tests" / "data" / "risk_screen_heldout.jsonl"
SMOKE_LINES = 60


@dataclass(frozen=True)
class Scores:
    urgent_recall: float | None
    concern_recall: float | None
    none_recall: float | None
    false_positive_rate: float | None
    us_per_message: float
    counts: dict[str, int]

    def missing(self) -> list[str]:
        figures = {
            "urgent_recall": self.urgent_recall,
            "concern_recall": self.concern_recall,
            "false_positive_rate": self.false_positive_rate,
        }
        return [name for name, value in figures.items() if value is None]


def load(path: Path, limit: int | None) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
            if limit is not None and len(rows) >= limit:
                break
    return rows


def correct(label: str, screened: str) -> bool:
    """Urgent must be screened urgent, concern concern or urgent, none none."""
    if label == "urgent":
        return screened == "urgent"
    if label == "concern":
        return screened in ("concern", "urgent")
    return screened == "none"


def ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def score(name: str, rows: list[dict[str, str]], repeat: int) -> Scores:
    screened = [screen_text(row["text"]).level for row in rows]
    best = float("inf")
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        for row in rows:
            screen_text(row["text"])
        best = min(best, time.perf_counter() - started)
    us = best / len(rows) * 1e6 if rows else 0.0

    by_level: dict[str, list[bool]] = defaultdict(list)
    by_kind: dict[str, list[bool]] = defaultdict(list)
    wrong: dict[str, list[str]] = defaultdict(list)
    for row, level in zip(rows, screened, strict=True):
        ok = correct(row["level"], level)
        by_level[row["level"]].append(ok)
        by_kind[row.get("kind", "?")].append(ok)
        if not ok:
            wrong[row.get("kind", "?")].append(f"{row['level']} -> {level}: {row['text']}")

    def recall(level: str) -> float | None:
        return ratio(sum(by_level[level]), len(by_level[level]))

    none_recall = recall("none")
    scores = Scores(
        urgent_recall=recall("urgent"),
        concern_recall=recall("concern"),
        none_recall=none_recall,
        false_positive_rate=None if none_recall is None else 1 - none_recall,
        us_per_message=us,
        counts={level: len(oks) for level, oks in by_level.items()},
    )

    print(f"== {name}: {len(rows)} messages")
    for level in ("urgent", "concern", "none"):
        value = recall(level)
        shown = "n/a" if value is None else f"{value:.3f}"
        print(f"  recall {level:<8} {shown}  ({sum(by_level[level])}/{len(by_level[level])})")
    fpr = scores.false_positive_rate
    print(f"  false-positive rate on none: {'n/a' if fpr is None else f'{fpr:.3f}'}")
    print("  accuracy per kind:")
    for kind in sorted(by_kind):
        oks = by_kind[kind]
        print(f"    {kind:<18} {sum(oks) / len(oks):.3f}  ({sum(oks)}/{len(oks)})")
    for kind in sorted(wrong):
        for line in wrong[kind]:
            print(f"    wrong [{kind}] {line}")
    per_second = 1e6 / us if us else 0.0
    print(f"  speed: {per_second:,.0f} messages/s, {us:.1f} µs per message (best of {max(1, repeat)} passes)")
    return scores


def figure(value: float | None) -> str:
    return "nan" if value is None else f"{value:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=MAIN_SET, help="labelled JSON lines (default: the main set)")
    parser.add_argument("--heldout", action="store_true", help="also score the held-out set")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes over the set (the best counts)")
    parser.add_argument("--smoke", action="store_true", help=f"the first {SMOKE_LINES} messages only; fail on errors")
    args = parser.parse_args()
    limit = SMOKE_LINES if args.smoke else None
    repeat = 1 if args.smoke else args.repeat
    missing: list[str] = []
    try:
        scores = score(str(args.data), load(args.data, limit), repeat)
        missing += scores.missing()
        if args.heldout:
            held = score(str(HELDOUT_SET), load(HELDOUT_SET, limit), repeat)
            print(
                f"risk_screen_heldout: urgent_recall={figure(held.urgent_recall)} "
                f"concern_recall={figure(held.concern_recall)} "
                f"false_positive_rate={figure(held.false_positive_rate)} us_per_message={held.us_per_message:.0f}"
            )
            missing += [f"heldout {name}" for name in held.missing()]
    except Exception as error:  # the smoke run fails on any exception, with its message
        print(f"risk_screen: error {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(
        f"risk_screen: urgent_recall={figure(scores.urgent_recall)} concern_recall={figure(scores.concern_recall)} "
        f"false_positive_rate={figure(scores.false_positive_rate)} us_per_message={scores.us_per_message:.0f}"
    )
    if args.smoke and missing:
        print(f"risk_screen: missing figures: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
