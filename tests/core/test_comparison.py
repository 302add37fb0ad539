"""Comparable leaderboards and skill over the prior baseline, on constructed reports."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attunebench.metrics import analysis as an
from attunebench.metrics.comparison import MIN_CONVERSATIONS_FOR_CI, set_fingerprint, skill, split_comparable
from tests.core.test_analysis import record, report_of

IDS = [f"c{i:02d}" for i in range(12)]


def model_rows(name: str, composites: list[float], ids: list[str] = IDS, mode: str = "default", **values: float):
    return [record(name, cid, c, mode=mode, **values) for cid, c in zip(ids, composites, strict=True)]


def test_a_row_on_a_subset_is_shown_apart_with_its_n_and_set() -> None:
    report = report_of(
        model_rows("a", [60.0] * 12) + model_rows("b", [50.0] * 12) + model_rows("topic-run", [90.0, 95.0], IDS[:2])
    )
    split = split_comparable(report)
    assert split.reference == tuple(IDS)
    assert sorted({r.em_model for r in split.compared.conversations}) == ["a", "b"]
    (apart,) = split.apart_rows
    assert (apart.label, apart.n_conversations, apart.n_in_compared_set) == ("topic-run [default]", 2, 2)
    assert apart.conversation_set == set_fingerprint(IDS[:2]) != split.fingerprint
    assert apart.composite_score == 92.5 and "2 of the 12 compared conversations" in apart.reason

    out = an.analyze(report, n_bootstrap=50)
    # The 2-conversation run is never ranked: not in the profile, the bootstrap or the outrank matrix.
    assert out.rows == ["a [default]", "b [default]"]
    assert set(out.bootstrap.outrank_probability) == {"a [default]", "b [default]"}
    assert out.comparability is not None and out.comparability.n_compared_conversations == 12
    assert any("topic-run [default] (n = 2)" in note for note in out.notes)


def test_a_chosen_reference_set_decides_which_rows_are_compared() -> None:
    report = report_of(model_rows("a", [60.0] * 12) + model_rows("small", [70.0] * 4, IDS[:4]))
    split = split_comparable(report, reference=IDS[:4])
    assert {r.em_model for r in split.compared.conversations} == {"small"}
    assert [a.label for a in split.apart_rows] == ["a [default]"]
    assert "8 of them outside the compared set" in split.apart_rows[0].reason


def test_rows_below_the_minimum_n_get_an_estimate_but_no_interval() -> None:
    n = MIN_CONVERSATIONS_FOR_CI - 1
    report = report_of(model_rows("a", [40.0 + i for i in range(n)], IDS[:n]))
    boot = an.bootstrap(report, n_resamples=200, seed=1)
    (row,) = boot.rows
    assert row.composite_score.estimate == pytest.approx(40 + (n - 1) / 2)
    assert row.composite_score.low is None and row.composite_score.high is None
    assert boot.note is not None and f"fewer than {MIN_CONVERSATIONS_FOR_CI} conversations" in boot.note
    assert boot.min_conversations_for_ci == MIN_CONVERSATIONS_FOR_CI

    enough = report_of(model_rows("a", [40.0 + i for i in range(12)]))
    (row,) = an.bootstrap(enough, n_resamples=200, seed=1).rows
    assert row.composite_score.low is not None and row.composite_score.low < row.composite_score.high


def test_mode_agnostic_baselines_are_shown_once_and_not_counted_as_pairs() -> None:
    report = report_of(
        model_rows("baseline:prior", [40.0] * 12)
        + model_rows("baseline:prior", [40.0] * 12, mode="verbose")
        + model_rows("baseline:lexicon", [30.0] * 12, mode="verbose")
        + model_rows("baseline:lexicon", [30.0] * 12, mode="omniscient")
        + model_rows("m", [60.0 + i for i in range(12)])
    )
    out = an.analyze(report, n_bootstrap=50)
    # prior keeps [default]; lexicon has no default row and keeps its first mode.
    assert out.rows == ["baseline:lexicon [omniscient]", "baseline:prior [default]", "m [default]"]
    assert out.discrimination.metrics["composite_score"].n_pairs == 3  # 3 rows, not 5 rows' 10 pairs
    assert out.comparability is not None and len(out.comparability.collapsed) == 2
    assert out.comparability.apart == []  # collapsed copies are not "apart": they are the same row


def test_skill_over_the_prior_hand_computed() -> None:
    # prior composite 40 everywhere, model 70: skill = (70 − 40) / (100 − 40) = 0.5, on every resample.
    # Every record metric is 0.5, so every prior capability is 0.5; the model's pairwise accuracy 0.8
    # gives preference skill (0.8 − 0.5) / (1 − 0.5) = 0.6.
    report = report_of(
        model_rows("baseline:prior", [40.0] * 12) + model_rows("m", [70.0] * 12, avg_pairwise_accuracy=0.8)
    )
    out = an.analyze(report, n_bootstrap=100)
    assert out.bootstrap.prior_baseline == "baseline:prior [default]"
    rows = {r.label: r for r in out.bootstrap.rows}
    m = rows["m [default]"].skill
    assert m is not None
    assert (m.composite_score.estimate, m.composite_score.low, m.composite_score.high) == pytest.approx((0.5,) * 3)
    assert m.preference_prediction.estimate == pytest.approx(0.6)
    assert m.emotion_tracking.estimate == pytest.approx(0.0)
    prior = rows["baseline:prior [default]"].skill
    assert prior is not None and prior.composite_score.estimate == 0.0


def test_skill_guards() -> None:
    assert skill(0.9, 1.0, 1.0) is None  # a perfect prior leaves no scale
    assert skill(None, 0.5, 1.0) is None and skill(0.5, None, 1.0) is None
    assert skill(0.25, 0.5, 1.0) == -0.5  # below the prior is negative


def test_no_prior_row_means_no_skill() -> None:
    out = an.analyze(report_of(model_rows("a", [60.0] * 12) + model_rows("b", [50.0] * 12)), n_bootstrap=20)
    assert out.bootstrap.prior_baseline is None and all(r.skill is None for r in out.bootstrap.rows)


def test_humans_are_paired_with_models_on_exactly_the_conversations_they_rated() -> None:
    # The human rated c00..c03 at 80, 70, 60, 50; the model scored 50 everywhere and the prior 40.
    # Shared: 4 conversations; human mean 65, model 50, difference 15; prior 40 on those:
    # human skill (65 − 40)/60 = 0.4167, model skill (50 − 40)/60 = 0.1667.
    # Differences 30, 20, 10, 0: the zero is dropped, ranks 3, 2, 1 all positive; exact two-sided
    # p = 2 · (1 of 2³ sign patterns) = 0.25.
    report = report_of(
        model_rows("baseline:prior", [40.0] * 12)
        + model_rows("m", [50.0] * 12)
        + [record("human:ann", cid, c) for cid, c in zip(IDS[:4], [80.0, 70.0, 60.0, 50.0], strict=True)]
    )
    out = an.analyze(report, n_bootstrap=20)
    assert out.comparability is not None
    pairing = {p.model: p for p in out.comparability.human_pairings}["m [default]"]
    assert pairing.n_shared == 4
    assert (pairing.human_composite, pairing.model_composite, pairing.mean_difference) == (65.0, 50.0, 15.0)
    assert pairing.prior_composite == 40.0
    assert pairing.human_skill == pytest.approx(25 / 60) and pairing.model_skill == pytest.approx(10 / 60)
    assert pairing.p == pytest.approx(0.25)
    # Against the prior the differences are 40, 30, 20, 10: exact p = 2/2⁴ = 0.125. Holm over the two:
    # 0.125 · 2 = 0.25, then max(0.25, 0.25 · 1) = 0.25.
    assert pairing.p_holm == pytest.approx(0.25)


def test_exact_paired_test_agrees_with_scipy_on_tied_data() -> None:
    rng = np.random.default_rng(3)
    checked = 0
    # scipy's own route (a permutation test) is the slow one, so the reference cases stay few and small.
    for _ in range(16):
        n = int(rng.integers(2, 9))
        x, y = rng.integers(0, 4, n) / 4, rng.integers(0, 4, n) / 4
        if not (x - y).any():
            continue
        statistic, p, _ = an.paired_test(list(x), list(y))
        expected = stats.wilcoxon(x, y)
        assert p == pytest.approx(expected.pvalue) and statistic == pytest.approx(expected.statistic)
        checked += 1
    assert checked > 8


def test_batched_paired_tests_give_each_pair_its_own_scipy_result() -> None:
    """Pairs tested together in one scipy call get exactly what a call of their own gives, for every method
    scipy picks: exact (short, untied), the normal approximation (long, or tied among many) and mixed lengths."""
    rng = np.random.default_rng(11)
    pairs = []
    for n in (20, 20, 30, 80, 80, 120):
        x = rng.normal(size=n)
        pairs.append((list(x), list(x + rng.normal(0.1, 1.0, n))))  # untied
        tied = rng.integers(0, 6, n) / 6
        pairs.append((list(tied), list(rng.integers(0, 6, n) / 6)))  # ties and zeros
    pairs.append(([1.0], [2.0]))
    pairs.append(([0.5, 0.25], [0.5, 0.25]))
    batched = an.paired_tests(pairs)
    assert len(batched) == len(pairs)
    for (x, y), (statistic, p, note) in zip(pairs, batched, strict=True):
        if len(x) < 2 or x == y:
            assert p is None or p == 1.0
            continue
        alone = stats.wilcoxon(x, y)
        assert (statistic, p, note) == an.paired_test(x, y), f"n={len(x)}: batched differs from its own call"
        diffs = np.asarray(x) - np.asarray(y)
        nonzero = diffs[diffs != 0]
        plain = nonzero.size == diffs.size and np.unique(np.abs(nonzero)).size == nonzero.size
        if plain or nonzero.size > an.EXACT_SIGN_FLIP_MAX:  # the pairs that go to scipy: its own 1-D call
            assert (statistic, p) == (float(alone.statistic), float(alone.pvalue))
