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

``entrant`` reads all four (participant, study, latest conversation, its last turn) in one statement: each
query costs a request about 0.4 ms of CPU in the driver and Django's row handling, whatever its size, and
every participant request starts here. The columns are converted by each field's own database converters,
exactly as a queryset converts them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from django.db import connection, models

from collection.models import Consent, Conversation, Participant, ParticipantProfile, Study, Turn


def sql_table(model: type[models.Model]) -> str:
    """A model's table name, quoted for the default database (fixed SQL built from the models' own names)."""
    return connection.ops.quote_name(model._meta.db_table)


def sql_column(model: type[models.Model], name: str) -> str:
    """A model field's column name, quoted for the default database."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field) and field.column, f"{model.__name__}.{name} is not a column"
    return connection.ops.quote_name(field.column)


@functools.cache
def _statements() -> dict[str, str]:
    """The SQL of each read (the default database's quoting; Attune uses one database)."""
    table, column = sql_table, sql_column

    participant_id = column(Participant, "id")
    study_id = column(Study, "id")
    consented = (
        f"EXISTS (SELECT 1 FROM {table(Consent)} cn"
        f" INNER JOIN {table(Study)} cs ON cs.{study_id} = p.{column(Participant, 'study')}"
        f" WHERE cn.{column(Consent, 'participant')} = p.{participant_id}"
        f" AND cn.{column(Consent, 'version')} = cs.{column(Study, 'consent_version')})"
    )
    profiled = (
        f"EXISTS (SELECT 1 FROM {table(ParticipantProfile)} r"
        f" WHERE r.{column(ParticipantProfile, 'participant')} = p.{participant_id})"
    )
    return {
        "consented": consented,
        "profiled": profiled,
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
    """A study link's participant (with their study attached) and what every page needs first.

    ``conversation`` is the latest conversation that was not withdrawn (its participant attached) and ``last``
    its last turn (its conversation attached), each None when there is none.
    """

    participant: Participant
    consented: bool  # to the study's current consent version
    profiled: bool  # has a profile
    conversation: Conversation | None = None
    last: Turn | None = None


Converter = Callable[[Any, Any, Any], Any]


class _Columns(NamedTuple):
    """One model's columns in the entry statement: its fields in ``concrete_fields`` order, each with the
    converters a queryset would apply to it."""

    model: type[models.Model]
    attnames: list[str]
    converters: list[tuple[Any, list[Converter]]]  # (the column expression, its converters)


def _columns(model: type[models.Model], alias: str) -> tuple[str, _Columns]:
    q = connection.ops.quote_name
    fields = list(model._meta.concrete_fields)
    select = ", ".join(f"{alias}.{q(str(f.column))}" for f in fields)
    converters = []
    for f in fields:
        column = f.get_col(alias)
        converters.append((column, connection.ops.get_db_converters(column) + column.get_db_converters(connection)))
    return select, _Columns(model, [f.attname for f in fields], converters)


@functools.cache
def _entry_statement() -> tuple[str, list[_Columns]]:
    """The participant (with consent and profile), study, latest conversation and its last turn: one row."""
    table, column = sql_table, sql_column

    statements = _statements()
    consented, profiled = statements["consented"], statements["profiled"]
    layouts = []
    selects = []
    for model, alias in ((Participant, "p"), (Study, "s"), (Conversation, "c"), (Turn, "t")):
        select, layout = _columns(model, alias)
        selects.append(select)
        layouts.append(layout)
    conversation, turn = table(Conversation), table(Turn)
    latest_conversation = (
        f"SELECT c2.{column(Conversation, 'id')} FROM {conversation} c2"
        f" WHERE c2.{column(Conversation, 'participant')} = p.{column(Participant, 'id')}"
        f" AND c2.{column(Conversation, 'status')} <> %s"
        f" ORDER BY c2.{column(Conversation, 'started_at')} DESC, c2.{column(Conversation, 'id')} DESC LIMIT 1"
    )
    last_turn = (
        f"SELECT t2.{column(Turn, 'id')} FROM {turn} t2"
        f" WHERE t2.{column(Turn, 'conversation')} = c.{column(Conversation, 'id')}"
        f" ORDER BY t2.{column(Turn, 'turn_number')} DESC LIMIT 1"
    )
    sql = (
        f"SELECT {', '.join(selects)}, {consented} AS entry_consented, {profiled} AS entry_profiled"
        f" FROM {table(Participant)} p"
        f" INNER JOIN {table(Study)} s ON s.{column(Study, 'id')} = p.{column(Participant, 'study')}"
        f" LEFT JOIN {conversation} c ON c.{column(Conversation, 'id')} = ({latest_conversation})"
        f" LEFT JOIN {turn} t ON t.{column(Turn, 'id')} = ({last_turn})"
        f" WHERE p.{column(Participant, 'token_hash')} = %s"
    )
    return sql, layouts


def _instance(layout: _Columns, values: Sequence[Any]) -> Any:
    converted = []
    for value, (expression, converters) in zip(values, layout.converters, strict=True):
        for convert in converters:
            value = convert(value, expression, connection)
        converted.append(value)
    return layout.model.from_db(connection.alias, layout.attnames, converted)


def entrant(token_hash: str) -> Entrant | None:
    """Who the link hashing to ``token_hash`` belongs to, if it belongs to a participant of a study."""
    sql, layouts = _entry_statement()
    with connection.cursor() as cursor:
        cursor.execute(sql, [Conversation.Status.WITHDRAWN.value, token_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    parts: list[Any] = []
    start = 0
    for layout in layouts:
        values = row[start : start + len(layout.attnames)]
        start += len(layout.attnames)
        parts.append(_instance(layout, values) if values[0] is not None else None)  # the primary key is first
    participant, study, conversation, last = parts
    participant.study = study
    if conversation is not None:
        conversation.participant = participant
    if last is not None:
        last.conversation = conversation
    # the two EXISTS columns (SQLite answers 0 or 1, Postgres a bool)
    consented, profiled = row[start], row[start + 1]
    return Entrant(participant, bool(consented), bool(profiled), conversation, last)


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
