"""Scoring stored run outputs, for runs this app writes itself (human-baseline raters).

Model runs are scored by the replay service when they finish; a human run
grows one conversation at a time, so each finished conversation is scored
through the very same function, which stores ConversationScore / RunScore rows
in the shape every dashboard reads.
"""

from __future__ import annotations

from scoring.run_scoring import score_run


def do_score_run(run_id: int) -> int:
    """(Re)score every finished conversation of a run; returns how many were scored."""
    return score_run(run_id)
