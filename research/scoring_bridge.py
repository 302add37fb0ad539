"""Scoring stored run outputs, for runs this app writes itself (human-baseline raters).

Model runs are scored by the replay service when they finish; a human run
grows one conversation at a time, so each finished conversation is scored
here through the very same function (``scoring.replay_service.score_run``),
which stores ConversationScore / RunScore rows in the shape every dashboard reads.
"""

from __future__ import annotations

from research.launcher import replay_service


def do_score_run(run_id: int) -> int:
    """(Re)score every finished conversation of a run; returns how many were scored."""
    return int(replay_service().score_run(run_id))
