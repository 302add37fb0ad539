"""Unanswered steps (null) and completeness flags in the canonical format, and how the scorer treats them."""

from __future__ import annotations

import copy

import pytest

from attunebench import canonical as cf
from attunebench.metrics.engine import score_runs

BASE = {
    "conversationId": "c-null",
    "metadata": {"model": "om-1", "timestamp": "2025-01-01T00:00:00Z", "category": "Work", "subtopic": "Burnout"},
    "turns": [
        {
            "turnNumber": 1,
            "userMessage": "I'm exhausted.",
            "llmResponse": "That sounds draining.",
            "moodShiftTags": [{"emotion": "Upset", "intensity": 5}],
            "annotations": {
                "binaryJudgements": [{"questionId": "B1", "observedBehavior": "yes", "preferredBehavior": "yes"}],
                "pairwiseComparisons": [],
                "selectedPairwiseQuestions": [],
            },
        },
        {
            "turnNumber": 2,
            "userMessage": "And I can't sleep.",
            "llmResponse": "Sleep matters so much.",
            "moodShiftTags": None,
            "annotations": {"binaryJudgements": None, "pairwiseComparisons": None, "selectedPairwiseQuestions": None},
            "completeness": "annotation_unfinished",
        },
    ],
}


def _doc(**changes) -> dict:
    data = copy.deepcopy(BASE)
    data["metadata"]["completeness"] = "unfinished"
    for key, value in changes.items():
        data[key] = value
    return data


def test_null_steps_are_read_when_the_turn_and_conversation_say_they_are_unfinished():
    doc = cf.parse_conversation(_doc())
    assert doc.turns[1].moodShiftTags is None and doc.turns[1].unanswered_steps[0] == "moodShiftTags"
    assert doc.turns[0].moodShiftTags and doc.turns[0].unanswered_steps == []
    dumped = cf.to_canonical_dict(doc)
    assert dumped["turns"][1]["moodShiftTags"] is None and dumped["turns"][1]["completeness"] == "annotation_unfinished"
    assert "completeness" not in dumped["turns"][0]  # a complete turn keeps the exact SPEC 3.1 shape
    assert dumped["metadata"]["completeness"] == "unfinished"


def test_a_null_step_in_a_turn_not_flagged_unfinished_is_an_error_naming_the_turn():
    data = _doc()
    del data["turns"][1]["completeness"]
    with pytest.raises(cf.CanonicalError) as error:
        cf.parse_conversation(data, source="f.json")
    (problem,) = error.value.problems
    assert problem.path == "turns[1]" and "moodShiftTags, binaryJudgements" in problem.message
    assert '"completeness": "annotation_unfinished"' in problem.message


def test_an_unfinished_turn_in_a_conversation_claiming_completeness_is_an_error():
    data = _doc()
    del data["metadata"]["completeness"]
    with pytest.raises(cf.CanonicalError, match='metadata needs "completeness": "unfinished"'):
        cf.parse_conversation(data)
    data["metadata"]["completeness"] = "nearly"
    with pytest.raises(cf.CanonicalError, match="expected complete/unfinished/empty"):
        cf.parse_conversation(data)


def test_the_scorer_leaves_a_turn_with_unanswered_steps_out_without_lowering_coverage():
    doc = cf.parse_conversation(_doc())
    run = cf.parse_run(
        {
            "conversationId": "c-null",
            "em_model": "em",
            "mode": "default",
            "run_timestamp": "2025-01-02T00:00:00Z",
            "turns": [
                {"turnNumber": 1, "em_emotion_tags": [{"emotion": "Upset", "intensity": 5}]},
                {"turnNumber": 2, "em_emotion_tags": []},
            ],
        }
    )
    (score,) = score_runs([doc], [run]).scores
    # Only turn 1 is ground truth: both tag sets are {Upset}, so F1 = 1 (SPEC 5.1); coverage 1/1.
    assert score.details.n_gt_turns == 1 and score.details.n_scored_turns == 1
    assert score.record.coverage == 1.0
    assert score.record.avg_emotion_f1 == 1.0
