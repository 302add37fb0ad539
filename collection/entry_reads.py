"""The reads every participant request starts with: the link's participant, their study, conversation, last turn.

Every participant page and form post makes these reads before anything else, so they are the hottest code of
the site. Through querysets (three, with joins and subqueries) they cost about 6.4 ms of CPU per request on
Postgres, nearly all of it Django building the same SQL again each time; under load that was about
30% of the web server's CPU. Here each query is a fixed SQL string, built once per process from the models' own
table and column names, and loaded with ``Manager.raw()``, which converts every column as a queryset would:
the same rows for about 2.4 ms, though in four simpler queries (a raw query loads one model).

Related objects are attached as the querysets they replace attached them (a participant's study, a
conversation's participant, a turn's conversation), so callers read them without another query. A
conversation's topic and original model load on first use: the annotation pages, the busiest, never read them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from django.db import connection, models

from collection.models import Consent, Conversation, Participant, ParticipantProfile, Study, Turn


@functools.cache
def _statements() -> dict[str, str]:
    """The SQL of each read (the default database's quoting; Attune uses one database)."""
    q = connection.ops.quote_name

    def table(model: type[models.Model]) -> str:
        return q(model._meta.db_table)

    def column(model: type[models.Model], name: str) -> str:
        field = model._meta.get_field(name)
        assert isinstance(field, models.Field) and field.column, f"{model.__name__}.{name} is not a column"
        return q(field.column)

    participant_id = column(Participant, "id")
    study_id = column(Study, "id")
    consented = (
        f"EXISTS (SELECT 1 FROM {table(Consent)} c"
        f" INNER JOIN {table(Study)} s ON s.{study_id} = p.{column(Participant, 'study')}"
        f" WHERE c.{column(Consent, 'participant')} = p.{participant_id}"
        f" AND c.{column(Consent, 'version')} = s.{column(Study, 'consent_version')})"
    )
    profiled = (
        f"EXISTS (SELECT 1 FROM {table(ParticipantProfile)} r"
        f" WHERE r.{column(ParticipantProfile, 'participant')} = p.{participant_id})"
    )
    return {
        "participant": (
            f"SELECT p.*, {consented} AS entry_consented, {profiled} AS entry_profiled FROM {table(Participant)} p"
            f" WHERE p.{column(Participant, 'token_hash')} = %s AND p.{column(Participant, 'study')} IS NOT NULL"
        ),
        "study": f"SELECT * FROM {table(Study)} WHERE {study_id} = %s",
        "conversation": (
            f"SELECT * FROM {table(Conversation)} WHERE {column(Conversation, 'participant')} = %s"
            f" AND {column(Conversation, 'status')} <> %s"
            f" ORDER BY {column(Conversation, 'started_at')} DESC, {column(Conversation, 'id')} DESC LIMIT 1"
        ),
        "last_turn": (
            f"SELECT * FROM {table(Turn)} WHERE {column(Turn, 'conversation')} = %s"
            f" ORDER BY {column(Turn, 'turn_number')} DESC LIMIT 1"
        ),
    }


class Entrant(NamedTuple):
    """A study link's participant (with their study attached) and the two facts every page needs first."""

    participant: Participant
    consented: bool  # to the study's current consent version
    profiled: bool  # has a profile


def entrant(token_hash: str) -> Entrant | None:
    """Who the link hashing to ``token_hash`` belongs to, if it belongs to a participant of a study."""
    participant = next(iter(Participant.objects.raw(_statements()["participant"], [token_hash])), None)
    if participant is None:
        return None
    participant.study = next(iter(Study.objects.raw(_statements()["study"], [participant.study_id])))
    # the two EXISTS columns, set by raw() as attributes (SQLite answers 0 or 1, Postgres a bool)
    consented, profiled = vars(participant).pop("entry_consented"), vars(participant).pop("entry_profiled")
    return Entrant(participant, bool(consented), bool(profiled))


def active_conversation(participant: Participant) -> Conversation | None:
    """The participant's latest conversation that was not withdrawn, if any (a study has one per participant)."""
    rows = Conversation.objects.raw(
        _statements()["conversation"], [participant.pk, Conversation.Status.WITHDRAWN.value]
    )
    conversation = next(iter(rows), None)
    if conversation is not None:
        conversation.participant = participant
    return conversation


def last_turn(conversation: Conversation) -> Turn | None:
    """The conversation's turn with the highest number, if it has one."""
    turn = next(iter(Turn.objects.raw(_statements()["last_turn"], [conversation.pk])), None)
    if turn is not None:
        turn.conversation = conversation
    return turn
