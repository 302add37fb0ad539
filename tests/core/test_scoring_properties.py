"""Property tests (hypothesis): ranges, perfect predictions, permutation invariance."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attunebench import catalogue as cat
from attunebench.canonical import parse_conversation, parse_run
from attunebench.metrics import score_documents, to_json
from attunebench.metrics.keys import METRIC_KEYS

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ANSWERS = st.sampled_from(["yes", "no", "na", None])
YES_NO = st.sampled_from(["yes", "no"])
WORDS = st.lists(st.sampled_from(["i", "feel", "sad", "you", "should", "rest", "that", "sounds", "hard"]), max_size=6)
# Ground truth holds PANAS items or "Neutral" (read as no change); an EM may say anything (off-list words are dropped).
GT_EMOTIONS = st.sampled_from([*list(cat.PANAS_ITEMS), "Neutral"])
EMOTIONS = st.sampled_from([*list(cat.PANAS_ITEMS), "bored", "Calm"])


@st.composite
def conversations(draw: st.DrawFn, perfect: bool = False, cid: str = "c") -> dict[str, Any]:
    """A conversation; ``perfect`` restricts it to inputs where a perfect EM can score 1 everywhere."""
    emotion = st.sampled_from(cat.PANAS_ITEMS) if perfect else GT_EMOTIONS
    intensity = st.integers(1, 7) if perfect else st.one_of(st.none(), st.integers(1, 7))
    answer = YES_NO if perfect else ANSWERS
    turns = []
    for number in range(1, draw(st.integers(1, 4)) + 1):
        qids = draw(st.lists(st.sampled_from(cat.BINARY_QUESTION_IDS), unique=True, max_size=6))
        comparisons = []
        for _ in range(draw(st.integers(0, 3))):
            a, b = draw(st.permutations(cat.RESPONSE_LABELS))[:2]
            winner = draw(st.sampled_from(["A", "B"]) if perfect else st.sampled_from(["A", "B", None]))
            comparisons.append({"questionId": "general", "responseA": a, "responseB": b, "winner": winner})
        turns.append(
            {
                "turnNumber": number,
                "userMessage": "hi",
                "llmResponse": " ".join(draw(WORDS)),
                "moodShiftTags": [
                    {"emotion": e, "intensity": i} for e, i in draw(st.lists(st.tuples(emotion, intensity), max_size=3))
                ],
                "annotations": {
                    "binaryJudgements": [
                        {
                            "questionId": q,
                            "observedBehavior": draw(answer),
                            "preferredBehavior": draw(answer),
                            "llmValue": draw(ANSWERS),
                        }
                        for q in qids
                    ],
                    "alternateResponses": {"llmImproved": " ".join(draw(WORDS)), "humanEdited": " ".join(draw(WORDS))}
                    if draw(st.booleans())
                    else None,
                    "pairwiseComparisons": comparisons,
                },
            }
        )
    post_pa, post_na = draw(st.integers(10, 70)), draw(st.integers(10, 70))
    if perfect:  # the baseline adjustment is null when post == pre, so keep them apart
        pre_pa = draw(st.integers(10, 70).filter(lambda v: v != post_pa))
        pre_na = draw(st.integers(10, 70).filter(lambda v: v != post_na))
    else:
        pre_pa, pre_na = draw(st.integers(10, 70)), draw(st.integers(10, 70))
    return {
        "conversationId": cid,
        "metadata": {"model": "om", "timestamp": "2025-01-01T00:00:00Z", "category": "Work", "subtopic": "x"},
        "prePanas": {"totalPositiveAffect": pre_pa, "totalNegativeAffect": pre_na, "items": {}},
        "postPanas": {
            "totalPositiveAffect": post_pa,
            "totalNegativeAffect": post_na,
            "items": draw(st.dictionaries(st.sampled_from(cat.PANAS_ITEMS), st.integers(1, 7))),
        },
        "conversationWideQuestions": {
            "q1_lookingFor": draw(st.lists(st.sampled_from(cat.Q1_OPTIONS), unique=True, max_size=3)),
            "q2_emotionClarity": draw(st.sampled_from(cat.Q2_OPTIONS)),
            "q3_modelFit": draw(st.sampled_from(cat.Q3_OPTIONS)),
            "q3_followUp_whatFeltOff": draw(st.lists(st.sampled_from(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS), max_size=3)),
            "fourBranchScores": draw(st.dictionaries(st.sampled_from(cat.FOUR_BRANCHES), st.integers(1, 7))),
        },
        "turns": turns,
    }


@st.composite
def random_runs(draw: st.DrawFn, conversation: dict[str, Any], em_model: str = "em") -> dict[str, Any]:
    turns = []
    for turn in conversation["turns"]:
        if draw(st.booleans()) and draw(st.booleans()):
            continue  # a failed turn: lowers coverage
        qids = [j["questionId"] for j in turn["annotations"]["binaryJudgements"]] + ["B20"]
        pick = st.dictionaries(st.sampled_from(qids), ANSWERS)
        turns.append(
            {
                "turnNumber": turn["turnNumber"],
                "em_emotion_tags": [
                    {"emotion": e, "intensity": i}
                    for e, i in draw(st.lists(st.tuples(EMOTIONS, st.one_of(st.none(), st.integers(1, 7))), max_size=4))
                ],
                "em_drafted_response": draw(st.one_of(st.none(), WORDS.map(" ".join))),
                "em_binary_om_assessment": draw(pick),
                "em_binary_human_prediction": draw(pick),
                "em_binary_om_assessment_hp": draw(pick),
                "em_binary_human_prediction_hp": draw(pick),
                "em_pairwise_selections": draw(
                    st.dictionaries(st.sampled_from(["0", "1", "2", "7"]), st.sampled_from(["A", "B"]))
                ),
                "em_draft_judge_scores": draw(
                    st.one_of(
                        st.none(),
                        st.dictionaries(st.sampled_from(cat.JUDGE_DIMENSIONS), st.one_of(st.none(), st.integers(1, 7))),
                    )
                ),
                "em_draft_binary_assessment": draw(st.one_of(st.none(), pick)),
            }
        )
    wide = st.fixed_dictionaries(
        {
            "q1_lookingFor": st.lists(st.sampled_from((*cat.Q1_OPTIONS, "something else")), max_size=3),
            "q2_emotionClarity": st.one_of(st.none(), st.sampled_from(cat.Q2_OPTIONS)),
            "q3_modelFit": st.one_of(st.none(), st.sampled_from((*cat.Q3_OPTIONS, "meh"))),
            "q3_followUp_whatFeltOff": st.lists(WORDS.map(" ".join), max_size=3),
            "fourBranchScores": st.dictionaries(st.sampled_from(cat.FOUR_BRANCHES), st.integers(1, 7)),
        }
    )
    return {
        "conversationId": conversation["conversationId"],
        "em_model": em_model,
        "mode": "default",
        "run_timestamp": "2025-01-02T00:00:00Z",
        "turns": turns,
        "post_conversation": draw(
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "panas_strategy": st.just("absolute"),
                        "predicted_post_panas": st.fixed_dictionaries(
                            {
                                "totalPositiveAffect": st.one_of(st.none(), st.integers(10, 70)),
                                "totalNegativeAffect": st.one_of(st.none(), st.integers(10, 70)),
                                "items": st.dictionaries(st.sampled_from(cat.PANAS_ITEMS), st.integers(1, 7)),
                            }
                        ),
                        "predicted_conversation_wide": wide,
                    }
                ),
            )
        ),
    }


def perfect_run(conversation: dict[str, Any]) -> dict[str, Any]:
    """An EM that predicts every annotation exactly."""
    turns = []
    for turn in conversation["turns"]:
        judgements = turn["annotations"]["binaryJudgements"]
        om = {j["questionId"]: j["observedBehavior"] or j["llmValue"] for j in judgements}
        human = {j["questionId"]: j["preferredBehavior"] or j["observedBehavior"] for j in judgements}
        turns.append(
            {
                "turnNumber": turn["turnNumber"],
                "em_emotion_tags": turn["moodShiftTags"],
                "em_drafted_response": turn["llmResponse"] or "x",
                "em_binary_om_assessment": om,
                "em_binary_human_prediction": human,
                "em_binary_om_assessment_hp": om,
                "em_binary_human_prediction_hp": human,
                "em_pairwise_selections": {
                    str(i): c["winner"] for i, c in enumerate(turn["annotations"]["pairwiseComparisons"])
                },
                "em_draft_binary_assessment": {j["questionId"]: j["preferredBehavior"] for j in judgements},
            }
        )
        if not turn["llmResponse"]:
            turn["llmResponse"] = "x"  # keep the OM reply equal to the draft
    return {
        "conversationId": conversation["conversationId"],
        "em_model": "oracle",
        "mode": "default",
        "run_timestamp": "2025-01-02T00:00:00Z",
        "turns": turns,
        "post_conversation": {
            "panas_strategy": "absolute",
            "predicted_post_panas": conversation["postPanas"],
            "predicted_conversation_wide": conversation["conversationWideQuestions"],
        },
    }


UNIT_TURN_KEYS = (
    "emotion_precision",
    "emotion_recall",
    "emotion_f1",
    "emotion_f1_intensity",
    "emotion_hit_rate",
    "emotion_va_score",
    "emotion_va_intensity_score",
    "pairwise_accuracy",
    "response_similarity",
    "response_similarity_original",
    "response_similarity_alternate",
    "response_similarity_human",
    "response_preference_alignment",
    "draft_judge_score",
    "draft_binary_alignment",
)
RANGES = {
    "composite_score": (0, 100),
    "equal_weight_composite": (0, 100),
    "avg_emotion_intensity_mae": (0, 6),
    "avg_pairwise_kendall_tau": (-1, 1),
    "panas_mae": (0, 60),
    "panas_baseline_adjusted": (-1, 1),
    "panas_item_mae": (0, 6),
    "q3_model_fit_ordinal_distance": (0, 3),
    "four_branch_mae": (0, 6),
}


def _in(value: float | None, low: float, high: float) -> bool:
    return value is None or (not math.isnan(value) and low - 1e-9 <= value <= high + 1e-9)


@SETTINGS
@given(st.data())
def test_every_score_is_in_range(data: st.DataObject) -> None:
    conversation = data.draw(conversations())
    run = data.draw(random_runs(conversation))
    report = to_json(score_documents([parse_conversation(conversation)], [parse_run(run)]))
    json.dumps(report, allow_nan=False)  # no NaN anywhere
    record = report["conversations"][0]
    assert 0 <= record["coverage"] <= 1
    for key in METRIC_KEYS:
        low, high = RANGES.get(key, (0, 1))
        assert _in(record[key], low, high), (key, record[key])
    for turn in record["turns"]:
        for key in UNIT_TURN_KEYS:
            assert _in(turn[key], 0, 1), (key, turn[key])
        assert _in(turn["pairwise_kendall_tau"], -1, 1)
        assert _in(turn["emotion_intensity_mae"], 0, 6)
        for variant in ("binary_om", "binary_human", "binary_om_hp", "binary_human_hp"):
            b = turn[variant]
            assert all(_in(b[k], 0, 1) for k in ("accuracy", "precision", "recall", "f1"))
            assert _in(b["mcc"], -1, 1)
    for row in report["aggregates"]:
        assert _in(row["z_score"], -10, 10)
        for key in METRIC_KEYS:
            low, high = RANGES.get(key, (0, 1))
            assert _in(row[key], low, high), (key, row[key])


@SETTINGS
@given(conversations(perfect=True))
def test_perfect_predictions_score_one_and_composite_100(conversation: dict[str, Any]) -> None:
    run = perfect_run(conversation)
    record = to_json(score_documents([parse_conversation(conversation)], [parse_run(run)]).conversations[0])
    for turn in record["turns"]:
        for key in (
            "emotion_precision",
            "emotion_recall",
            "emotion_f1",
            "emotion_f1_intensity",
            "emotion_hit_rate",
            "emotion_va_score",
            "emotion_va_intensity_score",
            "pairwise_accuracy",
            "response_similarity",
        ):
            assert turn[key] == 1.0, key
        for variant in ("binary_om", "binary_human", "binary_om_hp", "binary_human_hp"):
            assert turn[variant]["accuracy"] == 1.0
            assert turn[variant]["fp"] == 0 and turn[variant]["fn"] == 0
        assert turn["pairwise_kendall_tau"] in (None, 1.0)
        assert turn["draft_binary_alignment"] in (None, 1.0)
        assert turn["emotion_intensity_mae"] in (None, 0.0)
    for key in (
        "coverage",
        "avg_emotion_f1",
        "avg_emotion_f1_intensity",
        "avg_emotion_hit_rate",
        "avg_emotion_va_score",
        "avg_emotion_va_intensity_score",
        "avg_binary_om_accuracy",
        "avg_binary_human_accuracy",
        "avg_binary_om_accuracy_hp",
        "avg_binary_human_accuracy_hp",
        "avg_pairwise_accuracy",
        "avg_response_similarity",
        "panas_normalized",
        "panas_baseline_adjusted",
        "q1_looking_for_score",
        "q2_emotion_clarity_match",
        "q3_model_fit_match",
        "q3_follow_up_score",
        "four_branch_normalized",
        "turn_level_average",
        "conversation_wide_average",
    ):
        assert record[key] == 1.0, key
    assert record["avg_pairwise_kendall_tau"] in (None, 1.0)
    assert record["panas_mae"] == 0 and record["four_branch_mae"] == 0 and record["q3_model_fit_ordinal_distance"] == 0
    assert record["composite_score"] == 100.0
    assert record["equal_weight_composite"] == 100.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_permuting_conversations_does_not_change_aggregates(data: st.DataObject) -> None:
    convs = [data.draw(conversations(cid=f"c{i}")) for i in range(data.draw(st.integers(2, 4)))]
    runs = [data.draw(random_runs(c, em_model=m)) for c in convs for m in ("em-a", "em-b")]
    parsed_convs = [parse_conversation(c) for c in convs]
    parsed_runs = [parse_run(r) for r in runs]
    baseline = score_documents(parsed_convs, parsed_runs)
    shuffled = score_documents(data.draw(st.permutations(parsed_convs)), data.draw(st.permutations(parsed_runs)))
    assert shuffled.aggregates == baseline.aggregates
    assert shuffled.conversations == baseline.conversations
