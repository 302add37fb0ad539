"""AttuneBench scoring (SPEC 5) and analyses (SPEC 6): pure Python, no Django.

Public entry points:

- :func:`score_documents` — conversations + runs -> the scoring report
  (:class:`attunebench.metrics.results.ScoringReport`).
- :func:`score_runs` — the same matching and scoring, but skipping (and
  listing) runs whose conversation is missing or which duplicate another run.
- :func:`analyze` — capability profile, independence, discrimination,
  bootstrap and breakdowns over a report, as the typed
  :class:`attunebench.metrics.results.Analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attunebench.canonical import ConversationFile
from attunebench.metrics.engine import (
    ConversationScore,
    ScoringResult,
    UnmatchedRunsError,
    score_documents,
    score_runs,
)
from attunebench.metrics.results import Analysis, ScoringReport, to_json


def analyze(
    report: ScoringReport,
    conversations: Sequence[ConversationFile] | Mapping[str, ConversationFile] | None = None,
    *,
    seed: int = 0,
    n_bootstrap: int = 2000,
    alpha: float = 0.05,
) -> Analysis:
    """All SPEC 6 analyses; see :func:`attunebench.metrics.analysis.analyze`.

    Imported lazily so that scoring alone never loads numpy or scipy.stats.
    """
    from attunebench.metrics.analysis import analyze as _analyze

    return _analyze(report, conversations, seed=seed, n_bootstrap=n_bootstrap, alpha=alpha)


__all__ = [
    "Analysis",
    "ConversationScore",
    "ScoringReport",
    "ScoringResult",
    "UnmatchedRunsError",
    "analyze",
    "score_documents",
    "score_runs",
    "to_json",
]
