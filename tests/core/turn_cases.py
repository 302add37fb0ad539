"""One ground-truth turn and one EM turn, scored by the engine exactly as ``score_documents`` does.

Hand-derived per-turn tests state their inputs as plain values; this module
turns them into the canonical documents (through the same readers) and runs
``engine.prepare_turn`` + ``engine.score_turn``, so the tests check the path
production runs rather than a convenience wrapper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attunebench.canonical import RunTurn, Turn
from attunebench.metrics.engine import prepare_turn, score_turn

Tag = tuple[str, int | None]
# (question id, observed, preferred, llmValue)
Judgement = tuple[str, str | None, str | None, str | None]
Comparison = tuple[str, str, str | None]


def turn_document(
    *,
    gt_tags: Sequence[Tag] = (),
    judgements: Sequence[Judgement] = (),
    comparisons: Sequence[Comparison] = (),
    llm_response: str = "reply",
    alternates: Mapping[str, str] | None = None,
) -> Turn:
    return Turn.model_validate(
        {
            "turnNumber": 1,
            "userMessage": "message",
            "llmResponse": llm_response,
            "moodShiftTags": [{"emotion": e, "intensity": i} for e, i in gt_tags],
            "annotations": {
                "binaryJudgements": [
                    {"questionId": q, "observedBehavior": o, "preferredBehavior": p, "llmValue": v}
                    for q, o, p, v in judgements
                ],
                "alternateResponses": dict(alternates) if alternates is not None else None,
                "pairwiseComparisons": [
                    {"questionId": "general", "responseA": a, "responseB": b, "winner": w} for a, b, w in comparisons
                ],
            },
        }
    )


def run_turn_document(
    *,
    em_tags: Sequence[Tag] = (),
    om: Mapping[str, str | None] | None = None,
    human: Mapping[str, str | None] | None = None,
    om_hp: Mapping[str, str | None] | None = None,
    human_hp: Mapping[str, str | None] | None = None,
    selections: Mapping[str, str] | None = None,
    draft: str | None = None,
    judge: Mapping[str, float | None] | None = None,
    draft_binary: Mapping[str, str | None] | None = None,
) -> RunTurn:
    data: dict[str, Any] = {
        "turnNumber": 1,
        "em_emotion_tags": [{"emotion": e, "intensity": i} for e, i in em_tags],
        "em_drafted_response": draft,
        "em_pairwise_selections": dict(selections or {}),
        "em_draft_judge_scores": dict(judge) if judge is not None else None,
        "em_draft_binary_assessment": dict(draft_binary) if draft_binary is not None else None,
    }
    for key, answers in (
        ("em_binary_om_assessment", om),
        ("em_binary_human_prediction", human),
        ("em_binary_om_assessment_hp", om_hp),
        ("em_binary_human_prediction_hp", human_hp),
    ):
        if answers is not None:
            data[key] = dict(answers)
    return RunTurn.model_validate(data)


def score_turn_case(
    *,
    gt_tags: Sequence[Tag] = (),
    judgements: Sequence[Judgement] = (),
    comparisons: Sequence[Comparison] = (),
    llm_response: str = "reply",
    alternates: Mapping[str, str] | None = None,
    **em: Any,
) -> dict[str, Any]:
    """The engine's per-turn record for these inputs (keyword arguments of :func:`run_turn_document` for the EM)."""
    turn = turn_document(
        gt_tags=gt_tags,
        judgements=judgements,
        comparisons=comparisons,
        llm_response=llm_response,
        alternates=alternates,
    )
    return score_turn(prepare_turn(turn, 0), run_turn_document(**em))
