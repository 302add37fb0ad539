"""Krippendorff's alpha between human raters: hand-computed cases, checked against the krippendorff package.

Notation (nominal alpha from the coincidence matrix): two raters per unit, so a
unit where both say c adds 2 to o_cc, and a unit where they say c and k adds 1
to o_ck and 1 to o_kc. n_c are the row sums, n their total, and
alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c * n_k.
"""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from attunebench import catalogue as cat
from attunebench.metrics.agreement import alpha_with_ci, nominal_alpha, rater_agreement


def pairs(*units: tuple[int, int]) -> dict[int, dict[str, int]]:
    """Units rated by raters a and b."""
    return {i: {"a": a, "b": b} for i, (a, b) in enumerate(units)}


def package_alpha(ratings: dict[int, dict[str, int]]) -> float:
    raters = sorted({r for unit in ratings.values() for r in unit})
    data = np.array([[ratings[u].get(r, np.nan) for u in sorted(ratings)] for r in raters], dtype=float)
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def test_perfect_agreement_is_one():
    ratings = pairs((0, 0), (1, 1), (2, 2), (1, 1))
    # no off-diagonal coincidences: observed disagreement 0, so alpha = 1 - 0 = 1
    assert nominal_alpha(ratings) == 1.0 == package_alpha(ratings)


def test_chance_level_agreement_is_zero():
    # 1 unit (0,0), 3 units (1,1), 4 mixed: o_01 = o_10 = 4, n_0 = 2 + 4 = 6, n_1 = 6 + 4 = 10, n = 16;
    # alpha = 1 - 15 * 8 / (2 * 6 * 10) = 1 - 120 / 120 = 0 (observed disagreement equals what chance gives)
    ratings = pairs((0, 0), (1, 1), (1, 1), (1, 1), (0, 1), (0, 1), (1, 0), (1, 0))
    assert nominal_alpha(ratings) == pytest.approx(0.0, abs=1e-12)
    assert package_alpha(ratings) == pytest.approx(0.0, abs=1e-12)


def test_systematic_disagreement_is_negative():
    # a always says 1, b always 0, on 4 units: o_01 = o_10 = 4, n_0 = n_1 = 4, n = 8;
    # alpha = 1 - 7 * 8 / (2 * 4 * 4) = 1 - 56 / 32 = -0.75
    ratings = pairs((1, 0), (1, 0), (1, 0), (1, 0))
    assert nominal_alpha(ratings) == pytest.approx(-0.75)
    assert package_alpha(ratings) == pytest.approx(-0.75)


def test_missing_ratings_and_three_raters_match_the_package():
    ratings = {
        0: {"a": 0, "b": 0, "c": 1},
        1: {"a": 1, "b": 1},
        2: {"a": 2, "c": 2, "b": 2},
        3: {"b": 0, "c": 1},
        4: {"a": 1},  # a single rating is not pairable and changes nothing
    }
    assert nominal_alpha(ratings) == pytest.approx(package_alpha(ratings))
    assert alpha_with_ci(ratings, n_bootstrap=0).units == 4


@pytest.mark.parametrize(
    "ratings",
    [
        {},  # no units
        {0: {"a": 1}, 1: {"a": 0}},  # one rater: nothing is pairable
        pairs((1, 1), (1, 1)),  # one value everywhere: expected disagreement 0, alpha undefined
    ],
)
def test_degenerate_ratings_have_no_alpha(ratings):
    estimate = alpha_with_ci(ratings)
    assert estimate.alpha is None and estimate.ci_low is None and estimate.ci_high is None


def test_bootstrap_interval_is_seeded_and_brackets_alpha():
    ratings = pairs(*[(1, 1)] * 20, *[(0, 0)] * 20, (1, 0), (0, 1), (1, 0))
    first = alpha_with_ci(ratings, n_bootstrap=500, seed=7)
    again = alpha_with_ci(ratings, n_bootstrap=500, seed=7)
    assert first == again  # same seed, same resamples
    assert first.ci_low is not None and first.ci_high is not None and first.alpha is not None
    assert first.ci_low <= first.alpha <= first.ci_high < 1.0 + 1e-12
    perfect = alpha_with_ci(pairs(*[(1, 1)] * 5, *[(0, 0)] * 5), n_bootstrap=200)
    # every resample with both values present has alpha 1; resamples of one value are undefined and dropped
    assert (perfect.ci_low, perfect.ci_high) == (1.0, 1.0)


def run_output(tags_by_turn: list[list[str]], answers: dict[str, str] | None = None) -> dict:
    return {
        "turns": [
            {
                "turnNumber": n,
                "em_emotion_tags": [{"emotion": w, "intensity": 4} for w in tags],
                "em_binary_om_assessment": answers or {},
                "em_binary_human_prediction": {},
                "em_pairwise_selections": {"0": "A"},
            }
            for n, tags in enumerate(tags_by_turn, start=1)
        ]
    }


def test_identical_tag_sets_on_11_of_12_turns_give_high_alpha_not_negative():
    """The motivating case: two raters tag Nervous on turns 1-11 and differ on turn 12 (Upset vs Afraid).

    All 20 items per turn: 240 units; 11 (1,1), 2 mixed (Upset a1 b0, Afraid a0 b1), 227 (0,0).
    o_11 = 22, o_01 = o_10 = 2, o_00 = 454; n_1 = 24, n_0 = 456, n = 480;
    alpha = 1 - 479 * 4 / (2 * 456 * 24) = 1 - 1916 / 21888 = 0.91246...
    Counting only words somebody tagged (the old units) gives n_0 = 2, n_1 = 24, n = 26:
    alpha = 1 - 25 * 4 / (2 * 2 * 24) = -0.0417, "humans cannot agree".
    """
    a = run_output([["Nervous"]] * 11 + [["Upset"]])
    b = run_output([["nervous "]] * 11 + [["Afraid"]])  # spelling is normalised to the catalogue's
    result = rater_agreement({"c1": {"human:a": a, "human:b": b}, "solo": {"human:a": a}}, n_bootstrap=200)
    assert result.raters == ["human:a", "human:b"] and result.conversations == 1
    assert result.emotion.units == 240
    assert result.emotion.alpha == pytest.approx(1 - 1916 / 21888)
    units = {
        (t, item): {"a": int(item == w1), "b": int(item == w2)}
        for t, (w1, w2) in enumerate([("Nervous", "Nervous")] * 11 + [("Upset", "Afraid")])
        for item in cat.PANAS_ITEMS
    }
    assert package_alpha(dict(enumerate(units.values()))) == pytest.approx(result.emotion.alpha)
    old_units = {k: v for k, v in units.items() if v["a"] or v["b"]}
    assert package_alpha(dict(enumerate(old_units.values()))) == pytest.approx(1 - 100 / 96)
    # per item: Nervous is tagged by both on 11 turns and by neither on turn 12, so alpha 1;
    # Upset has one mixed unit and 11 (0,0): o_01 = o_10 = 1, n_1 = 1, n_0 = 23, n = 24: 1 - 23*2/(2*23) = 0
    assert result.per_item["Nervous"].alpha == 1.0
    assert result.per_item["Upset"].alpha == pytest.approx(0.0)
    assert result.per_item["Proud"].alpha is None  # nobody ever tagged it: one value, undefined
    assert result.pairwise.alpha is None and result.pairwise.units == 12  # both always chose A
    assert result.binary.units == 0 and result.binary.alpha is None


def test_binary_agreement_over_om_answers():
    # 4 turns, one question: a says yes,yes,no,na; b says yes,yes,no,no.
    # o_yy = 4, o_nn = 2, o_n,na = o_na,n = 1; n_y = 4, n_n = 3, n_na = 1, n = 8;
    # sum_{c!=k} n_c n_k = 2 * (4*3 + 4*1 + 3*1) = 38; alpha = 1 - 7 * 2 / 38 = 0.6316
    answers_a = ["yes", "yes", "no", "na"]
    answers_b = ["yes", "yes", "no", "no"]
    outputs = {
        "c1": {
            "a": {
                "turns": [{"turnNumber": n + 1, "em_binary_om_assessment": {"q1": x}} for n, x in enumerate(answers_a)]
            },
            "b": {
                "turns": [{"turnNumber": n + 1, "em_binary_om_assessment": {"q1": x}} for n, x in enumerate(answers_b)]
            },
        }
    }
    result = rater_agreement(outputs, n_bootstrap=0)
    assert result.binary.units == 4 and result.binary.alpha == pytest.approx(1 - 14 / 38)
    assert result.emotion.alpha is None  # nobody tagged anything: one value everywhere, undefined
