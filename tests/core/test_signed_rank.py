"""The array-wise signed-rank normal approximation gives scipy's own statistic and p-value, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from attunebench.metrics import analysis as an
from attunebench.metrics.signed_rank import normal_approximation

# Differences drawn from a few levels (ties everywhere, zeros often) or from any finite floats.
tied_value = st.sampled_from([0.0, -0.0, 0.5, -0.5, 1 / 3, -1 / 3, 2.0, -2.0, 1e-300, -1e-300, 0.1, -0.1])
any_value = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


def _scipy(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    result = stats.wilcoxon(x, y, method="asymptotic")
    return float(result.statistic), float(result.pvalue)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(14, 90).flatmap(
        lambda n: st.lists(
            st.tuples(
                st.lists(st.one_of(tied_value, any_value), min_size=n, max_size=n),
                st.lists(st.one_of(tied_value, any_value), min_size=n, max_size=n),
            ),
            min_size=1,
            max_size=4,
        )
    )
)
def test_each_row_is_scipys_normal_approximation(rows: list[tuple[list[float], list[float]]]) -> None:
    x = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    diffs = x - y
    keep = np.isfinite(diffs).all(axis=1) & diffs.any(axis=1)
    if not keep.any():
        return
    statistic, p = normal_approximation(diffs[keep])
    for k, (a, b) in enumerate(zip(x[keep], y[keep], strict=True)):
        assert (statistic[k], p[k]) == _scipy(a, b)


def test_large_tie_heavy_rows_match_scipy_in_one_call() -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(0, 5, (60, 2000)) / 4
    y = np.where(rng.random((60, 2000)) < 0.3, x, rng.integers(0, 5, (60, 2000)) / 4)
    x[:20] = rng.random((20, 2000))  # and rows with no ties at all
    statistic, p = normal_approximation(x - y)
    expected = stats.wilcoxon(x, y, axis=1)
    assert statistic.tolist() == expected.statistic.tolist()
    assert p.tolist() == expected.pvalue.tolist()


def test_too_many_differences_are_refused() -> None:
    with pytest.raises(ValueError, match="at most"):
        normal_approximation(np.ones((1, 100_001)))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 70).flatmap(lambda n: st.lists(st.tuples(tied_value, tied_value), min_size=n, max_size=n)))
def test_paired_test_is_scipys_result_wherever_scipy_is_used(pairs: list[tuple[float, float]]) -> None:
    """Above 13 non-zero differences the paired test answers what its own scipy call answers."""
    x = [a for a, _ in pairs]
    y = [b for _, b in pairs]
    statistic, p, note = an.paired_test(x, y)
    if np.count_nonzero(np.subtract(x, y)) <= an.EXACT_SIGN_FLIP_MAX:
        return  # zero differences, or the exact sign-flip enumeration: not scipy's route
    expected = stats.wilcoxon(x, y)
    assert (statistic, p, note) == (float(expected.statistic), float(expected.pvalue), None)
