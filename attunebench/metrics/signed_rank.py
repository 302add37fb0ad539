"""The Wilcoxon signed-rank test's normal approximation for many rows of paired differences at once.

The analyses test every pair of rows on every metric: at thousands of conversations × dozens of rows that is
some sixteen thousand tests of thousands of differences each, and ranking them through
``scipy.stats.wilcoxon`` (which sorts, takes and puts every row through general-purpose index arrays) was most
of the analyses' time. :func:`normal_approximation` gives the same statistic and p-value, bit for bit, for the
tests scipy answers with its normal approximation (``method="auto"`` on more than 50 differences, or on
differences with ties or zeros among more than 13 non-zero ones; zeros dropped, the variance corrected for
ties, no continuity correction, two-sided).

Why the results are scipy's own floats: every quantity the ranking feeds into scipy's formula — the number of
non-zero differences, the sum of the ranks of the positive ones (average ranks: halves of integers) and the
tie term Σ (t³ − t) — is an integer or half an integer below 2⁵³, so any order of adding it up gives it
exactly; from there the same floating-point operations run in the same order as scipy's.
"""

from __future__ import annotations

import numpy as np

# Above this many differences the tie term Σ (t³ − t) (at most n³) may pass 2⁵³ and stop being exact in floats,
# so scipy's own order of adding could round it differently: such rows are not taken.
MAX_DIFFERENCES = 100_000


def normal_approximation(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(statistic, p) per row of ``diffs``, as ``scipy.stats.wilcoxon`` gives them by its normal approximation.

    ``diffs`` is (rows × n) of finite floats, every row with a non-zero value, n ≤ :data:`MAX_DIFFERENCES`;
    the statistic is min(R+, R−), the p-value two-sided, zeros dropped (``zero_method="wilcox"``), no
    continuity correction: what ``scipy.stats.wilcoxon(x, y, axis=1)`` returns for rows it approximates.
    """
    from scipy import special

    diffs = np.ascontiguousarray(diffs, dtype=np.float64)
    n_rows, n = diffs.shape
    if n > MAX_DIFFERENCES:
        raise ValueError(f"at most {MAX_DIFFERENCES} differences per row; got {n}")
    if n_rows == 0:
        return np.empty(0), np.empty(0)
    # Each difference's bits rotated left by one: the magnitude's bits above, the sign bit lowest. Sorted as
    # unsigned integers they order the differences by magnitude (ties adjacent, zeros first).
    bits = diffs.view(np.uint64)
    keys = (bits << np.uint64(1)) | (bits >> np.uint64(63))
    keys.sort(axis=1)
    magnitude = keys >> np.uint64(1)
    starts_tie = np.ones((n_rows, n), dtype=bool)  # a tie group starts here (or a row does)
    np.not_equal(magnitude[:, 1:], magnitude[:, :-1], out=starts_tie[:, 1:])
    starts = np.flatnonzero(starts_tie)
    sizes = np.diff(starts, append=n_rows * n)
    negatives = np.add.reduceat((keys & np.uint64(1)).ravel(), starts).astype(np.int64)
    groups_per_row = np.count_nonzero(starts_tie, axis=1)
    row = np.repeat(np.arange(n_rows), groups_per_row)
    position = starts - row * n  # where the group starts in its sorted row
    row_groups = np.concatenate(([0], np.cumsum(groups_per_row)[:-1]))  # each row's first group
    zero = magnitude[:, 0] == 0  # a row's zeros: its first group, when it has any
    n_zero = np.where(zero, sizes[row_groups], 0)
    # Twice the group's average rank among the row's non-zero differences: ranks first … first + size − 1.
    twice_rank = 2 * (position - n_zero[row]) + sizes + 1
    positives = sizes - negatives
    positives[row_groups[zero]] = 0
    twice_r_plus = np.add.reduceat(twice_rank * positives, row_groups)
    tied = np.flatnonzero(sizes > 1)
    tied_sizes = sizes[tied]
    ties = tied_sizes * tied_sizes * tied_sizes - tied_sizes
    ties[magnitude.ravel()[starts[tied]] == 0] = 0  # zeros are dropped, not tied
    tie_term = np.bincount(row[tied], weights=ties, minlength=n_rows)
    nonzero = n - n_zero
    r_plus = twice_r_plus / 2
    r_minus = (nonzero * (nonzero + 1) - twice_r_plus) / 2

    # scipy's formula, operation for operation.
    count = nonzero.astype(np.float64)
    mean = count * (count + 1.0) * 0.25
    se = count * (count + 1.0) * (2.0 * count + 1.0)
    se = np.sqrt((se - tie_term.astype(np.float64) / 2) / 24)
    z = (r_plus - mean) / se
    p = 2 * special.ndtr(-np.abs(z))
    return np.minimum(r_plus, r_minus), p
