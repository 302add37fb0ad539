"""Per-turn metrics (SPEC 5.1) against hand-computed values; arithmetic in the comments."""

from __future__ import annotations

import math

import pytest

from attunebench.metrics import turn_metrics as tm

# ---------------------------------------------------------------------------
# Emotion F1, F1×I, hit rate, intensity MAE
# ---------------------------------------------------------------------------


def test_emotion_both_empty_scores_one_everywhere() -> None:
    s = tm.emotion_scores([], [])
    assert (s.precision, s.recall, s.f1, s.f1_intensity, s.hit_rate) == (1, 1, 1, 1, 1)
    assert s.intensity_mae is None


def test_emotion_gt_empty_prediction_not_scores_zero() -> None:
    s = tm.emotion_scores([], [("Afraid", 3)])
    assert (s.precision, s.recall, s.f1, s.f1_intensity, s.hit_rate) == (0, 0, 0, 0, 0)
    assert s.intensity_mae is None


def test_emotion_prediction_empty_gt_not_scores_zero() -> None:
    # precision denominator |p| = 0 -> 0; recall = 0/1; hit rate = 0/1
    s = tm.emotion_scores([("Upset", 4)], [])
    assert (s.precision, s.recall, s.f1, s.f1_intensity, s.hit_rate) == (0, 0, 0, 0, 0)


def test_emotion_partial_overlap_with_intensities() -> None:
    # g = {upset:5, afraid:2, proud:None}, p = {upset:2, afraid:2, nervous:4}
    # tp = 2 (upset, afraid); precision = 2/3, recall = 2/3, F1 = 2/3
    # shared with both intensities: upset |5-2| = 3 -> 1 - 3/6 = 0.5; afraid |2-2| = 0 -> 1
    # F1×I = 2/3 * (0.5 + 1)/2 = 2/3 * 0.75 = 0.5; intensity MAE = (3 + 0)/2 = 1.5; hit rate = 2/3
    s = tm.emotion_scores(
        [("Upset", 5), ("Afraid", 2), ("Proud", None)],
        [("upset", 2), ("afraid", 2), ("nervous", 4)],
    )
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(2 / 3)
    assert s.f1_intensity == pytest.approx(0.5)
    assert s.intensity_mae == pytest.approx(1.5)
    assert s.hit_rate == pytest.approx(2 / 3)


def test_emotion_f1_intensity_is_zero_without_shared_intensities() -> None:
    # g = {proud: None}, p = {proud: 4, alert: 3}: tp = 1, P = 1/2, R = 1, F1 = 2*(1/2)/(3/2) = 2/3
    # no shared emotion has both intensities -> F1×I = 0 and MAE null
    s = tm.emotion_scores([("Proud", None)], [("Proud", 4), ("Alert", 3)])
    assert s.f1 == pytest.approx(2 / 3)
    assert s.f1_intensity == 0.0
    assert s.intensity_mae is None
    assert s.hit_rate == 1.0


def test_emotion_comparison_trims_and_lowercases_and_dedupes() -> None:
    # " UPSET " and "upset" are the same emotion; the repeat counts once (sets).
    s = tm.emotion_scores([(" UPSET ", 3)], [("upset", 3), ("Upset", 7)])
    assert (s.precision, s.recall, s.f1) == (1.0, 1.0, 1.0)
    assert s.f1_intensity == 1.0  # first intensity 3 kept: |3-3| = 0
    assert s.intensity_mae == 0.0


def test_emotion_disjoint_sets_score_zero() -> None:
    s = tm.emotion_scores([("Upset", 3)], [("Proud", 3)])
    assert (s.precision, s.recall, s.f1, s.f1_intensity, s.hit_rate) == (0, 0, 0, 0, 0)


# ---------------------------------------------------------------------------
# Emotion VA (Hungarian)
# ---------------------------------------------------------------------------


def test_va_empty_cases() -> None:
    assert tm.emotion_va_scores([], []) == (1.0, 1.0)
    assert tm.emotion_va_scores([("Upset", 3)], []) == (0.0, 0.0)
    assert tm.emotion_va_scores([], [("Upset", 3)]) == (0.0, 0.0)


def test_va_single_pair_with_intensity() -> None:
    # afraid (0.073, 0.84) vs scared (0.083, 0.82): d = √(0.01² + 0.02²) = 0.0223607
    # sim = round(1 - 0.0223607/√2, 4) = round(0.9841886, 4) = 0.9842
    # intensities 6 and 3: isim = 1 - 3/6 = 0.5; combined = 0.7*0.9842 + 0.3*0.5 = 0.83894
    va, vai = tm.emotion_va_scores([("Afraid", 6)], [("Scared", 3)])
    assert va == pytest.approx(0.9842)
    assert vai == pytest.approx(0.83894)


def test_va_unknown_intensity_gives_zero_isim() -> None:
    # combined = 0.7*0.9842 + 0.3*0 = 0.68894
    assert tm.emotion_va_scores([("Afraid", None)], [("Scared", 3)])[1] == pytest.approx(0.68894)


def test_va_uses_optimal_not_greedy_matching() -> None:
    # GT [guilty, strong], predicted [inspired, interested]
    # guilty (0.15,0.6)–inspired (0.9,0.7): d = √(0.75²+0.1²) = 0.756637 -> 1 - 0.535025 = 0.4650
    # guilty–interested (0.65,0.6): d = 0.5 -> 1 - 0.353553 = 0.6464
    # strong (0.75,0.7)–inspired: d = 0.15 -> 1 - 0.106066 = 0.8939
    # strong–interested: d = 0.141421 -> 1 - 0.1 = 0.9
    # greedy would take 0.9 then 0.4650 (mean 0.6825); optimal is 0.6464 + 0.8939 -> mean 0.77015
    va, _ = tm.emotion_va_scores([("Guilty", None), ("Strong", None)], [("Inspired", None), ("Interested", None)])
    assert va == pytest.approx((0.6464 + 0.8939) / 2)


def test_va_coverage_penalises_unequal_lengths() -> None:
    # GT [afraid, proud], predicted [scared]: best match afraid–scared 0.9842
    # coverage = min(2,1)/max(2,1) = 0.5 -> 0.4921
    va, _ = tm.emotion_va_scores([("Afraid", 2), ("Proud", 5)], [("Scared", 2)])
    assert va == pytest.approx(0.9842 * 0.5)


def test_va_combined_matrix_has_its_own_assignment() -> None:
    # GT [afraid:1, scared:7], predicted [afraid:7, scared:1].
    # sim matrix: diagonal 1.0, off-diagonal 0.9842 -> VA = 1.0 (match same words)
    # combined: same-word cells 0.7*1 + 0.3*(1 - 6/6) = 0.7;
    #           cross cells 0.7*0.9842 + 0.3*(1 - 0/6) = 0.68894 + 0.3 = 0.98894 -> cross matching wins
    va, vai = tm.emotion_va_scores([("Afraid", 1), ("Scared", 7)], [("Afraid", 7), ("Scared", 1)])
    assert va == pytest.approx(1.0)
    assert vai == pytest.approx(0.98894)


def test_va_word_outside_the_twenty_has_similarity_zero() -> None:
    assert tm.emotion_va_scores([("Bored", 3)], [("Bored", 3)]) == (0.0, pytest.approx(0.3))


# ---------------------------------------------------------------------------
# Binary judgements
# ---------------------------------------------------------------------------


def test_targets_fall_back_only_when_missing() -> None:
    assert tm.om_target(None, "yes") == "yes"
    assert tm.om_target("no", "yes") == "no"
    assert tm.om_target("na", "yes") == "na"  # na is an answer: the question is then skipped
    assert tm.human_target(None, "no") == "no"
    assert tm.human_target("yes", "no") == "yes"


def test_scored_targets_keep_only_yes_and_no() -> None:
    assert tm.scored_targets([("B1", "yes"), ("B2", "na"), ("B3", None), ("B4", "no")]) == [("B1", True), ("B4", False)]


def test_confusion_counts_missing_and_na_predictions_as_no() -> None:
    targets = [("B1", True), ("B2", True), ("B3", False), ("B4", False), ("B5", True)]
    # B1 yes/yes TP; B2 yes/na FN; B3 no/yes FP; B4 no/missing TN; B5 yes/missing FN
    assert tm.confusion(targets, {"B1": "yes", "B2": "na", "B3": "yes"}) == (1, 1, 1, 2)


def test_confusion_metrics_hand_computed() -> None:
    # tp=3 fp=1 tn=4 fn=2: acc = 7/10, P = 3/4, R = 3/5, F1 = 2*.75*.6/1.35 = 0.6667
    # MCC = (3*4 - 1*2)/√(4*5*5*6) = 10/√600 = 0.408248
    m = tm.confusion_metrics(3, 1, 4, 2)
    assert m["accuracy"] == pytest.approx(0.7)
    assert m["precision"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx(0.6)
    assert m["f1"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert m["mcc"] == pytest.approx(10 / math.sqrt(600))


def test_confusion_metrics_zero_denominators_give_zero() -> None:
    assert tm.confusion_metrics(0, 0, 0, 0) == {"accuracy": 0, "precision": 0, "recall": 0, "f1": 0, "mcc": 0}
    # all TN: accuracy 1, precision/recall/F1 0 (denominators 0), MCC 0 (denominator 0)
    assert tm.confusion_metrics(0, 0, 5, 0) == {"accuracy": 1, "precision": 0, "recall": 0, "f1": 0, "mcc": 0}


def test_turn_with_no_judgements_scores_accuracy_one_with_empty_counts() -> None:
    out = tm.binary_scores([], {"B1": "yes"}, has_judgements=False)
    assert out["accuracy"] == 1.0
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (0, 0, 0, 0)


def test_turn_whose_judgements_are_all_na_scores_accuracy_zero() -> None:
    targets = tm.scored_targets([("B1", "na"), ("B2", None)])
    out = tm.binary_scores(targets, {"B1": "yes"}, has_judgements=True)
    assert out["accuracy"] == 0.0
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (0, 0, 0, 0)


def test_binary_scores_with_no_predictions_at_all() -> None:
    # targets yes, no: nothing predicted -> FN + TN, accuracy 1/2
    out = tm.binary_scores([("B1", True), ("B2", False)], None, has_judgements=True)
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (0, 0, 1, 1)
    assert out["accuracy"] == 0.5


# ---------------------------------------------------------------------------
# Pairwise
# ---------------------------------------------------------------------------

COMPARISONS = [
    ("original", "alternate", "B"),  # alternate wins
    ("human", "original", "A"),  # human wins
    ("alternate", "human", "B"),  # human wins
]


def test_pairwise_accuracy_counts_matching_letters() -> None:
    # index 0 right, index 1 wrong, index 2 right -> 2/3
    assert tm.pairwise_accuracy(COMPARISONS, {"0": "B", "1": "B", "2": "B"}) == pytest.approx(2 / 3)


def test_pairwise_null_winner_cannot_be_matched_but_counts() -> None:
    comparisons = [("original", "alternate", None), ("original", "human", "A")]
    # index 0 has a null winner: never correct, but still in the denominator -> 1/2
    assert tm.pairwise_accuracy(comparisons, {"0": "A", "1": "A"}) == 0.5


def test_pairwise_no_comparisons_scores_one_and_missing_selection_is_wrong() -> None:
    assert tm.pairwise_accuracy([], {"0": "A"}) == 1.0
    assert tm.pairwise_accuracy(COMPARISONS, {}) == 0.0


def test_ranking_rule_alphabetical_then_stable_by_wins() -> None:
    # wins: original 1, alternate 1, human 0 -> alphabetical [alternate, human, original],
    # stable sort by wins desc -> [alternate(1), original(1), human(0)]
    assert tm.rank_positions({"original": 1, "alternate": 1, "human": 0}) == {"alternate": 0, "original": 1, "human": 2}


def test_kendall_tau_hand_computed() -> None:
    # GT wins: alternate 1, human 2, original 0 -> ranks human 0, alternate 1, original 2
    # EM picks A, A, A: original(idx0) 1, human(idx1) 1, alternate(idx2) 1 -> all tied at 1
    #   alphabetical [alternate, human, original] keeps that order -> alternate 0, human 1, original 2
    # pairs (label order alternate, human, original):
    #   alternate–human: GT 1-0 = +1, EM 0-1 = -1 -> discordant
    #   alternate–original: GT 1-2 = -1, EM 0-2 = -2 -> concordant
    #   human–original: GT 0-2 = -2, EM 1-2 = -1 -> concordant
    # tau = (2 - 1)/3 = 1/3
    assert tm.pairwise_kendall_tau(COMPARISONS, {"0": "A", "1": "A", "2": "A"}) == pytest.approx(1 / 3)


def test_kendall_tau_perfect_and_reversed() -> None:
    assert tm.pairwise_kendall_tau(COMPARISONS, {"0": "B", "1": "A", "2": "B"}) == 1.0
    # EM: original wins idx0 (A), original wins idx1 (B), alternate wins idx2 (A)
    # EM wins original 2, alternate 1, human 0: exactly reversed from GT human>alternate>original
    assert tm.pairwise_kendall_tau(COMPARISONS, {"0": "A", "1": "B", "2": "A"}) == -1.0


def test_kendall_tau_null_cases() -> None:
    # one comparison still has 2 labels; no EM selection -> null
    assert tm.pairwise_kendall_tau([("original", "human", "A")], {}) is None
    # selections only for indices the turn lacks -> null
    assert tm.pairwise_kendall_tau([("original", "human", "A")], {"5": "A"}) is None
    # no comparisons -> fewer than 2 labels -> null
    assert tm.pairwise_kendall_tau([], {"0": "A"}) is None


def test_kendall_tau_ties_are_broken_alphabetically() -> None:
    # GT null winner: both labels have 0 wins; EM picks A: original 1, human 0.
    # GT ranks: alphabetical [human, original]; EM ranks [original, human]
    # single pair human–original: GT 0-1 = -1, EM 1-0 = +1 -> discordant -> tau = -1
    assert tm.pairwise_kendall_tau([("original", "human", None)], {"0": "A"}) == -1.0


# ---------------------------------------------------------------------------
# Response similarity and preference alignment
# ---------------------------------------------------------------------------


def test_token_jaccard_cases() -> None:
    assert tm.token_jaccard("", "") == 1.0
    assert tm.token_jaccard("a", "") == 0.0
    # {i, feel, sad} vs {i, feel, happy}: 2 shared / 4 in union = 0.5 (case-insensitive)
    assert tm.token_jaccard("I feel sad", "i FEEL happy") == 0.5


def test_response_similarity_overall_is_max_and_no_draft_is_zero() -> None:
    refs = {
        "original": tm.tokens("you should rest now"),
        "alternate": tm.tokens("that sounds hard rest now"),
        "human": tm.tokens("that sounds really hard"),
    }
    draft = tm.tokens("that sounds hard")
    sim = tm.response_similarity(draft, refs)
    # original: ∅ shared / 7 -> 0; alternate: 3/5 = 0.6; human: 3/4 = 0.75
    assert sim == {"original": 0.0, "alternate": 0.6, "human": 0.75, "overall": 0.75}
    assert tm.response_similarity(None, refs) == {"original": 0.0, "alternate": 0.0, "human": 0.0, "overall": 0.0}


def test_preference_alignment_weights_by_win_share() -> None:
    refs = {"original": tm.tokens("a b"), "alternate": tm.tokens("a c"), "human": tm.tokens("a b c d")}
    draft = tm.tokens("a b")
    # GT wins: human 2, alternate 1 -> shares 2/3, 1/3
    # Jaccard(draft, human) = 2/4 = 0.5; Jaccard(draft, alternate) = 1/3
    # alignment = 2/3*0.5 + 1/3*1/3 = 1/3 + 1/9 = 4/9
    wins = tm.gt_wins(COMPARISONS)
    assert wins == {"alternate": 1, "human": 2, "original": 0}
    assert tm.preference_alignment(draft, refs, wins, 0.123) == pytest.approx(4 / 9)


def test_preference_alignment_without_winner_is_overall_similarity() -> None:
    refs = {"original": tm.tokens("a")}
    assert tm.preference_alignment(tm.tokens("a"), refs, {"original": 0, "human": 0}, 0.42) == 0.42
    assert tm.preference_alignment(None, refs, {"original": 1}, 0.42) == 0.0


# ---------------------------------------------------------------------------
# Judge
# ---------------------------------------------------------------------------


def test_draft_judge_score() -> None:
    # mean(7, 5, 6) = 6 (the null dimension is ignored) -> (6 - 1)/6 = 0.8333
    assert tm.draft_judge_score(
        {"overall_score": 7, "emotional_appropriateness": 5, "helpfulness": 6, "tone_match": None}
    ) == pytest.approx(5 / 6)
    assert tm.draft_judge_score({"overall_score": 1}) == 0.0
    assert tm.draft_judge_score({"overall_score": 7}) == 1.0
    assert tm.draft_judge_score(None) is None
    assert tm.draft_judge_score({"overall_score": None}) is None


def test_draft_judge_score_is_clamped() -> None:
    assert tm.draft_judge_score({"overall_score": 0}) == 0.0  # (0-1)/6 < 0 -> 0
    assert tm.draft_judge_score({"overall_score": 9}) == 1.0  # (9-1)/6 > 1 -> 1


def test_draft_binary_alignment() -> None:
    preferred = [("B1", True), ("B2", False), ("B3", True), ("B4", False)]
    # B1 yes=yes ✓, B2 no=no ✓, B3 na ✗ (counts wrong), B4 missing ✗ -> 2/4
    assert tm.draft_binary_alignment(preferred, {"B1": "yes", "B2": "no", "B3": "na"}) == 0.5
    assert tm.draft_binary_alignment(preferred, None) is None
    assert tm.draft_binary_alignment([], {"B1": "yes"}) is None
