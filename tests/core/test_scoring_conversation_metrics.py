"""Per-conversation metrics (SPEC 5.2) against hand-computed values."""

from __future__ import annotations

from typing import Any

import pytest

from attunebench import catalogue as cat
from attunebench.canonical import Panas
from attunebench.metrics import conversation_metrics as cm
from attunebench.metrics.engine import panas_side

P = cm.PanasSide


def side(items: dict[str, Any], **totals: int) -> cm.PanasSide | None:
    """A PANAS object as the engine sees it: read by the canonical reader, then reduced."""
    return panas_side(Panas.model_validate({"items": items, **totals}))


def test_panas_totals_derive_from_items_and_clamp() -> None:
    # all ten PA items 7 -> 70; NA items all 1 -> 10
    both = side({**dict.fromkeys(cat.POSITIVE_AFFECT_ITEMS, 7), **dict.fromkeys(cat.NEGATIVE_AFFECT_ITEMS, 1)})
    assert (both.positive, both.negative) == (70, 10)
    # only three NA items given: no NA total; no PA item -> None
    partial = side({"Upset": 3, "afraid": 2, "Guilty": 1})
    assert (partial.positive, partial.negative) == (None, None)
    # a given total wins and is kept
    assert side({"Upset": 3}, totalNegativeAffect=25).negative == 25
    assert side({}) is None  # an empty survey is no side at all


def test_panas_mae_normalized_and_baseline_adjusted() -> None:
    pre = P(30, 40, {})
    post = P(40, 20, {})
    predicted = P(37, 32, {})
    out = cm.panas_scores(post, predicted, pre)
    # errors: PA |40-37| = 3, NA |20-32| = 12 -> MAE 7.5 -> normalised 1 - 7.5/60 = 0.875
    assert out["panas_pa_error"] == 3 and out["panas_na_error"] == 12
    assert out["panas_mae"] == 7.5
    assert out["panas_normalized"] == pytest.approx(0.875)
    # PA: naive = 1 - |40-30|/60 = 5/6; raw = 1 - 3/60 = 0.95; adj = (0.95 - 5/6)/(1/6) = 0.7
    # NA: naive = 1 - |20-40|/60 = 2/3; raw = 1 - 12/60 = 0.8; adj = (0.8 - 2/3)/(1/3) = 0.4
    assert out["panas_pa_baseline_adjusted"] == pytest.approx(0.7)
    assert out["panas_na_baseline_adjusted"] == pytest.approx(0.4)
    assert out["panas_baseline_adjusted"] == pytest.approx(0.55)


def test_panas_baseline_adjusted_is_null_when_post_equals_pre() -> None:
    # PA post == pre -> null; NA: naive = 1 - 10/60, raw = 1 - 0 = 1 -> adj = 1
    out = cm.panas_scores(P(40, 30, {}), P(20, 30, {}), P(40, 40, {}))
    assert out["panas_pa_baseline_adjusted"] is None
    assert out["panas_na_baseline_adjusted"] == pytest.approx(1.0)
    assert out["panas_baseline_adjusted"] == pytest.approx(1.0)
    both_unchanged = cm.panas_scores(P(40, 30, {}), P(20, 10, {}), P(40, 30, {}))
    assert both_unchanged["panas_baseline_adjusted"] is None


def test_panas_baseline_adjusted_clamps_to_minus_one() -> None:
    # post 12, pre 10: naive = 1 - 2/60 = 58/60; predicted 70: raw = max(0, 1 - 58/60) = 2/60
    # adj = (2/60 - 58/60)/(2/60) = -28 -> clamped to -1
    out = cm.panas_scores(P(12, None, {}), P(70, None, {}), P(10, None, {}))
    assert out["panas_baseline_adjusted"] == -1.0


def test_panas_missing_side_uses_forty() -> None:
    # GT PA 52 with no predicted PA -> |52 - 40| = 12; NA missing on both ends -> side absent
    out = cm.panas_scores(P(52, None, {}), P(None, None, {}), P(30, None, {}))
    assert out["panas_pa_error"] == 12
    assert out["panas_na_error"] is None
    assert out["panas_mae"] == 12
    assert out["panas_normalized"] == pytest.approx(0.8)
    assert out["panas_baseline_adjusted"] is None  # needs post, predicted and pre


def test_panas_without_any_data_is_null() -> None:
    out = cm.panas_scores(None, None, None)
    assert out["panas_mae"] is None and out["panas_normalized"] is None
    assert out["panas_baseline_adjusted"] is None and out["panas_item_mae"] is None


def test_panas_item_level() -> None:
    post = side({"Proud": 5, "Upset": 2, "Alert": 4})
    predicted = side({"Proud": 3, "Upset": 2})  # Alert not predicted: left out
    pre = side({"Proud": 2, "Upset": 2, "Alert": 1})
    out = cm.panas_scores(post, predicted, pre)
    # item errors: Proud 2, Upset 0 -> MAE 1 -> normalised 1 - 1/6 = 5/6
    assert out["panas_item_mae"] == 1.0
    assert out["panas_item_normalized"] == pytest.approx(5 / 6)
    # Proud: naive = 1 - 3/6 = 0.5, raw = 1 - 2/6 = 2/3 -> adj = (2/3 - 1/2)/(1/2) = 1/3
    # Upset: post == pre -> null. Mean of non-null = 1/3
    assert out["panas_item_baseline_adjusted"] == pytest.approx(1 / 3)


def test_q1_set_f1() -> None:
    assert cm.set_f1([], []) == 1.0
    assert cm.set_f1(["Other"], []) == 0.0
    assert cm.set_f1([], ["Other"]) == 0.0
    # g = {a, b}, p = {A, c}: tp 1, P 1/2, R 1/2 -> F1 1/2 (case-insensitive)
    assert (
        cm.set_f1(
            ["To just listen or let me vent", "Other"],
            ["to just listen or let me vent ", "Specific information or advice"],
        )
        == 0.5
    )
    assert cm.set_f1(["Other"], ["Specific information or advice"]) == 0.0


def test_q2_q3_match_is_trimmed_case_insensitive() -> None:
    assert cm.option_match("Mixed or conflicted", "  mixed OR conflicted ") == 1.0
    assert cm.option_match("Mixed or conflicted", "Implied or indirect") == 0.0
    assert cm.option_match("Mixed or conflicted", None) == 0.0
    assert cm.option_match(None, None) == 1.0


def test_q3_ordinal_distance() -> None:
    best, mostly, mixed, off = cat.Q3_OPTIONS
    assert cm.q3_ordinal_distance(best, off) == 3
    assert cm.q3_ordinal_distance(mixed, mostly.upper()) == 1
    assert cm.q3_ordinal_distance(None, None) == 0  # both unknown
    assert cm.q3_ordinal_distance(mostly, "something else") == 3  # one unknown
    assert cm.q3_ordinal_distance(None, mixed) == 3


def test_q3_follow_up_fuzzy_f1() -> None:
    gt = ["Too much advice", "Assumed things about me"]
    predicted = ["too much advice", "Made assumptions about me", "Too formal"]
    # predicted credits: "too much advice" exact -> 1
    #   "made assumptions about me" vs {"assumed","things","about","me"}: shared {about, me} = 2,
    #     union {made, assumptions, about, me, assumed, things} = 6 -> 1/3 >= 0.3 -> 1/3
    #     vs {"too","much","advice"}: 0 -> best 1/3
    #   "too formal" vs "too much advice": shared {too} = 1, union 4 -> 0.25 < 0.3 -> 0;
    #     vs "assumed things about me": 0 -> 0
    # precision = (1 + 1/3 + 0)/3 = 4/9
    # GT credits: "too much advice" exact -> 1; "assumed things about me": best is 1/3 -> 1/3
    # recall = (1 + 1/3)/2 = 2/3; F1 = 2 * 4/9 * 2/3 / (4/9 + 2/3) = (16/27)/(10/9) = 8/15
    assert cm.fuzzy_list_f1(gt, predicted) == pytest.approx(8 / 15)


def test_q3_follow_up_empty_cases() -> None:
    assert cm.fuzzy_list_f1([], []) == 1.0
    assert cm.fuzzy_list_f1(["Too generic"], []) == 0.0
    assert cm.fuzzy_list_f1([], ["Too generic"]) == 0.0
    assert cm.fuzzy_list_f1(["Too generic"], ["Repeated itself"]) == 0.0


def test_q3_follow_up_works_on_lists_duplicates_keep_their_own_credit() -> None:
    # gt = [too generic, too generic], predicted = [too generic]
    # GT credits: each "too generic" exactly equals a predicted entry -> 1 + 1; recall = 2/2 = 1
    # predicted credits: 1; precision = 1/1 = 1 -> F1 1
    assert cm.fuzzy_list_f1(["Too generic", "too generic "], ["TOO GENERIC"]) == 1.0
    # gt = [too generic, repeated itself], predicted = [too generic, too generic]
    # predicted credits 1 + 1 -> precision 2/2 = 1 (duplicates are not dropped)
    # GT credits: "too generic" 1; "repeated itself" vs "too generic": Jaccard 0 -> 0; recall 1/2
    # F1 = 2*1*0.5/1.5 = 2/3
    assert cm.fuzzy_list_f1(["Too generic", "Repeated itself"], ["Too generic", "too generic"]) == pytest.approx(2 / 3)
    # gt = [too much advice], predicted = [much advice, much advice, pushed too hard]
    # "much advice" vs "too much advice": {much, advice} / {too, much, advice} = 2/3 >= 0.3 -> 2/3, twice
    # "pushed too hard" vs "too much advice": {too} / 5 tokens = 0.2 < 0.3 -> 0
    # precision = (2/3 + 2/3 + 0)/3 = 4/9; recall: "too much advice" best 2/3 -> 2/3
    # F1 = 2 * 4/9 * 2/3 / (4/9 + 6/9) = (16/27)/(10/9) = 8/15
    # (deduplicated sets would give P = (2/3 + 0)/2 = 1/3, R = 2/3, F1 = 4/9: the list rule differs)
    assert cm.fuzzy_list_f1(["Too much advice"], ["much advice", "Much advice", "pushed too hard"]) == pytest.approx(
        8 / 15
    )


def test_four_branch_missing_prediction_counts_as_four() -> None:
    gt = {"perceiving": 7, "facilitating": 2, "understanding": 5, "managing": 1}
    predicted = {"perceiving": 6, "facilitating": 2}
    # errors: |7-6| = 1, |2-2| = 0, |5-4| = 1 (default 4), |1-4| = 3 -> MAE 5/4 = 1.25
    # normalised = 1 - 1.25/6 = 0.791667
    mae, norm = cm.four_branch(gt, predicted)
    assert mae == 1.25
    assert norm == pytest.approx(1 - 1.25 / 6)


def test_four_branch_without_gt_is_zero_one() -> None:
    assert cm.four_branch({}, {"perceiving": 1}) == (0.0, 1.0)
    assert cm.four_branch(None, None) == (0.0, 1.0)


def test_four_branch_worst_case_is_floored() -> None:
    # |1 - 7| = 6 -> MAE 6 -> 1 - 6/6 = 0
    assert cm.four_branch({"managing": 1}, {"managing": 7}) == (6.0, 0.0)


def test_q3_follow_up_entries_are_lower_cased_not_case_folded() -> None:
    # SPEC 5.2: trim + lower-case each entry. "STRASSE" lower-cases to "strasse", not "straße" (case
    # folding would equate them): no exact match, and token Jaccard {straße} vs {strasse} = 0 -> F1 0
    assert cm.fuzzy_list_f1(["Straße"], ["STRASSE"]) == 0.0
    # the same word in another case is the same entry: exact -> F1 1
    assert cm.fuzzy_list_f1([" Straße"], ["STRAßE "]) == 1.0
