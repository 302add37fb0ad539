"""Storing and reading the call records of a replay.

The replay core returns a ``CallRecord`` per request on its result; this
module writes them as ``CallTranscript`` rows and reads them back for the
researcher page and the API, which show the same dictionaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import PositiveIntegerField, Value

from attunebench.replay.transcript import CallRecord
from scoring.models import CallTranscript, RunConversation

FIELDS = (
    "sequence",
    "call_type",
    "turn_number",
    "role",
    "model",
    "attempt",
    "messages",
    "raw_reply",
    "parsed",
    "parse_error",
    "error",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "transport_attempts",
    "cached",
)


def call_values(records: Sequence[CallRecord]) -> list[tuple[Any, ...]]:
    """Each call's column values (``FIELDS``) as the database takes them, for ``insert_call_values``: made as
    each conversation of a replay finishes, so storing the run at its end is only the inserts."""
    by_name = {f.name: f for f in CallTranscript._meta.concrete_fields}
    fields = [by_name[name] for name in FIELDS]
    return [
        tuple(f.get_db_prep_save(getattr(r, name), connection) for name, f in zip(FIELDS, fields, strict=True))
        for r in records
    ]


def insert_call_values(pairs: Sequence[tuple[int, Sequence[tuple[Any, ...]]]]) -> int:
    """Store the calls (``call_values``) of run-conversations that have none stored yet (a run being
    recorded), as one statement run for every row: no per-row work left but the database's."""
    by_name = {f.name: f for f in CallTranscript._meta.concrete_fields}
    columns = [str(by_name[name].column) for name in ("run_conversation", *FIELDS)]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(CallTranscript._meta.db_table)} ({', '.join(quote(c) for c in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )
    rows = [(run_conversation_id, *values) for run_conversation_id, calls in pairs for values in calls]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)
    return len(rows)


def save_call_records(run_conversation_id: int, records: Sequence[CallRecord]) -> int:
    """Replace the stored calls of a run-conversation by ``records``; returns how many were stored.

    Each row's ``sequence`` goes in as an expression (``Value``, the same number). Why: Django 5.2 inserts
    several rows of plain values on PostgreSQL as ``UNNEST`` of one array per column, and psycopg escapes
    every array element in Python; for the messages' JSON (quotes throughout) that took a worker two to
    two and a half times the CPU of the ``INSERT ... VALUES`` that rows holding an expression get instead
    (bench/transcript_insert.py: 17 ms against 7 ms for a conversation of 33 calls).
    """
    rows = [
        CallTranscript(run_conversation_id=run_conversation_id, **{name: getattr(r, name) for name in FIELDS})
        for r in records
    ]
    for row in rows:
        row.sequence = Value(row.sequence, output_field=PositiveIntegerField())
    with transaction.atomic():
        CallTranscript.objects.filter(run_conversation_id=run_conversation_id).delete()
        CallTranscript.objects.bulk_create(rows, batch_size=200)
    return len(rows)


def call_dicts(item: RunConversation) -> list[dict[str, Any]]:
    """The stored calls of a run-conversation, in the order they started (one query)."""
    return [
        {name: getattr(row, name) for name in FIELDS}
        for row in CallTranscript.objects.filter(run_conversation=item).order_by("sequence")
    ]


def transcript_totals(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sums over calls: requests sent, cached answers, tokens, cost (None when a price is unknown), latency."""
    sent = [c for c in calls if not c["cached"]]
    # A request the provider never answered (its error, no reply) is not billed and has no price to know:
    # only a reply without a price makes the total unknown.
    costs = [c["cost_usd"] for c in sent if c["raw_reply"] or not c["error"]]
    return {
        "calls": len(calls),
        "sent": len(sent),
        "cached": len(calls) - len(sent),
        "retried": sum(1 for c in calls if c["attempt"] > 1 or c["transport_attempts"] > 1),
        "failed": sum(1 for c in calls if c["error"] or c["parse_error"]),
        "prompt_tokens": sum(c["prompt_tokens"] for c in sent),
        "completion_tokens": sum(c["completion_tokens"] for c in sent),
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8),
        "latency_s": round(sum(c["latency_s"] or 0.0 for c in sent), 6),
    }


def run_conversation_transcript(run_id: int, conversation_pk: int) -> dict[str, Any]:
    """What the transcript page and the API show: the output's status and every call, with totals.

    Two queries: the run-conversation (None when the run has no output for it)
    and its calls.
    """
    item = RunConversation.objects.filter(run_id=run_id, conversation_id=conversation_pk).first()
    calls = call_dicts(item) if item is not None else []
    return {
        "status": item.status if item is not None else None,
        "calls": calls,
        "totals": transcript_totals(calls),
    }
