"""Scoring a stored evaluation run into ConversationScore / RunScore rows: the scoring engine's database side.

One function serves model runs (at the end of a replay), human-baseline runs
(after each rated conversation) and explicit re-scoring. It is idempotent: the
rows always reflect exactly the run's current finished, non-withdrawn outputs,
so scoring twice, or after a participant withdraws, leaves no stale numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from django.utils import timezone

from attunebench import canonical as cf
from attunebench.metrics.aggregate import aggregate_rows
from attunebench.metrics.engine import ConversationScore as EngineScore
from attunebench.metrics.engine import ScoringResult, score_runs
from attunebench.metrics.results import to_json
from datasets.exchange import conversation_to_canonical, usable_conversations, with_export_relations
from scoring.models import ConversationScore, EvaluationRun, RunConversation, RunScore
from scoring.signals import run_scored

SCORE_BATCH = 500  # conversation scores per INSERT ... ON CONFLICT statement


def do_score_evaluation_run(run_id: int, scored: Mapping[str, EngineScore] | None = None) -> int:
    """(Re)score every finished conversation of a run; returns how many conversations were scored.

    ``scored``: scores the caller already made of this run's stored outputs against the stored conversations'
    content, by conversation id (``attune eval`` scores each conversation as it finishes, and has checked its
    files hold what the database holds). When it covers every conversation to score, the conversations are not
    read back and scored again; which ones count (withdrawn, quality-excluded) is still the database's answer.
    """
    run = EvaluationRun.objects.get(pk=run_id)
    outputs = dict(
        RunConversation.objects.filter(run=run, status=RunConversation.Status.DONE, output__isnull=False).values_list(
            "conversation_id", "output"
        )
    )
    # Withdrawn and quality-excluded conversations drop out here, so their outputs are never scored.
    usable = usable_conversations().filter(pk__in=list(outputs))
    pk_by_id: dict[str, int] = {}
    if scored is not None:
        pk_by_id = {conversation_id: pk for pk, conversation_id in usable.values_list("pk", "conversation_id")}
    if scored is not None and all(conversation_id in scored for conversation_id in pk_by_id):
        result = ScoringResult(
            scores=sorted(
                (scored[conversation_id] for conversation_id in pk_by_id),
                key=lambda s: (s.record.em_model, s.record.mode, s.record.conversationId),
            ),
            skipped=[],
        )
    else:
        conversations = with_export_relations(usable)
        documents = {c.pk: conversation_to_canonical(c, include_model_identity=True) for c in conversations}
        runs = [cf.parse_run(outputs[pk], source=f"run {run_id}/{doc.conversationId}") for pk, doc in documents.items()]
        result = score_runs(documents.values(), runs)
        pk_by_id = {doc.conversationId: pk for pk, doc in documents.items()}
    with transaction.atomic():
        rows = [
            ConversationScore(
                run=run,
                conversation_id=pk_by_id[score.record.conversationId],
                composite_score=score.record.composite_score,
                coverage=score.record.coverage,
                # None only from a scorer that predates post-conversation coverage.
                post_coverage=score.record.post_coverage,
                metrics=to_json(score.record.model_copy(update={"details": score.details})),
            )
            for score in result.scores
        ]
        # One upsert per batch instead of a query or two per conversation: the rows are written whole.
        ConversationScore.objects.bulk_create(
            rows,
            batch_size=SCORE_BATCH,
            update_conflicts=True,
            unique_fields=["run", "conversation"],
            update_fields=["composite_score", "coverage", "post_coverage", "metrics"],
        )
        scored_pks = [row.conversation_id for row in rows]
        ConversationScore.objects.filter(run=run).exclude(conversation_id__in=scored_pks).delete()
        aggregates = aggregate_rows([s.record for s in result.scores])
        if aggregates:
            RunScore.objects.update_or_create(
                run=run,
                defaults={
                    "composite_score": aggregates[0].composite_score,
                    "metrics": to_json(aggregates[0]),
                    "scored_at": timezone.now(),
                },
            )
        else:
            RunScore.objects.filter(run=run).delete()
        # Announced after commit: a receiver that recomputes the dashboard must read the new scores.
        transaction.on_commit(lambda: run_scored.send(sender=EvaluationRun, run_id=run_id))
    return len(result.scores)
