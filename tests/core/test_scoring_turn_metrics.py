"""Per-turn metrics (SPEC 5.1) against hand-computed values; arithmetic in the comments.

Every case runs through the engine (``tests.core.turn_cases.score_turn_case``:
canonical reader, ``prepare_turn``, ``score_turn``), the path ``score_documents``
takes; a few pure helpers the engine calls directly are tested directly.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from attunebench.metrics import turn_metrics as tm
from tests.core.turn_cases import score_turn_case

EMOTION_KEYS = ("emotion_precision", "emotion_recall", "emotion_f1", "emotion_f1_intensity", "emotion_hit_rate")


def emotions(gt: list[tm.Tag], pred: list[tm.Tag]) -> dict[str, Any]:
    record = score_turn_case(gt_tags=gt, em_tags=pred)
    return {key.removeprefix("emotion_"): record[key] for key in (*EMOTION_KEYS, "emotion_intensity_mae")}


def five(scores: dict[str, Any]) -> tuple[float, ...]:
    return tuple(scores[k] for k in ("precision", "recall", "f1", "f1_intensity", "hit_rate"))


def va(gt: list[tm.Tag], pred: list[tm.Tag]) -> tuple[float, float]:
    record = score_turn_case(gt_tags=gt, em_tags=pred)
    return record["emotion_va_score"], record["emotion_va_intensity_score"]


def om_counts(record: dict[str, Any]) -> tuple[int, int, int, int]:
    b = record["binary_om"]
    return b["tp"], b["fp"], b["tn"], b["fn"]


def observed(*pairs: tuple[str, str | None]) -> list[tuple[str, str | None, str | None, str | None]]:
    """Judgements with only an observed answer (the OM target)."""
    return [(q, o, None, None) for q, o in pairs]


# ---------------------------------------------------------------------------
# Emotion F1, F1×I, hit rate, intensity MAE
# ---------------------------------------------------------------------------


def test_emotion_both_empty_scores_one_everywhere() -> None:
    s = emotions([], [])
    assert five(s) == (1, 1, 1, 1, 1)
    assert s["intensity_mae"] is None


def test_emotion_gt_empty_prediction_not_scores_zero() -> None:
    s = emotions([], [("Afraid", 3)])
    assert five(s) == (0, 0, 0, 0, 0)
    assert s["intensity_mae"] is None


def test_emotion_prediction_empty_gt_not_scores_zero() -> None:
    # precision denominator |p| = 0 -> 0; recall = 0/1; hit rate = 0/1
    s = emotions([("Upset", 4)], [])
    assert five(s) == (0, 0, 0, 0, 0)


def test_emotion_partial_overlap_with_intensities() -> None:
    # g = {upset:5, afraid:2, proud:None}, p = {upset:2, afraid:2, nervous:4}
    # tp = 2 (upset, afraid); precision = 2/3, recall = 2/3, F1 = 2/3
    # shared with both intensities: upset |5-2| = 3 -> 1 - 3/6 = 0.5; afraid |2-2| = 0 -> 1
    # F1×I = 2/3 * (0.5 + 1)/2 = 2/3 * 0.75 = 0.5; intensity MAE = (3 + 0)/2 = 1.5; hit rate = 2/3
    s = emotions(
        [("Upset", 5), ("Afraid", 2), ("Proud", None)],
        [("upset", 2), ("afraid", 2), ("nervous", 4)],
    )
    assert s["precision"] == pytest.approx(2 / 3)
    assert s["recall"] == pytest.approx(2 / 3)
    assert s["f1"] == pytest.approx(2 / 3)
    assert s["f1_intensity"] == pytest.approx(0.5)
    assert s["intensity_mae"] == pytest.approx(1.5)
    assert s["hit_rate"] == pytest.approx(2 / 3)


def test_emotion_f1_intensity_is_zero_without_shared_intensities() -> None:
    # g = {proud: None}, p = {proud: 4, alert: 3}: tp = 1, P = 1/2, R = 1, F1 = 2*(1/2)/(3/2) = 2/3
    # no shared emotion has both intensities -> F1×I = 0 and MAE null
    s = emotions([("Proud", None)], [("Proud", 4), ("Alert", 3)])
    assert s["f1"] == pytest.approx(2 / 3)
    assert s["f1_intensity"] == 0.0
    assert s["intensity_mae"] is None
    assert s["hit_rate"] == 1.0


def test_emotion_comparison_trims_and_lowercases_and_dedupes() -> None:
    # " UPSET " and "upset" are the same emotion; the repeat counts once (sets).
    s = emotions([(" UPSET ", 3)], [("upset", 3), ("Upset", 7)])
    assert five(s)[:3] == (1.0, 1.0, 1.0)
    assert s["f1_intensity"] == 1.0  # first intensity 3 kept: |3-3| = 0
    assert s["intensity_mae"] == 0.0


def test_emotion_disjoint_sets_score_zero() -> None:
    s = emotions([("Upset", 3)], [("Proud", 3)])
    assert five(s) == (0, 0, 0, 0, 0)


# ---------------------------------------------------------------------------
# Emotion VA (Hungarian)
# ---------------------------------------------------------------------------


def test_va_empty_cases() -> None:
    assert va([], []) == (1.0, 1.0)
    assert va([("Upset", 3)], []) == (0.0, 0.0)
    assert va([], [("Upset", 3)]) == (0.0, 0.0)


def test_va_single_pair_with_intensity() -> None:
    # afraid (0.073, 0.84) vs scared (0.083, 0.82): d = √(0.01² + 0.02²) = 0.0223607
    # sim = round(1 - 0.0223607/√2, 4) = round(0.9841886, 4) = 0.9842
    # intensities 6 and 3: isim = 1 - 3/6 = 0.5; combined = 0.7*0.9842 + 0.3*0.5 = 0.83894
    score, vai = va([("Afraid", 6)], [("Scared", 3)])
    assert score == pytest.approx(0.9842)
    assert vai == pytest.approx(0.83894)


def test_va_unknown_intensity_gives_zero_isim() -> None:
    # combined = 0.7*0.9842 + 0.3*0 = 0.68894
    assert va([("Afraid", None)], [("Scared", 3)])[1] == pytest.approx(0.68894)


def test_va_uses_optimal_not_greedy_matching() -> None:
    # GT [guilty, strong], predicted [inspired, interested]
    # guilty (0.15,0.6)–inspired (0.9,0.7): d = √(0.75²+0.1²) = 0.756637 -> 1 - 0.535025 = 0.4650
    # guilty–interested (0.65,0.6): d = 0.5 -> 1 - 0.353553 = 0.6464
    # strong (0.75,0.7)–inspired: d = 0.15 -> 1 - 0.106066 = 0.8939
    # strong–interested: d = 0.141421 -> 1 - 0.1 = 0.9
    # greedy would take 0.9 then 0.4650 (mean 0.6825); optimal is 0.6464 + 0.8939 -> mean 0.77015
    score, _ = va([("Guilty", None), ("Strong", None)], [("Inspired", None), ("Interested", None)])
    assert score == pytest.approx((0.6464 + 0.8939) / 2)


def test_va_coverage_penalises_unequal_lengths() -> None:
    # GT [afraid, proud], predicted [scared]: best match afraid–scared 0.9842
    # coverage = min(2,1)/max(2,1) = 0.5 -> 0.4921
    score, _ = va([("Afraid", 2), ("Proud", 5)], [("Scared", 2)])
    assert score == pytest.approx(0.9842 * 0.5)


def test_va_combined_matrix_has_its_own_assignment() -> None:
    # GT [afraid:1, scared:7], predicted [afraid:7, scared:1].
    # sim matrix: diagonal 1.0, off-diagonal 0.9842 -> VA = 1.0 (match same words)
    # combined: same-word cells 0.7*1 + 0.3*(1 - 6/6) = 0.7;
    #           cross cells 0.7*0.9842 + 0.3*(1 - 0/6) = 0.68894 + 0.3 = 0.98894 -> cross matching wins
    score, vai = va([("Afraid", 1), ("Scared", 7)], [("Afraid", 7), ("Scared", 1)])
    assert score == pytest.approx(1.0)
    assert vai == pytest.approx(0.98894)


def test_va_word_outside_the_twenty_has_similarity_zero() -> None:
    # Readers never let such a word reach scoring (GT rejects it, an EM's is dropped); the
    # engine's VA function still gives it similarity 0, with isim 1 -> 0.3·1 = 0.3.
    bored = tm.va_index(tm.norm_emotion("Bored"))
    assert tm.emotion_va_from_indices([(bored, 3)], [(bored, 3)]) == (0.0, pytest.approx(0.3))


# ---------------------------------------------------------------------------
# Binary judgements
# ---------------------------------------------------------------------------


def test_targets_fall_back_only_when_missing() -> None:
    assert tm.om_target(None, "yes") == "yes"
    assert tm.om_target("no", "yes") == "no"
    assert tm.om_target("na", "yes") == "na"  # na is an answer: the question is then skipped
    assert tm.human_target(None, "no") == "no"
    assert tm.human_target("yes", "no") == "yes"


def test_only_yes_and_no_targets_are_scored() -> None:
    # targets B1 yes, B2 na, B3 missing, B4 no; the EM says yes to all four
    # only B1 (TP) and B4 (FP) are scored: B2 and B3 are skipped, not counted as anything
    record = score_turn_case(
        judgements=observed(("B1", "yes"), ("B2", "na"), ("B3", None), ("B4", "no")),
        om=dict.fromkeys(("B1", "B2", "B3", "B4"), "yes"),
    )
    assert om_counts(record) == (1, 1, 0, 0)


def test_an_explicit_na_observed_is_skipped_not_replaced_by_llm_value() -> None:
    # B17 observed na, llmValue yes: na is an answer, so the OM target is na and B17 is skipped
    # (the drill-down once fell back to llmValue here); B1 observed yes -> TP
    record = score_turn_case(
        judgements=[("B17", "na", None, "yes"), ("B1", "yes", None, None)], om={"B17": "yes", "B1": "yes"}
    )
    assert om_counts(record) == (1, 0, 0, 0)


def test_confusion_counts_missing_and_na_predictions_as_no() -> None:
    judgements = observed(("B1", "yes"), ("B2", "yes"), ("B3", "no"), ("B4", "no"), ("B5", "yes"))
    # B1 yes/yes TP; B2 yes/na FN; B3 no/yes FP; B4 no/missing TN; B5 yes/missing FN
    record = score_turn_case(judgements=judgements, om={"B1": "yes", "B2": "na", "B3": "yes"})
    assert om_counts(record) == (1, 1, 1, 2)


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
    out = score_turn_case(om={"B1": "yes"})["binary_om"]
    assert out["accuracy"] == 1.0
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (0, 0, 0, 0)


def test_turn_whose_judgements_are_all_na_scores_accuracy_zero() -> None:
    out = score_turn_case(judgements=observed(("B1", "na"), ("B2", None)), om={"B1": "yes"})["binary_om"]
    assert out["accuracy"] == 0.0
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (0, 0, 0, 0)


def test_binary_scores_with_no_predictions_at_all() -> None:
    # targets yes, no: nothing predicted -> FN + TN, accuracy 1/2
    record = score_turn_case(judgements=observed(("B1", "yes"), ("B2", "no")))
    assert om_counts(record) == (0, 0, 1, 1)
    assert record["binary_om"]["accuracy"] == 0.5
    # every variant reads its own predictions: the human twin here has none either
    assert record["binary_human"]["accuracy"] == 0.5


# ---------------------------------------------------------------------------
# Pairwise
# ---------------------------------------------------------------------------

COMPARISONS = [
    ("original", "alternate", "B"),  # alternate wins
    ("human", "original", "A"),  # human wins
    ("alternate", "human", "B"),  # human wins
]


def pairwise(comparisons: list[tm.Comparison], selections: dict[str, str]) -> tuple[float, float | None]:
    record = score_turn_case(comparisons=comparisons, selections=selections)
    return record["pairwise_accuracy"], record["pairwise_kendall_tau"]


def test_pairwise_accuracy_counts_matching_letters() -> None:
    # index 0 right, index 1 wrong, index 2 right -> 2/3
    assert pairwise(COMPARISONS, {"0": "B", "1": "B", "2": "B"})[0] == pytest.approx(2 / 3)


def test_pairwise_null_winner_cannot_be_matched_but_counts() -> None:
    comparisons = [("original", "alternate", None), ("original", "human", "A")]
    # index 0 has a null winner: never correct, but still in the denominator -> 1/2
    assert pairwise(comparisons, {"0": "A", "1": "A"})[0] == 0.5


def test_pairwise_no_comparisons_scores_one_and_missing_selection_is_wrong() -> None:
    assert pairwise([], {"0": "A"})[0] == 1.0
    assert pairwise(COMPARISONS, {})[0] == 0.0


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
    assert pairwise(COMPARISONS, {"0": "A", "1": "A", "2": "A"})[1] == pytest.approx(1 / 3)


def test_kendall_tau_perfect_and_reversed() -> None:
    assert pairwise(COMPARISONS, {"0": "B", "1": "A", "2": "B"})[1] == 1.0
    # EM: original wins idx0 (A), original wins idx1 (B), alternate wins idx2 (A)
    # EM wins original 2, alternate 1, human 0: exactly reversed from GT human>alternate>original
    assert pairwise(COMPARISONS, {"0": "A", "1": "B", "2": "A"})[1] == -1.0


def test_kendall_tau_null_cases() -> None:
    # one comparison still has 2 labels; no EM selection -> null
    assert pairwise([("original", "human", "A")], {})[1] is None
    # selections only for indices the turn lacks -> null
    assert pairwise([("original", "human", "A")], {"5": "A"})[1] is None
    # no comparisons -> fewer than 2 labels -> null
    assert pairwise([], {"0": "A"})[1] is None


def test_kendall_tau_ties_are_broken_alphabetically() -> None:
    # GT null winner: both labels have 0 wins; EM picks A: original 1, human 0.
    # GT ranks: alphabetical [human, original]; EM ranks [original, human]
    # single pair human–original: GT 0-1 = -1, EM 1-0 = +1 -> discordant -> tau = -1
    assert pairwise([("original", "human", None)], {"0": "A"})[1] == -1.0


# ---------------------------------------------------------------------------
# Response similarity and preference alignment
# ---------------------------------------------------------------------------


def test_token_jaccard_cases() -> None:
    assert tm.jaccard(tm.tokens(""), tm.tokens("")) == 1.0
    assert tm.jaccard(tm.tokens("a"), tm.tokens("")) == 0.0
    # {i, feel, sad} vs {i, feel, happy}: 2 shared / 4 in union = 0.5 (case-insensitive)
    assert tm.jaccard(tm.tokens("I feel sad"), tm.tokens("i FEEL happy")) == 0.5


SIMILARITY_KEYS = (
    "response_similarity_original",
    "response_similarity_alternate",
    "response_similarity_human",
    "response_similarity",
)


def test_response_similarity_overall_is_max_and_no_draft_is_zero() -> None:
    texts = {
        "llm_response": "you should rest now",
        "alternates": {"llmImproved": "that sounds hard rest now", "humanEdited": "that sounds really hard"},
    }
    record = score_turn_case(**texts, draft="that sounds hard")
    # original: ∅ shared / 7 -> 0; alternate: 3/5 = 0.6; human: 3/4 = 0.75
    assert tuple(record[k] for k in SIMILARITY_KEYS) == (0.0, 0.6, 0.75, 0.75)
    for draft in (None, "   "):  # a blank draft is no draft
        record = score_turn_case(**texts, draft=draft)
        assert tuple(record[k] for k in SIMILARITY_KEYS) == (0.0, 0.0, 0.0, 0.0)


def alignment(comparisons: list[tm.Comparison], draft: str | None, **texts: Any) -> dict[str, Any]:
    return score_turn_case(comparisons=comparisons, draft=draft, **texts)


def test_preference_alignment_weights_by_win_share() -> None:
    texts = {"llm_response": "a b", "alternates": {"llmImproved": "a c", "humanEdited": "a b c d"}}
    # GT wins: human 2, alternate 1 -> shares 2/3, 1/3
    # Jaccard(draft, human) = 2/4 = 0.5; Jaccard(draft, alternate) = 1/3
    # alignment = 2/3*0.5 + 1/3*1/3 = 1/3 + 1/9 = 4/9
    assert tm.gt_wins(COMPARISONS) == {"alternate": 1, "human": 2, "original": 0}
    assert alignment(COMPARISONS, "a b", **texts)["response_preference_alignment"] == pytest.approx(4 / 9)


def test_preference_alignment_leaves_a_winning_label_without_text_out_of_both_sums() -> None:
    # wins: original 1 (text "a b c"), human 1 (humanEdited empty: no text), alternate 0
    # renormalised over labels with text: (1 * Jaccard("a b", "a b c") = 2/3) / 1 = 2/3
    # (weighting by wins/n with 0 for the missing text would give 0.5*2/3 = 1/3)
    comparisons = [("original", "alternate", "A"), ("human", "original", "A")]
    texts = {"llm_response": "a b c", "alternates": {"llmImproved": "x y", "humanEdited": ""}}
    assert alignment(comparisons, "a b", **texts)["response_preference_alignment"] == pytest.approx(2 / 3)
    # whitespace-only text is no text either
    texts["alternates"] = {"llmImproved": "x y", "humanEdited": "   "}
    assert alignment(comparisons, "a b", **texts)["response_preference_alignment"] == pytest.approx(2 / 3)


def test_preference_alignment_is_zero_when_no_winning_label_has_text() -> None:
    # human wins both comparisons but the turn has no alternates: no winning text -> 0,
    # although the overall similarity (draft vs original: 2/3) is not 0
    comparisons = [("human", "alternate", "A"), ("alternate", "human", "B")]
    record = alignment(comparisons, "a b", llm_response="a b c")
    assert record["response_similarity"] == pytest.approx(2 / 3)
    assert record["response_preference_alignment"] == 0.0


def test_preference_alignment_without_winner_is_overall_similarity() -> None:
    # null winners only: alignment = overall similarity = Jaccard("a c", "a b") = 1/3
    record = alignment([("original", "human", None)], "a c", llm_response="a b")
    assert record["response_preference_alignment"] == record["response_similarity"] == pytest.approx(1 / 3)
    assert alignment([("original", "human", "A")], None, llm_response="a")["response_preference_alignment"] == 0.0


# ---------------------------------------------------------------------------
# Judge
# ---------------------------------------------------------------------------


def judge(scores: dict[str, float | None] | None) -> float | None:
    return score_turn_case(draft="d", judge=scores)["draft_judge_score"]


def test_draft_judge_score() -> None:
    # mean(7, 5, 6) = 6 (the null dimension is ignored) -> (6 - 1)/6 = 0.8333
    assert judge(
        {"overall_score": 7, "emotional_appropriateness": 5, "helpfulness": 6, "tone_match": None}
    ) == pytest.approx(5 / 6)
    assert judge({"overall_score": 1}) == 0.0
    assert judge({"overall_score": 7}) == 1.0
    assert judge(None) is None
    assert judge({"overall_score": None}) is None


def test_draft_judge_score_is_clamped() -> None:
    # the reader only lets 1-7 through, so the clamp guards the engine's own arithmetic
    assert tm.draft_judge_score({"overall_score": 0}) == 0.0  # (0-1)/6 < 0 -> 0
    assert tm.draft_judge_score({"overall_score": 9}) == 1.0  # (9-1)/6 > 1 -> 1


def draft_alignment(judgements: list[Any], answers: dict[str, str | None] | None) -> float | None:
    return score_turn_case(judgements=judgements, draft="d", draft_binary=answers)["draft_binary_alignment"]


def test_draft_binary_alignment() -> None:
    preferred = [
        ("B1", "no", "yes", None),
        ("B2", "yes", "no", None),
        ("B3", "no", "yes", None),
        ("B4", None, "no", None),
    ]
    # targets (preferred): B1 yes, B2 no, B3 yes, B4 no
    # B1 yes=yes ✓, B2 no=no ✓, B3 na ✗ (counts wrong), B4 missing ✗ -> 2/4
    assert draft_alignment(preferred, {"B1": "yes", "B2": "no", "B3": "na"}) == 0.5
    assert draft_alignment(preferred, None) is None
    assert draft_alignment([], {"B1": "yes"}) is None


def test_draft_binary_alignment_target_is_preferred_else_observed() -> None:
    # B1 preferred missing, observed yes -> target yes; B2 preferred missing, observed no -> target no;
    # B3 preferred na -> skipped (na is an answer, observed not consulted); B4 nothing -> skipped
    judgements = [
        ("B1", "yes", None, None),
        ("B2", "no", None, None),
        ("B3", "yes", "na", None),
        ("B4", None, None, "yes"),
    ]
    # answers: B1 yes ✓, B2 yes ✗ -> 1/2 (B3, B4 are not targets)
    assert draft_alignment(judgements, {"B1": "yes", "B2": "yes", "B3": "yes", "B4": "yes"}) == 0.5


def test_draft_binary_alignment_is_null_for_empty_answers_or_no_target() -> None:
    judgements = [("B1", "yes", "yes", None)]
    assert draft_alignment(judgements, {}) is None  # empty assessment = absent, not "all wrong"
    assert draft_alignment([("B1", "na", "na", None), ("B2", None, None, None)], {"B1": "yes"}) is None


# ---------------------------------------------------------------------------
# Per-judgement detail (what pages show beside the scores)
# ---------------------------------------------------------------------------


def test_judgement_details_agree_with_the_confusion_counts() -> None:
    from attunebench.metrics.engine import judgement_details
    from tests.core.turn_cases import run_turn_document, turn_document

    judgements = [("B17", "no", "na", None), ("B1", None, None, "yes"), ("B2", "yes", None, None)]
    turn = turn_document(judgements=judgements)
    em = run_turn_document(om={"B17": "na", "B1": "yes"}, human={"B2": "yes"}, draft="d", draft_binary={"B2": "na"})
    details = {(d.question_id, d.variant): d for d in judgement_details(turn, em)}
    # B17: OM target observed "no"; the EM's na counts as "no" -> correct
    assert details[("B17", "binary_om")].counted_as == "no" and details[("B17", "binary_om")].correct is True
    # B17: human target is the explicit na -> not scored (no fallback to observed)
    assert details[("B17", "binary_human")].target is None and details[("B17", "binary_human")].correct is None
    # B1: OM target falls back to llmValue yes; EM yes -> correct. B2: human target observed yes; EM yes
    assert details[("B1", "binary_om")].correct is True and details[("B2", "binary_human")].correct is True
    # draft: B2 target yes, answer na -> wrong; B17 is not a target
    assert details[("B2", "draft_binary")].correct is False and details[("B17", "draft_binary")].correct is None
    record = score_turn_case(judgements=judgements, om={"B17": "na", "B1": "yes"}, human={"B2": "yes"})
    for variant in ("binary_om", "binary_human"):
        counts = record[variant]
        marks = [d.correct for d in details.values() if d.variant == variant and d.correct is not None]
        assert (marks.count(True), len(marks)) == (
            counts["tp"] + counts["tn"],
            sum(counts[k] for k in ("tp", "fp", "tn", "fn")),
        )
