"""CPU of storing one conversation's call transcript on PostgreSQL: part of a worker's CPU per call.

A worker stores every call of a replayed conversation as ``CallTranscript`` rows
(``scoring.transcripts.save_call_records``) once the conversation is done. The
records here are those of a real replay: the 8-turn synthetic conversations of
``bench/replay_throughput.py``, replayed through the pure core with an offline
baseline, whose prompts are the ones a model gets (about 3 KB of JSON per call).

Two ways of inserting the same rows (checked to store the same thing), each
timed in this process (user + system CPU) over ``--rounds`` saves, three times
in turn so that a drift in the machine's speed touches both; the best of the
three is printed:

- values_ms   ``save_call_records`` as it is: one ``INSERT ... VALUES`` per batch
- unnest_ms   plain ``bulk_create``: Django 5.2's ``UNNEST`` of one array per column,
              whose elements psycopg escapes in Python

Setup: a database of its own (``--database``), a fresh copy of the migrated template.
Usage: python bench/transcript_insert.py [--rounds 40 --database URL]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_db import fresh_database  # noqa: E402
from figures import figures_line  # noqa: E402

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/attune_transcript_bench"


def replayed_records(turns: int) -> list:
    """The call records of one replayed synthetic conversation (offline baseline: nothing is sent)."""
    from attunebench.replay.llm import spec_from_name
    from attunebench.replay.protocol import ReplayConfig
    from attunebench.replay.run import make_replayer
    from attunebench.synth import synth_conversations

    conversations = synth_conversations(4, seed=2024, min_turns=turns, max_turns=turns)
    replayer = make_replayer(spec_from_name("baseline:lexicon"), ReplayConfig(), dataset=conversations)
    (result,) = asyncio.run(replayer.replay_many(conversations[:1]))
    return list(result.calls)


def cpu_ms(save: Callable[[int, Sequence], object], item_id: int, records: list, rounds: int) -> float:
    started = time.process_time()
    for _ in range(rounds):
        save(item_id, records)
    return 1000 * (time.process_time() - started) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU of storing one conversation's call transcript")
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="2 saves of 2 turns: the path, not the timing")
    options = parser.parse_args()
    if options.smoke:
        options.rounds, options.turns = 2, 2
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | {"DATABASE_URL": options.database}
    os.environ.pop("REDIS_URL", None)  # no Redis: the insert alone is measured
    fresh_database(options.database, env)

    import json

    from django.db import transaction

    from attunebench.synth import synth_conversations
    from collection.models import Conversation
    from datasets.exchange import import_documents
    from scoring.models import CallTranscript, EvaluatedModel, EvaluationRun, RunConversation
    from scoring.transcripts import FIELDS, call_dicts, save_call_records

    (document,) = synth_conversations(1, seed=7, min_turns=2, max_turns=2)
    imported = import_documents([(document.conversationId, document)])
    assert imported.ok, imported.problems
    run = EvaluationRun.objects.create(evaluated_model=EvaluatedModel.objects.create(name="bench-model"))
    conversation = Conversation.objects.get(conversation_id=document.conversationId)
    item = RunConversation.objects.create(run=run, conversation=conversation)
    records = replayed_records(options.turns)

    def unnest(item_id: int, records: Sequence) -> None:
        rows = [CallTranscript(run_conversation_id=item_id, **{n: getattr(r, n) for n in FIELDS}) for r in records]
        with transaction.atomic():
            CallTranscript.objects.filter(run_conversation_id=item_id).delete()
            CallTranscript.objects.bulk_create(rows, batch_size=200)

    # Both store the same rows.
    save_call_records(item.pk, records)
    stored = call_dicts(item)
    unnest(item.pk, records)
    assert call_dicts(item) == stored, "the two inserts stored different rows"

    values_runs, unnest_runs = [], []
    for _ in range(3):
        values_runs.append(cpu_ms(save_call_records, item.pk, records, options.rounds))
        unnest_runs.append(cpu_ms(unnest, item.pk, records, options.rounds))
    values_ms, unnest_ms = min(values_runs), min(unnest_runs)
    text_kb = sum(len(json.dumps(r.messages)) + len(r.raw_reply or "") for r in records) / 1024
    load = os.getloadavg()
    print(
        f"one conversation of {options.turns} turns: {len(records)} calls, {text_kb:.0f} KiB of messages and "
        f"replies; best of 3 x {options.rounds} saves; load average {load[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"  save_call_records (INSERT ... VALUES): {values_ms:.2f} ms CPU per conversation")
    print(f"  plain bulk_create (UNNEST arrays):     {unnest_ms:.2f} ms CPU per conversation")
    print(f"  ratio unnest / values: {unnest_ms / values_ms:.2f}")
    print(
        figures_line(
            "transcript_insert",
            values_ms=values_ms,
            unnest_ms=unnest_ms,
            ratio=unnest_ms / values_ms,
            calls=len(records),
            load1=load[0],
        )
    )


if __name__ == "__main__":
    main()
