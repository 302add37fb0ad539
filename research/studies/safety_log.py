"""A study's safety log: every time the platform saw that a participant may be at risk, for the research team.

Read on the study's safety page, in the API (``/api/studies/<slug>/safety-events/``) and as CSV for the
ethics report. It names participants by the pseudonym exports show and holds no words they wrote (those
are in the conversation, for researchers who open it). A withdrawn participant's events are left out like
the rest of their data. A flag never excludes anyone: what to do is the research team's decision.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db.models import QuerySet

from collection.models import SafetyEvent, Study
from datasets.pseudonyms import export_pseudonym


@dataclass(frozen=True)
class SafetyLogRow:
    at: datetime
    level: str
    source: str
    signals: list[str]
    shown: str
    choice: str
    chosen_at: datetime | None
    participant: str
    conversation_id: str | None
    turn_number: int | None
    notified_at: datetime | None
    notify_error: str


def _events(study: Study) -> QuerySet[SafetyEvent]:
    return (
        SafetyEvent.objects.filter(study=study, participant__withdrawn_at__isnull=True)
        .select_related("participant", "turn__conversation")
        .order_by("-created_at", "-id")
    )


def safety_log(study: Study) -> list[SafetyLogRow]:
    """The study's events, newest first (one query)."""
    return [
        SafetyLogRow(
            at=event.created_at,
            level=event.level,
            source=event.source,
            signals=list(event.signals),
            shown=event.shown,
            choice=event.choice,
            chosen_at=event.chosen_at,
            participant=export_pseudonym(event.participant.pseudonym),
            conversation_id=event.turn.conversation.conversation_id if event.turn else None,
            turn_number=event.turn.turn_number if event.turn else None,
            notified_at=event.notified_at,
            notify_error=event.notify_error,
        )
        for event in _events(study)
    ]


def flagged_participants(study: Study) -> dict[int, str]:
    """The most serious level each participant of ``study`` was flagged at (by participant id)."""
    levels: dict[int, str] = {}
    for participant_id, level in _events(study).values_list("participant_id", "level"):
        if levels.get(participant_id) != SafetyEvent.Level.URGENT:
            levels[participant_id] = level
    return levels


def level_counts(rows: list[SafetyLogRow]) -> dict[str, int]:
    return {level: sum(1 for row in rows if row.level == level) for level in SafetyEvent.Level.values}


CSV_COLUMNS = list(SafetyLogRow.__dataclass_fields__)


def safety_csv(rows: list[SafetyLogRow]) -> str:
    """The log as CSV (one row per event, signals joined by ';'), for the ethics report."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for row in rows:
        record = asdict(row)
        record["signals"] = ";".join(row.signals)
        writer.writerow({k: "" if v is None else v for k, v in record.items()})
    return out.getvalue()
