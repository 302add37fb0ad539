"""Scoring a stored run: the Celery task stores scores and re-scores idempotently."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.utils import timezone

from collection.models import Conversation, Participant
from datasets.exchange import import_paths
from scoring import tasks
from scoring.models import ConversationScore, RunScore
from scoring.replay_service import do_create_run
from scoring.run_control import start_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def scored_lexicon_run():
    assert import_paths([settings.ATTUNE_SAMPLE_DATA_DIR]).ok
    run = do_create_run("baseline:lexicon", "default")
    start_run(run.pk)
    run.refresh_from_db()
    assert run.status == "done"
    return run


def _snapshot(run):
    rows = {
        s.conversation.conversation_id: (s.composite_score, s.coverage)
        for s in ConversationScore.objects.filter(run=run).select_related("conversation")
    }
    return rows, RunScore.objects.get(run=run).metrics


def test_the_task_rescoring_a_run_changes_nothing(scored_lexicon_run):
    before = _snapshot(scored_lexicon_run)
    assert len(before[0]) == Conversation.objects.count() == before[1]["n_conversations"]
    assert tasks.rescore_run.delay(scored_lexicon_run.pk).get() == len(before[0])
    assert _snapshot(scored_lexicon_run) == before


def test_rescoring_after_a_withdrawal_drops_that_conversation(scored_lexicon_run):
    rows, aggregate = _snapshot(scored_lexicon_run)
    conversation = Conversation.objects.filter(participant__isnull=False).order_by("conversation_id").first()
    Participant.objects.filter(pk=conversation.participant_id).update(withdrawn_at=timezone.now())

    tasks.rescore_run.delay(scored_lexicon_run.pk).get()

    new_rows, new_aggregate = _snapshot(scored_lexicon_run)
    assert set(new_rows) == set(rows) - {conversation.conversation_id}
    assert new_aggregate["n_conversations"] == aggregate["n_conversations"] - 1
    remaining = [rows[c][0] for c in new_rows]
    assert new_aggregate["composite_score"] == pytest.approx(sum(remaining) / len(remaining))


def _stored(runs):
    scores = {
        (s.run_id, s.conversation_id): (s.composite_score, s.coverage, s.post_coverage, s.metrics)
        for s in ConversationScore.objects.filter(run__in=runs)
    }
    aggregates = {s.run_id: (s.composite_score, s.metrics) for s in RunScore.objects.filter(run__in=runs)}
    return scores, aggregates


def test_runs_scored_in_one_pass_store_what_each_run_scored_alone_stores(scored_runs):
    """One pass over the conversations for several runs (ground truth read once per batch) changes no stored value,
    however the conversations are batched, and a withdrawal drops the conversation from every run."""
    from scoring.run_scoring import do_score_evaluation_runs

    alone = _stored(scored_runs)  # make_scored_run scored each run by itself
    assert len(alone[0]) == 3 * Conversation.objects.count() and len(alone[1]) == 3
    ids = [run.pk for run in scored_runs]
    for batch in (1, 4, 1000):
        assert do_score_evaluation_runs(ids, batch=batch) == len(alone[0])
        assert _stored(scored_runs) == alone

    conversation = Conversation.objects.filter(participant__isnull=False).order_by("conversation_id").first()
    Participant.objects.filter(pk=conversation.participant_id).update(withdrawn_at=timezone.now())
    assert do_score_evaluation_runs(ids, batch=4) == len(alone[0]) - 3
    scores, aggregates = _stored(scored_runs)
    assert {key for key in alone[0] if key[1] != conversation.pk} == set(scores)
    assert all(aggregates[pk][1]["n_conversations"] == alone[1][pk][1]["n_conversations"] - 1 for pk in ids)


def test_scoring_an_unknown_run_says_which(scored_runs):
    from scoring.models import EvaluationRun
    from scoring.run_scoring import do_score_evaluation_runs

    missing = max(run.pk for run in scored_runs) + 1000
    with pytest.raises(EvaluationRun.DoesNotExist, match=str(missing)):
        do_score_evaluation_runs([scored_runs[0].pk, missing])
