"""A conversation scored by hand end to end (SPEC 5.1–5.3), plus aggregates (SPEC 5.4)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from attunebench.canonical import parse_conversation, parse_run
from attunebench.metrics import UnmatchedRunsError, score_documents, score_runs
from attunebench.metrics.aggregate import aggregate_rows, folded_record, z_scores
from attunebench.metrics.composite import capability_scores
from attunebench.metrics.keys import (
    AGGREGATE_KEYS,
    BINARY_VARIANTS,
    CONVERSATION_KEYS,
    METRIC_KEYS,
    POOLED_METRIC_KEYS,
    TURN_KEYS,
)
from attunebench.metrics.results import ConversationRecord, to_json


def hand_conversation() -> dict[str, Any]:
    return {
        "conversationId": "hand-1",
        "metadata": {
            "model": "om/original",
            "timestamp": "2025-02-01T10:00:00Z",
            "category": "Work",
            "subtopic": "Stress and burnout",
        },
        "participant_profile": {"participant_id": "p1", "diagnoses": ["Anxiety"], "sensitiveDataConsent": True},
        "prePanas": {"totalPositiveAffect": 30, "totalNegativeAffect": 40, "items": {}},
        "postPanas": {"totalPositiveAffect": 40, "totalNegativeAffect": 20, "items": {}},
        "conversationWideQuestions": {
            "q1_lookingFor": ["To just listen or let me vent", "Other"],
            "q2_emotionClarity": "Mixed or conflicted",
            "q3_modelFit": "Mostly well-matched",
            "q3_followUp_whatFeltOff": ["Too much advice"],
            "fourBranchScores": {"perceiving": 7, "facilitating": 2, "understanding": 5, "managing": 1},
        },
        "turns": [
            {
                "turnNumber": 1,
                "userMessage": "work is too much",
                "llmResponse": "you should rest",
                "moodShiftTags": [{"emotion": "Upset", "intensity": 5}, {"emotion": "Afraid", "intensity": 2}],
                "annotations": {
                    "binaryJudgements": [
                        {"questionId": "B1", "observedBehavior": "yes", "preferredBehavior": "yes"},
                        {"questionId": "B2", "observedBehavior": "no", "preferredBehavior": "yes"},
                        {"questionId": "B3", "observedBehavior": "na", "preferredBehavior": "no"},
                    ],
                    "alternateResponses": {"llmImproved": "that sounds hard", "humanEdited": "that sounds really hard"},
                    "pairwiseComparisons": [
                        {"questionId": "general", "responseA": "original", "responseB": "alternate", "winner": "B"}
                    ],
                    "selectedPairwiseQuestions": ["general"],
                },
            },
            {"turnNumber": 2, "userMessage": "ok", "llmResponse": "ok", "moodShiftTags": [], "annotations": {}},
            {
                "turnNumber": 3,
                "userMessage": "bye",
                "llmResponse": "bye",
                "moodShiftTags": [{"emotion": "Proud", "intensity": 4}],
                "annotations": {},
            },
        ],
    }


def hand_run(em_model: str = "em/hand", mode: str = "default") -> dict[str, Any]:
    return {
        "conversationId": "hand-1",
        "em_model": em_model,
        "mode": mode,
        "run_timestamp": "2025-03-01T10:00:00Z",
        "turns": [
            {
                "turnNumber": 1,
                "em_emotion_tags": [
                    {"emotion": "upset", "intensity": 2},
                    {"emotion": "afraid", "intensity": 2},
                    {"emotion": "nervous", "intensity": 4},
                ],
                "em_drafted_response": "that sounds hard",
                "em_binary_om_assessment": {"B1": "yes", "B2": "yes", "B3": "yes"},
                "em_binary_human_prediction": {"B1": "yes", "B2": "no"},
                "em_binary_om_assessment_hp": {"B1": "yes", "B2": "no"},
                "em_binary_human_prediction_hp": {"B1": "yes", "B2": "yes", "B3": "no"},
                "em_pairwise_selections": {"0": "B"},
                "em_draft_judge_scores": {"overall_score": 7, "emotional_appropriateness": 5, "helpfulness": 6},
                "em_draft_binary_assessment": {"B1": "yes", "B2": "no", "B3": "no"},
            },
            {"turnNumber": 2, "em_emotion_tags": []},
            {"turnNumber": 9, "em_emotion_tags": [{"emotion": "Proud"}]},  # not a GT turn: ignored
        ],
        "post_conversation": {
            "panas_strategy": "absolute",
            "predicted_post_panas": {"totalPositiveAffect": 37, "totalNegativeAffect": 32, "items": {}},
            "predicted_conversation_wide": {
                "q1_lookingFor": ["just listen / let me vent", "Specific information or advice"],
                "q2_emotionClarity": "mixed or conflicted",
                "q3_modelFit": "Mixed, some good moments, some misses",
                "q3_followUp_whatFeltOff": ["too much advice", "Too formal"],
                "fourBranchScores": {"perceiving": 6, "facilitating": 2},
            },
        },
    }


@pytest.fixture(scope="module")
def hand_record() -> dict[str, Any]:
    report = score_documents([parse_conversation(hand_conversation())], [parse_run(hand_run())])
    return to_json(report.conversations[0])  # the record as the report's JSON names it


def test_hand_conversation_turn_one(hand_record: dict[str, Any]) -> None:
    t1 = hand_record["turns"][0]
    assert list(t1) == list(TURN_KEYS)
    # Emotion: g {upset 5, afraid 2}, p {upset 2, afraid 2, nervous 4}: tp 2, P 2/3, R 1 -> F1 0.8
    # intensity: upset 1 - 3/6 = 0.5, afraid 1 -> mean 0.75 -> F1×I 0.6; MAE (3 + 0)/2 = 1.5; hit rate 2/2
    assert t1["emotion_f1"] == pytest.approx(0.8)
    assert t1["emotion_f1_intensity"] == pytest.approx(0.6)
    assert t1["emotion_intensity_mae"] == 1.5
    assert t1["emotion_hit_rate"] == 1.0
    # VA: upset→upset and afraid→afraid are exact (sim 1): mean 1 × coverage 2/3
    assert t1["emotion_va_score"] == pytest.approx(2 / 3)
    # VA×I cells: upset(5)→upset(2) 0.7 + 0.3*0.5 = 0.85; upset(5)→nervous(4) 0.7*0.9483 + 0.3*(5/6) = 0.91381
    #   afraid(2)→afraid(2) 1.0; best matching upset→nervous + afraid→afraid = 1.91381 (beats 1.85)
    #   mean 0.956905 × coverage 2/3 = 0.637937
    assert t1["emotion_va_intensity_score"] == pytest.approx((0.7 * 0.9483 + 0.3 * 5 / 6 + 1.0) / 2 * 2 / 3)
    # OM targets: B1 yes, B2 no, B3 na (skipped). Predictions B1 yes (TP), B2 yes (FP) -> 1/2
    assert t1["binary_om"] == {
        "tp": 1,
        "fp": 1,
        "tn": 0,
        "fn": 0,
        "accuracy": 0.5,
        "precision": 0.5,
        "recall": 1.0,
        "f1": pytest.approx(2 / 3),
        "mcc": 0.0,
    }
    # human targets = preferred: B1 yes, B2 yes, B3 no. B1 TP, B2 FN, B3 missing -> no -> TN: 2/3
    assert (t1["binary_human"]["tp"], t1["binary_human"]["fn"], t1["binary_human"]["tn"]) == (1, 1, 1)
    assert t1["binary_human"]["accuracy"] == pytest.approx(2 / 3)
    assert t1["binary_om_hp"]["accuracy"] == 1.0  # B1 TP, B2 TN
    assert t1["binary_human_hp"]["accuracy"] == 1.0  # B1 TP, B2 TP, B3 TN
    # Pairwise: one comparison, winner B, EM B -> 1; labels {alternate, original}, same ranking -> τ 1
    assert t1["pairwise_accuracy"] == 1.0
    assert t1["pairwise_kendall_tau"] == 1.0
    # Draft "that sounds hard": original 0, alternate 3/3 = 1, human 3/4 -> overall 1
    assert (
        t1["response_similarity_original"],
        t1["response_similarity_alternate"],
        t1["response_similarity_human"],
        t1["response_similarity"],
    ) == (0.0, 1.0, 0.75, 1.0)
    assert t1["response_preference_alignment"] == 1.0  # alternate has 100% of GT wins, Jaccard 1
    assert t1["draft_judge_score"] == pytest.approx(5 / 6)  # (mean(7, 5, 6) - 1)/6
    assert t1["draft_binary_alignment"] == pytest.approx(2 / 3)  # B1 ✓, B2 ✗, B3 ✓


def test_hand_conversation_turn_two_is_the_empty_turn(hand_record: dict[str, Any]) -> None:
    t2 = hand_record["turns"][1]
    # no tags on either side -> 1s; no judgements -> accuracy 1; no comparisons -> 1, τ null
    assert (t2["emotion_f1"], t2["emotion_f1_intensity"], t2["emotion_hit_rate"]) == (1.0, 1.0, 1.0)
    assert (t2["emotion_va_score"], t2["emotion_va_intensity_score"]) == (1.0, 1.0)
    assert t2["binary_om"]["accuracy"] == 1.0 and t2["binary_om"]["tp"] == 0
    assert t2["pairwise_accuracy"] == 1.0 and t2["pairwise_kendall_tau"] is None
    # no draft -> similarity 0 and alignment 0; no judge -> nulls
    assert t2["response_similarity"] == 0.0 and t2["response_preference_alignment"] == 0.0
    assert t2["draft_judge_score"] is None and t2["draft_binary_alignment"] is None


def test_hand_conversation_averages_and_post_metrics(hand_record: dict[str, Any]) -> None:
    r = hand_record
    assert list(r) == list(CONVERSATION_KEYS)
    assert [t["turnNumber"] for t in r["turns"]] == [1, 2]  # turn 3 skipped, EM turn 9 ignored
    assert r["coverage"] == pytest.approx(2 / 3)
    assert r["post_coverage"] == 1.0 and r["holistic_imputed"] is False
    assert r["avg_emotion_f1"] == pytest.approx(0.9)  # (0.8 + 1)/2
    assert r["avg_emotion_f1_intensity"] == pytest.approx(0.8)  # (0.6 + 1)/2
    assert r["avg_emotion_hit_rate"] == 1.0
    assert r["avg_emotion_intensity_mae"] == 1.5  # non-null values only
    assert r["avg_emotion_va_score"] == pytest.approx(5 / 6)  # (2/3 + 1)/2
    assert r["avg_binary_om_accuracy"] == pytest.approx(0.75)  # (0.5 + 1)/2
    assert r["avg_binary_human_accuracy"] == pytest.approx(5 / 6)  # (2/3 + 1)/2
    assert r["avg_binary_om_accuracy_hp"] == 1.0 and r["avg_binary_human_accuracy_hp"] == 1.0
    assert r["avg_pairwise_accuracy"] == 1.0 and r["avg_pairwise_kendall_tau"] == 1.0
    assert r["avg_response_similarity"] == 0.5 and r["avg_response_preference_alignment"] == 0.5
    assert r["avg_draft_judge_score"] == pytest.approx(5 / 6)  # only turn 1 was judged
    assert r["avg_draft_binary_alignment"] == pytest.approx(2 / 3)
    # PANAS: errors PA |40-37| 3, NA |20-32| 12 -> MAE 7.5, normalised 0.875
    # baseline: PA (0.95 - 5/6)/(1/6) = 0.7, NA (0.8 - 2/3)/(1/3) = 0.4 -> 0.55; no items -> item MAE null
    assert r["panas_mae"] == 7.5 and r["panas_normalized"] == pytest.approx(0.875)
    assert r["panas_baseline_adjusted"] == pytest.approx(0.55)
    assert r["panas_item_mae"] is None
    assert r["q1_looking_for_score"] == 0.5  # 1 shared of 2 and 2
    assert r["q2_emotion_clarity_match"] == 1.0
    assert r["q3_model_fit_match"] == 0.0 and r["q3_model_fit_ordinal_distance"] == 1
    # follow-up: P = (1 + 0)/2 ("too formal" vs "too much advice" = 1/4 < 0.3), R = 1 -> F1 2/3
    assert r["q3_follow_up_score"] == pytest.approx(2 / 3)
    # four-branch: |7-6| 1, |2-2| 0, |5-4| 1, |1-4| 3 -> MAE 1.25, normalised 1 - 1.25/6
    assert r["four_branch_mae"] == 1.25 and r["four_branch_normalized"] == pytest.approx(1 - 1.25 / 6)


def test_hand_conversation_composite(hand_record: dict[str, Any]) -> None:
    # emotion  = 0.5*0.9 + 0.5*(5/6)              = 0.866667
    # binary   = (0.75 + 5/6)/2                    = 0.791667
    # evalq    = 0.5*0.791667 + 0.5*1              = 0.895833
    # panas    = (0.55 + 1)/2                      = 0.775
    # convq    = (0.5 + 1 + 0 + 2/3)/4             = 0.541667
    # holistic = 0.4*0.775 + 0.3*0.541667 + 0.3*0.791667 = 0.31 + 0.1625 + 0.2375 = 0.71
    # composite = 100*(0.24*0.866667 + 0.49*0.895833 + 0.27*0.71)
    #           = 100*(0.208 + 0.438958 + 0.1917) = 83.8658 -> 83.87
    # turn_level = (0.866667 + 0.791667 + 1)/3 = 0.886111
    # conversation_wide = (0.775 + 0.541667 + 0.791667)/3 = 0.702778
    # equal_weight = round(100*(0.886111 + 0.702778)/2, 2) = round(79.4444, 2) = 79.44
    r = hand_record
    assert r["composite_score"] == 83.87
    assert r["turn_level_average"] == pytest.approx(0.886111, abs=1e-6)
    assert r["conversation_wide_average"] == pytest.approx(0.702778, abs=1e-6)
    assert r["equal_weight_composite"] == 79.44
    caps = capability_scores(r)
    assert caps["emotion_tracking"] == pytest.approx(0.866667, abs=1e-6)
    assert caps["behaviour_judgement"] == pytest.approx(0.791667, abs=1e-6)
    assert caps["preference_prediction"] == 1.0
    assert caps["holistic_comprehension"] == pytest.approx(0.71)
    assert caps["response_quality"] == pytest.approx((0.5 + 5 / 6) / 2)


def test_details_carry_hp_gap_and_panas_sides() -> None:
    report = score_documents([parse_conversation(hand_conversation())], [parse_run(hand_run())], include_details=True)
    details = report.conversations[0].details
    assert details is not None
    # gap = human acc − human acc (HP wording) = 5/6 − 1; alignment = 1/(5/6) = 1.2
    assert details.hp_perspective_gap == pytest.approx(-1 / 6)
    assert details.hp_perspective_alignment == pytest.approx(1.2)
    assert details.panas_pa_baseline_adjusted == pytest.approx(0.7)
    assert details.n_gt_turns == 3 and details.n_scored_turns == 2
    assert details.participant_group == "anxiety_depression"
    assert details.category == "Work" and details.original_model == "om/original"


def test_a_diagnosis_without_recorded_consent_forms_no_group() -> None:
    # SPEC 2.5: the same conversation whose file records no consent to sensitive data has an unknown group.
    conversation = hand_conversation()
    del conversation["participant_profile"]["sensitiveDataConsent"]
    report = score_documents([parse_conversation(conversation)], [parse_run(hand_run())], include_details=True)
    details = report.conversations[0].details
    assert details is not None and details.participant_group is None


def test_run_without_any_scored_turn_has_zero_averages_and_null_nullables() -> None:
    run = hand_run()
    run["turns"] = []
    run["post_conversation"] = None
    r = to_json(score_documents([parse_conversation(hand_conversation())], [parse_run(run)]).conversations[0])
    assert r["coverage"] == 0.0 and r["turns"] == []
    # the post-conversation call failed: holistic rests on defaults, and says so
    assert r["post_coverage"] == 0.0 and r["holistic_imputed"] is True
    for key in (
        "avg_emotion_f1",
        "avg_emotion_va_score",
        "avg_binary_om_accuracy",
        "avg_pairwise_accuracy",
        "avg_response_similarity",
    ):
        assert r[key] == 0.0
    for key in (
        "avg_emotion_intensity_mae",
        "avg_pairwise_kendall_tau",
        "avg_draft_judge_score",
        "avg_draft_binary_alignment",
    ):
        assert r[key] is None
    # no post-conversation: predicted PANAS sides use 40 -> PA |40-40| 0, NA |20-40| 20 -> MAE 10
    assert r["panas_mae"] == 10 and r["panas_baseline_adjusted"] is None
    # four-branch: every prediction defaults to 4: |7-4| 3, |2-4| 2, |5-4| 1, |1-4| 3 -> 9/4
    assert r["four_branch_mae"] == 2.25


@pytest.mark.parametrize("missing", ["predicted_post_panas", "predicted_conversation_wide"])
def test_a_post_conversation_missing_either_part_is_not_covered(missing: str) -> None:
    run = hand_run()
    run["post_conversation"][missing] = None
    r = score_documents([parse_conversation(hand_conversation())], [parse_run(run)]).conversations[0]
    assert (r.post_coverage, r.holistic_imputed) == (0.0, True)
    assert r.coverage == pytest.approx(2 / 3)  # turn coverage is unaffected


def test_unmatched_and_duplicate_runs_are_skipped_or_raised() -> None:
    conversation = parse_conversation(hand_conversation())
    orphan = hand_run()
    orphan["conversationId"] = "missing"
    runs = [parse_run(hand_run()), parse_run(hand_run()), parse_run(orphan)]
    result = score_runs([conversation], runs)
    assert len(result.scores) == 1
    assert [p.source for p in result.skipped] == ["hand-1/em/hand/default", "missing/em/hand/default"]
    with pytest.raises(UnmatchedRunsError, match="no conversation 'missing'"):
        score_documents([conversation], runs)


# ---------------------------------------------------------------------------
# Aggregates (SPEC 5.4)
# ---------------------------------------------------------------------------


def _record(
    em_model: str,
    composite: float,
    counts: list[tuple[int, int, int, int]],
    conversation: str = "c",
    mode: str = "default",
    **values: Any,
) -> ConversationRecord:
    record: dict[str, Any] = {
        "conversationId": conversation,
        "em_model": em_model,
        "mode": mode,
        "coverage": 1.0,
        "post_coverage": 1.0,
        "holistic_imputed": False,
    }
    record.update(dict.fromkeys(METRIC_KEYS, 0.0))
    record.update(composite_score=composite, **values)
    record["turns"] = [_turn(i, tp, fp, tn, fn) for i, (tp, fp, tn, fn) in enumerate(counts)]
    return ConversationRecord.model_validate(record)


def _turn(index: int, tp: int, fp: int, tn: int, fn: int) -> dict[str, Any]:
    """A scored turn with these binary_om and binary_human counts; every metric 0 (not read by the aggregator)."""
    counts = {"tp": tp, "fp": fp, "tn": tn, "fn": fn, **dict.fromkeys(POOLED_METRIC_KEYS[4:], 0.0)}
    turn: dict[str, Any] = dict.fromkeys(TURN_KEYS, 0.0)
    turn.update(dict.fromkeys(BINARY_VARIANTS, counts), turnNumber=index + 1, turn_index=index)
    return turn


def test_aggregate_means_se_and_pooled_confusion() -> None:
    records = [
        _record("a", 70.0, [(1, 0, 1, 0)], "c1", avg_pairwise_kendall_tau=None, coverage=0.5),
        _record("a", 80.0, [(0, 1, 0, 2)], "c2", avg_pairwise_kendall_tau=0.5, post_coverage=0.0),
    ]
    [row] = aggregate_rows(records)
    assert list(to_json(row)) == list(AGGREGATE_KEYS)
    assert row.n_conversations == 2
    assert row.composite_score == 75.0
    assert row.coverage == 0.75  # (0.5 + 1)/2
    assert row.post_coverage == 0.5  # (1 + 0)/2: one conversation lacks its post-conversation prediction
    assert row.avg_pairwise_kendall_tau == 0.5  # nulls left out
    # sample sd of (70, 80) = √50 = 7.0711; SE = 7.0711/√2 = 5
    assert row.se_composite == pytest.approx(5.0)
    # pooled: tp 1, fp 1, tn 1, fn 2: acc 2/5, P 1/2, R 1/3, F1 (1/3)/(5/6) = 0.4, MCC (1·1 − 1·2)/√(2·3·2·3) = −1/6
    pooled = row.pooled_binary_om_metrics
    assert (pooled.tp, pooled.fp, pooled.tn, pooled.fn) == (1, 1, 1, 2)
    assert pooled.accuracy == pytest.approx(0.4)
    assert pooled.precision == 0.5 and pooled.recall == pytest.approx(1 / 3)
    assert pooled.f1 == pytest.approx(0.4)
    assert pooled.mcc == pytest.approx(-1 / 6)
    # with a single row the z-score is 0 (SPEC 5.4: fewer than 2 rows)
    assert row.z_score == 0.0


def test_aggregate_single_conversation_has_null_se() -> None:
    [row] = aggregate_rows([_record("a", 70.0, [])])
    assert row.se_composite is None
    assert row.pooled_binary_om_metrics.accuracy == 0.0  # no counts: denominator 0 -> 0


def test_z_scores_hand_computed() -> None:
    # mean 80, sample sd √((100 + 0 + 100)/2) = 10 -> z = −1, 0, 1
    assert z_scores([70.0, 80.0, 90.0]) == [-1.0, 0.0, 1.0]
    assert z_scores([50.0, 50.0]) == [0.0, 0.0]  # sd 0
    assert z_scores([50.0]) == [0.0]


def test_aggregate_rows_are_in_leaderboard_order_with_z_scores() -> None:
    rows = aggregate_rows([_record("low", 70.0, []), _record("high", 90.0, []), _record("mid", 80.0, [])])
    assert [r.em_model for r in rows] == ["high", "mid", "low"]
    assert [r.z_score for r in rows] == [1.0, 0.0, -1.0]
    assert all(not (isinstance(v, float) and math.isnan(v)) for r in rows for v in to_json(r).values())


def test_folded_records_aggregate_exactly_like_whole_ones() -> None:
    """A job scoring a whole study keeps folded records (one turn of pooled counts): the aggregates must not move."""
    from attunebench.synth import synth_conversations, synth_run

    conversations = synth_conversations(6, 3, 1, 5)
    runs = [
        synth_run(c, em, "default", 5, skill=skill) for c in conversations for em, skill in (("x", 0.2), ("y", 0.8))
    ]
    records = [s.record for s in score_runs(conversations, runs).scores]
    folded = [folded_record(r) for r in records]
    assert all(len(r.turns) == 1 for r in folded)
    assert [to_json(r) for r in aggregate_rows(folded)] == [to_json(r) for r in aggregate_rows(records)]
