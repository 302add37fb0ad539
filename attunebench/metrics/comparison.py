"""Which leaderboard rows may be compared, and how far each is above the prior baseline.

A mean over 15 conversations and a mean over the 4 shortest of them are not
the same quantity: ranking them together (with intervals that for n = 2 are
just the two scores) misleads. So every analysis first splits the report
(:func:`split_comparable`):

- **compared rows** were scored on exactly one conversation set (by default
  the set most model rows share; ties go to the larger set). Every ranking,
  interval, test and breakdown runs over these rows only.
- **rows apart** were scored on another set: a run that lost a conversation,
  a run on a topic subset, a human rater. They are listed with their n and a
  fingerprint of their set, never ranked among the compared rows.
- **human rows** are always apart and compared with each model row on exactly
  the conversations the human rated, with a paired test
  (:func:`human_pairings`).
- **mode-agnostic baselines** (``baseline:...``) answer the same whatever the
  mode, so they appear once (their ``default`` row, else their first mode);
  their other rows would be identical copies and would inflate pair counts.

**Skill** over the prior baseline is (score − prior) / (scale − prior): 0 is
what the majority answers of the other conversations already achieve, 1 is a
perfect score, below 0 is worse than the prior. It is the first number to read:
a raw score says little until one knows how much of it the prior gets for free.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from attunebench.metrics.aggregate import aggregate_rows, mean_or_none
from attunebench.metrics.keys import is_human
from attunebench.metrics.results import (
    ApartRow,
    ConversationRecord,
    ScoringReport,
    row_label,
)

# Below this many conversations a row gets no confidence interval: a percentile bootstrap over
# 2, 3 or 5 values only restates the values, and SE-based intervals are no better.
MIN_CONVERSATIONS_FOR_CI = 10
PRIOR_BASELINE = "baseline:prior"
# One resample count and seed for the dashboard, the API and ``attune analyze``, so their intervals agree.
DEFAULT_BOOTSTRAP = 2000
DEFAULT_SEED = 0
BASELINE_PREFIX = "baseline:"
PREFERRED_MODE = "default"


def is_mode_agnostic(em_model: str) -> bool:
    """Offline baselines ignore the mode (no reasoning, no profile use): their rows are the same in every mode."""
    return em_model.startswith(BASELINE_PREFIX)


def set_fingerprint(conversation_ids: Iterable[str]) -> str:
    """A short, stable name for a set of conversation ids (the first 8 hex digits of its SHA-256)."""
    text = "\n".join(sorted(set(conversation_ids)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def skill(value: float | None, prior: float | None, scale: float) -> float | None:
    """(value − prior) / (scale − prior); None when either is unknown or the prior is already perfect."""
    if value is None or prior is None or prior >= scale:
        return None  # a perfect prior leaves no room to be better than it: skill undefined
    return (value - prior) / (scale - prior)


@dataclass
class ComparableSplit:
    """A report split into the rows compared on one conversation set and the rows shown apart."""

    compared: ScoringReport
    apart: ScoringReport
    reference: tuple[str, ...]  # sorted conversation ids of the compared set
    collapsed: list[str] = field(default_factory=list)
    apart_rows: list[ApartRow] = field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        return set_fingerprint(self.reference)


def _rows(records: Iterable[ConversationRecord]) -> dict[tuple[str, str], list[ConversationRecord]]:
    rows: dict[tuple[str, str], list[ConversationRecord]] = {}
    for record in records:
        rows.setdefault((record.em_model, record.mode), []).append(record)
    return dict(sorted(rows.items()))


def _order(record: ConversationRecord) -> tuple[str, str, str]:
    return (record.em_model, record.mode, record.conversationId)


def _report(records: Sequence[ConversationRecord]) -> ScoringReport:
    ordered = sorted(records, key=_order)
    return ScoringReport(conversations=ordered, aggregates=aggregate_rows(ordered))


def _reference_set(rows: dict[tuple[str, str], list[ConversationRecord]]) -> frozenset[str]:
    """The set most non-human rows were scored on; ties go to the larger set, then the smaller fingerprint."""
    counts: dict[frozenset[str], int] = {}
    for key, records in rows.items():
        if not is_human(key[0]):
            ids = frozenset(r.conversationId for r in records)
            counts[ids] = counts.get(ids, 0) + 1
    if not counts:
        return frozenset()
    return max(counts, key=lambda ids: (counts[ids], len(ids), _negated(set_fingerprint(ids))))


def _negated(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def split_comparable(report: ScoringReport, reference: Iterable[str] | None = None) -> ComparableSplit:
    """Split ``report`` into compared rows (scored on exactly the reference set) and rows apart.

    ``reference`` fixes the compared conversation set (the web passes the
    chosen dataset selection's set); without it the set most model rows share
    is used. Mode-agnostic baselines are first reduced to one row each.
    """
    rows = _rows(report.conversations)
    collapsed: list[str] = []
    by_model: dict[str, list[str]] = {}
    for em_model, mode in rows:
        if is_mode_agnostic(em_model):
            by_model.setdefault(em_model, []).append(mode)
    for em_model, modes in by_model.items():
        if len(modes) > 1:
            keep = PREFERRED_MODE if PREFERRED_MODE in modes else modes[0]
            dropped = [m for m in modes if m != keep]
            for mode in dropped:
                del rows[(em_model, mode)]
            collapsed.append(
                f"{em_model} ignores the mode: shown once as [{keep}]; its identical {', '.join(dropped)} "
                f"row(s) are left out of every comparison and pair count"
            )
    ref = frozenset(reference) if reference is not None else _reference_set(rows)
    compared: list[ConversationRecord] = []
    apart: list[ConversationRecord] = []
    apart_rows: list[ApartRow] = []
    for (em_model, mode), records in rows.items():
        ids = {r.conversationId for r in records}
        if ids == ref and not is_human(em_model):
            compared.extend(records)
            continue
        apart.extend(records)
        inside = len(ids & ref)
        if is_human(em_model):
            reason = "human rater: compared with each model only on the conversations rated (paired, below)"
        elif inside == len(ids):
            reason = f"scored on {len(ids)} of the {len(ref)} compared conversations"
        else:
            reason = f"scored on {len(ids)} conversations, {len(ids) - inside} of them outside the compared set"
        apart_rows.append(
            ApartRow(
                em_model=em_model,
                mode=mode,
                label=row_label(em_model, mode),
                human_baseline=is_human(em_model),
                n_conversations=len(ids),
                n_in_compared_set=inside,
                conversation_set=set_fingerprint(ids),
                composite_score=mean_or_none(r.composite_score for r in records),
                reason=reason,
            )
        )
    whole = len(compared) == len(report.conversations) and all(
        a is b for a, b in zip(sorted(compared, key=_order), report.conversations, strict=True)
    )
    return ComparableSplit(
        # Every record compared, in the report's order: the report itself, its aggregates not computed again.
        compared=report if whole else _report(compared),
        apart=_report(apart),
        reference=tuple(sorted(ref)),
        collapsed=collapsed,
        apart_rows=apart_rows,
    )


def ci_allowed(n_conversations: int) -> bool:
    """Whether a row has enough conversations for an interval to mean anything (MIN_CONVERSATIONS_FOR_CI)."""
    return n_conversations >= MIN_CONVERSATIONS_FOR_CI
