"""Scoring stored evaluation runs into ConversationScore / RunScore rows: the scoring engine's database side.

One function serves model runs (at the end of a replay), human-baseline runs
(after each rated conversation) and explicit re-scoring. It is idempotent: the
rows always reflect exactly the runs' current finished, non-withdrawn outputs,
so scoring twice, or after a participant withdraws, leaves no stale numbers.

A study replays each conversation in many runs (every model × mode × PANAS
strategy), so several runs are scored in one pass over their conversations:
conversations are read in batches, each one's ground truth is read and
prepared once for every run that replayed it, the runs' outputs for the batch
are read in one query, and the scores are written in batched upserts. Memory
holds one batch plus, per scored output, only what the run's aggregate needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial

from django.db import connection, transaction
from django.utils import timezone

from attunebench import canonical as cf
from attunebench.metrics.aggregate import aggregate_rows, folded_record
from attunebench.metrics.engine import ConversationScore as EngineScore
from attunebench.metrics.engine import prepare_conversation, score_conversation_output
from attunebench.metrics.results import ConversationRecord, to_json
from collection.models import Conversation
from datasets.exchange import conversation_to_canonical, usable_conversations, with_export_relations
from scoring.models import ConversationScore, EvaluationRun, RunConversation, RunScore
from scoring.signals import run_scored

SCORE_BATCH = 500  # conversation scores per INSERT ... ON CONFLICT batch
# (run pk, conversation pk, composite score, coverage, post coverage, metrics): one ConversationScore row.
ScoreRow = tuple[int, int, float, float, float | None, ConversationRecord]
CONVERSATION_BATCH = 100  # conversations whose ground truth is held at once while their runs are scored


def do_score_evaluation_run(run_id: int, scored: Mapping[str, EngineScore] | None = None) -> int:
    """(Re)score every finished conversation of a run; returns how many conversations were scored.

    ``scored``: scores the caller already made of this run's stored outputs against the stored conversations'
    content, by conversation id (``attune eval`` scores each conversation as it finishes, and has checked its
    files hold what the database holds). When it covers every conversation to score, the conversations are not
    read back and scored again; which ones count (withdrawn, quality-excluded) is still the database's answer.
    """
    if scored is not None:
        finished = RunConversation.objects.filter(
            run_id=run_id, status=RunConversation.Status.DONE, output__isnull=False
        ).values("conversation_id")
        # Withdrawn and quality-excluded conversations drop out here, as in the full pass.
        usable = list(
            usable_conversations().filter(pk__in=finished).order_by("pk").values_list("pk", "conversation_id")
        )
        if all(conversation_id in scored for _, conversation_id in usable):
            EvaluationRun.objects.get(pk=run_id)
            return _store_scores(run_id, [(pk, scored[conversation_id]) for pk, conversation_id in usable])
    return do_score_evaluation_runs([run_id])


def _store_scores(run_id: int, scores: list[tuple[int, EngineScore]]) -> int:
    """Write one run's ready scores, in conversation order as the full pass writes them, and its aggregate."""
    records = [folded_record(score.record) for _, score in scores]
    rows = [_score_row(run_id, pk, score) for pk, score in scores]
    with transaction.atomic():
        for start in range(0, len(rows), SCORE_BATCH):
            _upsert(rows[start : start + SCORE_BATCH])
        _finish_run(run_id, [pk for pk, _ in scores], records)
    return len(rows)


def do_score_evaluation_runs(run_ids: Sequence[int], batch: int = CONVERSATION_BATCH) -> int:
    """(Re)score every finished conversation of each run, in one pass; returns how many outputs were scored.

    Raises ``EvaluationRun.DoesNotExist`` when a run id names no run. All the
    runs' new scores commit together, and ``run_scored`` is sent for each run
    after the commit.
    """
    ids = sorted(set(run_ids))
    found = set(EvaluationRun.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if missing := [pk for pk in ids if pk not in found]:
        raise EvaluationRun.DoesNotExist(f"no evaluation run {missing[0]}")
    finished = RunConversation.objects.filter(run_id__in=ids, status=RunConversation.Status.DONE, output__isnull=False)
    # Withdrawn and quality-excluded conversations drop out here, so their outputs are never scored.
    conversation_pks = list(
        usable_conversations()
        .filter(pk__in=finished.values("conversation_id"))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    records: dict[int, list[ConversationRecord]] = {pk: [] for pk in ids}
    scored: dict[int, list[int]] = {pk: [] for pk in ids}
    with transaction.atomic():
        rows: list[ScoreRow] = []
        for start in range(0, len(conversation_pks), batch):
            for row in _score_chunk(ids, conversation_pks[start : start + batch], records, scored):
                rows.append(row)
                if len(rows) == SCORE_BATCH:
                    _upsert(rows)
                    rows = []
        _upsert(rows)
        for run_id in ids:
            _finish_run(run_id, scored[run_id], records[run_id])
    return sum(len(pks) for pks in scored.values())


def _finish_run(run_id: int, scored_pks: list[int], records: list[ConversationRecord]) -> None:
    """Drop the run's scores of conversations no longer scored, store its aggregate, announce it after commit."""
    ConversationScore.objects.filter(run_id=run_id).exclude(conversation_id__in=scored_pks).delete()
    aggregates = aggregate_rows(records)
    if aggregates:
        RunScore.objects.update_or_create(
            run_id=run_id,
            defaults={
                "composite_score": aggregates[0].composite_score,
                "metrics": to_json(aggregates[0]),
                "scored_at": timezone.now(),
            },
        )
    else:
        RunScore.objects.filter(run_id=run_id).delete()
    # Announced after commit: a receiver that recomputes the dashboard must read the new scores.
    transaction.on_commit(partial(run_scored.send, sender=EvaluationRun, run_id=run_id))


def _score_chunk(
    run_ids: list[int],
    chunk: list[int],
    records: dict[int, list[ConversationRecord]],
    scored: dict[int, list[int]],
) -> Iterator[ScoreRow]:
    """Score every run's outputs for a batch of conversations against their ground truth, read once."""
    documents = {
        c.pk: conversation_to_canonical(c, include_model_identity=True)
        for c in with_export_relations(Conversation.objects.filter(pk__in=chunk))
    }
    prepared = {pk: prepare_conversation(doc) for pk, doc in documents.items()}
    outputs = (
        RunConversation.objects.filter(
            run_id__in=run_ids,
            conversation_id__in=chunk,
            status=RunConversation.Status.DONE,
            output__isnull=False,
        )
        .order_by("run_id", "conversation_id")
        .values_list("run_id", "conversation_id", "output")
    )
    for run_id, pk, output in outputs.iterator(chunk_size=SCORE_BATCH):
        target = prepared[pk]
        run = cf.parse_run(output, source=f"run {run_id}/{target.conversation.conversationId}")
        if run.conversationId != target.conversation.conversationId:
            continue  # an output naming another conversation is not this conversation's score
        score = score_conversation_output(target, run)
        records[run_id].append(folded_record(score.record))
        scored[run_id].append(pk)
        yield _score_row(run_id, pk, score)


def _score_row(run_id: int, pk: int, score: EngineScore) -> ScoreRow:
    """One ConversationScore row of a scored output, its details kept in the stored metrics."""
    return (
        run_id,
        pk,
        score.record.composite_score,
        score.record.coverage,
        # None only from a scorer that predates post-conversation coverage.
        score.record.post_coverage,
        score.record.model_copy(update={"details": score.details}),
    )


def _upsert(rows: list[ScoreRow]) -> None:
    """Write score rows whole, one statement batch per call instead of a query or two per conversation.

    On PostgreSQL the rows go through ``executemany`` with each metrics record passed as JSON text: Django's
    ``bulk_create`` would send them as one array literal, whose escaping in Python costs more than the scoring.
    """
    if not rows:
        return
    if connection.vendor != "postgresql":
        ConversationScore.objects.bulk_create(
            [
                ConversationScore(
                    run_id=r[0],
                    conversation_id=r[1],
                    composite_score=r[2],
                    coverage=r[3],
                    post_coverage=r[4],
                    metrics=to_json(r[5]),
                )
                for r in rows
            ],
            update_conflicts=True,
            unique_fields=["run", "conversation"],
            update_fields=["composite_score", "coverage", "post_coverage", "metrics"],
        )
        return
    table = connection.ops.quote_name(ConversationScore._meta.db_table)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (run_id, conversation_id, composite_score, coverage, post_coverage, metrics) "
            "VALUES (%s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT (run_id, conversation_id) DO UPDATE SET "
            "composite_score = EXCLUDED.composite_score, coverage = EXCLUDED.coverage, "
            "post_coverage = EXCLUDED.post_coverage, metrics = EXCLUDED.metrics",
            # The same JSON as to_json, written by pydantic's serialiser straight to text.
            [(*r[:5], r[5].model_dump_json()) for r in rows],
        )
