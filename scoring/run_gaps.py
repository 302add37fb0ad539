"""A stored run's gaps: the conversations whose turns failed or rest on defaults, listed by the kind of failure.

A conversation has a gap when its replay gave no output at all (status failed) or its output lists failed calls
(``failed_calls``: a turn left out, a post-conversation answer missing, the judge's fields nulled). Each failed
call is put under one of the four kinds a researcher acts on (``attunebench.replay.failures.REASONS``). A done
run with gaps is "done with gaps" (``EvaluationRun.gaps``), and retrying replays only these conversations: their
calls that were answered come back from the call cache, so only the failed ones reach the provider again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from attunebench.replay.failures import REASONS, one_line, reason_of_record
from datasets.exchange import withdrawn_conversations
from scoring.models import RunConversation

#: Gaps shown per kind on a run's page (the count says how many there are in all).
SHOWN_PER_REASON = 50


@dataclass(frozen=True)
class Gap:
    """One failed call of a stored run (or a conversation that gave no output at all: ``call`` is "replay")."""

    conversation_id: str
    turn_number: int | None
    call: str
    error: str
    reason: str


@dataclass(frozen=True)
class GapGroup:
    reason: str
    count: int
    gaps: list[Gap]


def _failed_calls(row: RunConversation) -> list[dict[str, Any]]:
    output = row.output if isinstance(row.output, dict) else {}
    return [c for c in output.get("failed_calls") or [] if isinstance(c, dict)]


def _rows(run_id: int) -> QuerySet[RunConversation]:
    """The run's conversations that may have a gap (failed, or done with a failed call listed), a withdrawn
    participant's left out as from every research surface: one query, whatever the run's size."""
    return (
        RunConversation.objects.filter(run_id=run_id)
        .filter(
            Q(status=RunConversation.Status.FAILED)
            | Q(status=RunConversation.Status.DONE, output__failed_calls__0__isnull=False)
        )
        .exclude(conversation__in=withdrawn_conversations())
        .select_related("conversation")
        .order_by("pk")
    )


def gapped_rows(run_id: int) -> list[RunConversation]:
    """The run's conversations with a gap: failed outright, or with failed calls in their output."""
    return [row for row in _rows(run_id) if row.status == RunConversation.Status.FAILED or _failed_calls(row)]


def count_gaps(run_id: int) -> int:
    """How many of the run's conversations have a gap (``EvaluationRun.gaps``)."""
    return len(gapped_rows(run_id))


def run_gaps(run_id: int) -> list[GapGroup]:
    """The run's failed calls grouped by kind, in ``REASONS`` order, at most ``SHOWN_PER_REASON`` listed each."""
    by_reason: dict[str, list[Gap]] = {reason: [] for reason in REASONS}
    for row in gapped_rows(run_id):
        conversation_id = row.conversation.conversation_id
        calls = _failed_calls(row)
        if not calls:  # no output at all: the replay itself failed (its reason is in the error text)
            calls = [{"turnNumber": None, "call": "replay", "error": row.error or "no output", "kind": "no_answer"}]
        for call in calls:
            reason = reason_of_record(call)
            turn = call.get("turnNumber")
            by_reason[reason].append(
                Gap(
                    conversation_id=conversation_id,
                    turn_number=turn if isinstance(turn, int) else None,
                    call=str(call.get("call") or ""),
                    error=one_line(str(call.get("error") or ""), 300),
                    reason=reason,
                )
            )
    return [GapGroup(reason, len(gaps), gaps[:SHOWN_PER_REASON]) for reason, gaps in by_reason.items() if gaps]
