"""Per-conversation drill-down: an EM's predictions beside the participant's annotations, turn by turn."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from attunebench import catalogue as cat
from attunebench.canonical import RunTurn
from attunebench.metrics.engine import JudgementDetail, judgement_details
from collection.models import Conversation, PanasSurvey
from datasets.exchange import conversation_to_canonical, with_export_relations
from research.results.evaluation import stored_record
from research.studies.collection_stats import conversation_transcript
from scoring.models import ConversationScore, EvaluationRun, RunConversation


def _run_turn(em: dict[str, Any] | None) -> RunTurn | None:
    """The stored EM turn as the scorer reads it; None when absent or unreadable (then nothing is predicted)."""
    if not em:
        return None
    try:
        return RunTurn.model_validate(em)
    except ValidationError:
        return None


def drilldown(run: EvaluationRun, conversation: Conversation) -> dict[str, Any]:
    """Template context: every GT turn with the EM turn (if any), per-question agreement marks and turn metrics."""
    rc = RunConversation.objects.filter(run=run, conversation=conversation).first()
    output = (rc.output or {}) if rc else {}
    score = ConversationScore.objects.filter(run=run, conversation=conversation).first()
    record = stored_record(score.metrics) if score else {}
    turn_metrics = {t.get("turnNumber"): t for t in record.get("turns", [])} if record else {}
    em_turns = {t.get("turnNumber"): t for t in output.get("turns", [])}
    # The scorer's reading of the conversation, loaded with every relation in a fixed number of queries.
    loaded = with_export_relations(Conversation.objects.filter(pk=conversation.pk)).get()
    canonical_turns = {t.turnNumber: t for t in conversation_to_canonical(loaded).turns}
    rows = []
    for gt in conversation_transcript(conversation):
        turn = gt["turn"]
        em = em_turns.get(turn.turn_number)
        gt_emotions = {t.emotion.strip().lower() for t in gt["tags"]}
        em_tags = [
            {**t, "hit": (t.get("emotion") or "").strip().lower() in gt_emotions}
            for t in (em or {}).get("em_emotion_tags", [])
        ]
        # Targets and agreement come from the scorer itself, so the page cannot drift from the scores.
        details: dict[tuple[str, str], JudgementDetail] = {
            (d.question_id, d.variant): d for d in judgement_details(canonical_turns[turn.turn_number], _run_turn(em))
        }
        judgements = []
        for j in gt["judgements"]:
            om = details[(j.question_id, "binary_om")]
            hp = details[(j.question_id, "binary_human")]
            judgements.append(
                {
                    "j": j,
                    "question": cat.BINARY_QUESTIONS_BY_ID.get(j.question_id),
                    "om_pred": om.prediction,
                    "hp_pred": hp.prediction,
                    "om_target": om.target,
                    "hp_target": hp.target,
                    "om_match": om.correct,
                    "hp_match": hp.correct,
                }
            )
        selections = (em or {}).get("em_pairwise_selections", {})
        comparisons = [
            {
                **c,
                "pred": selections.get(str(i)),
                "match": c["c"].winner is not None and selections.get(str(i)) == c["c"].winner,
            }
            for i, c in enumerate(gt["comparisons"])
        ]
        rows.append(
            {
                **gt,
                "em": em,
                "em_tags": em_tags,
                "judgement_rows": judgements,
                "comparison_rows": comparisons,
                "metrics": turn_metrics.get(turn.turn_number),
            }
        )
    post = output.get("post_conversation") or {}
    surveys = {s.kind: s for s in conversation.panas_surveys.prefetch_related("item_responses")}
    gt_post = surveys.get(PanasSurvey.Kind.POST)
    gt_items = {r.item: r.rating for r in gt_post.item_responses.all()} if gt_post else {}
    predicted_items = ((post.get("predicted_post_panas") or {}).get("items")) or {}
    panas_rows = [(item, gt_items.get(item), predicted_items.get(item)) for item in cat.PANAS_ITEMS]
    return {
        "run": run,
        "conversation": conversation,
        "run_conversation": rc,
        "score": score,
        "record": record,
        "rows": rows,
        "post": post,
        "wide": getattr(conversation, "wide_answers", None),
        "predicted_wide": post.get("predicted_conversation_wide") or {},
        "panas_rows": panas_rows,
        "branches": {b.branch: b.rating for b in conversation.four_branch_ratings.all()},
    }
