"""A withdrawn participant's conversations leave every score: the runs that held them are re-scored.

``do_score_evaluation_run`` scores only non-withdrawn conversations and
deletes the rows of the others, so re-scoring each affected run after the
withdrawal commits leaves the leaderboard, the analyses and the run pages as
if the conversation had never been scored (its n included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Q

from scoring.models import EvaluationRun


def runs_holding(conversation_pks: Sequence[int]) -> list[int]:
    """Runs with a score or an output of any of these conversations."""
    return list(
        EvaluationRun.objects.filter(
            Q(conversation_scores__conversation_id__in=conversation_pks)
            | Q(conversation_outputs__conversation_id__in=conversation_pks)
        )
        .distinct()
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def rescore_after_withdrawal(sender: Any, conversation_pks: Sequence[int], **kwargs: Any) -> None:
    """Receiver of ``collection.signals.participant_withdrawn``: enqueue one re-score of all affected runs.

    One task for all of them, because a conversation is typically replayed by every (model, mode, strategy) run
    and scoring them together reads its ground truth once.
    """
    from collection.task_queue import enqueue
    from scoring.tasks import rescore_runs

    run_ids = list(runs_holding(conversation_pks))

    def queue_all() -> None:
        enqueue(rescore_runs, run_ids)  # kept in the database while the broker is away

    if run_ids:
        transaction.on_commit(queue_all)
