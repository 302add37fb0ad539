"""Per-conversation drill-down: an EM's predictions beside the participant's annotations, turn by turn."""

from __future__ import annotations

from typing import Any

from attunebench import catalogue as cat
from collection.models import Conversation, PanasSurvey
from research.collection_stats import conversation_transcript
from research.evaluation import stored_record
from scoring.models import ConversationScore, EvaluationRun, RunConversation


def _norm(value: str | None) -> str | None:
    return value.strip().lower() if isinstance(value, str) else None


def drilldown(run: EvaluationRun, conversation: Conversation) -> dict[str, Any]:
    """Template context: every GT turn with the EM turn (if any), per-question agreement marks and turn metrics."""
    rc = RunConversation.objects.filter(run=run, conversation=conversation).first()
    output = (rc.output or {}) if rc else {}
    score = ConversationScore.objects.filter(run=run, conversation=conversation).first()
    record = stored_record(score.metrics) if score else {}
    turn_metrics = {t.get("turnNumber"): t for t in record.get("turns", [])} if record else {}
    em_turns = {t.get("turnNumber"): t for t in output.get("turns", [])}
    rows = []
    for gt in conversation_transcript(conversation):
        turn = gt["turn"]
        em = em_turns.get(turn.turn_number)
        gt_emotions = {t.emotion.strip().lower() for t in gt["tags"]}
        em_tags = [
            {**t, "hit": (t.get("emotion") or "").strip().lower() in gt_emotions}
            for t in (em or {}).get("em_emotion_tags", [])
        ]
        judgements = []
        for j in gt["judgements"]:
            om_pred = (em or {}).get("em_binary_om_assessment", {}).get(j.question_id)
            hp_pred = (em or {}).get("em_binary_human_prediction", {}).get(j.question_id)
            om_target = j.observed if j.observed in (cat.YES, cat.NO) else j.llm_value
            hp_target = j.preferred if j.preferred in (cat.YES, cat.NO) else j.observed
            judgements.append(
                {
                    "j": j,
                    "question": cat.BINARY_QUESTIONS_BY_ID.get(j.question_id),
                    "om_pred": om_pred,
                    "hp_pred": hp_pred,
                    "om_match": None if om_target not in (cat.YES, cat.NO) else _norm(om_pred or "no") == om_target,
                    "hp_match": None if hp_target not in (cat.YES, cat.NO) else _norm(hp_pred or "no") == hp_target,
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
