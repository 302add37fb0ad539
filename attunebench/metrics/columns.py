"""Sums over groups of an array that equal ``math.fsum`` of each group, for the analyses' columnar walks.

The analyses report means as ``math.fsum(values) / len(values)`` (:func:`attunebench.metrics.aggregate.mean_or_none`):
exactly rounded, so independent of the order the values come in. Walking tens of thousands of records' turns in
Python to build those lists was most of the analyses' time; these functions take every value at once and still
give each group the same float ``math.fsum`` gives, so a columnar analysis reports the same numbers bit for bit.

The sums add values one column at a time with error-free transformations (TwoSum): the running sum and the
exact sums of its rounding errors, kept at two levels, give the exact total as a few floats whenever the last
level lost nothing, and ``math.fsum`` of those few floats is then the correctly rounded total, which is what
``math.fsum`` of all the values returns. A sum whose last level lost a bit is summed by ``math.fsum`` instead.
"""

from __future__ import annotations

import math

import numpy as np

# Groups at most this long are summed together in arrays; longer ones (a row's thousands of values) go through
# math.fsum one at a time, which costs little per value.
SMALL_GROUP = 32


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fl(a + b), its rounding error): a + b == s + e exactly (Knuth's TwoSum, elementwise)."""
    s = a + b
    b_virtual = s - a
    a_virtual = s - b_virtual
    return s, (a - a_virtual) + (b - b_virtual)


def exact_row_sums(matrix: np.ndarray) -> np.ndarray:
    """``math.fsum`` of each row of a 2-D array (no NaN), computed a column at a time over all rows."""
    matrix = np.asarray(matrix, dtype=float)
    n_rows, width = matrix.shape
    if width == 0:
        return np.zeros(n_rows)
    total = matrix[:, 0].copy()
    first = np.zeros(n_rows)
    second = np.zeros(n_rows)
    lost = np.zeros(n_rows, dtype=bool)
    for column in range(1, width):
        total, e = _two_sum(total, matrix[:, column])
        first, e = _two_sum(first, e)
        second, e = _two_sum(second, e)
        lost |= e != 0
    # total + first + second is the exact sum, rounded once: by the one addition where second is 0, else by fsum.
    out = total + first
    for row in np.flatnonzero(second != 0).tolist():
        out[row] = math.fsum((total[row], first[row], second[row]))
    for row in np.flatnonzero(lost).tolist():
        out[row] = math.fsum(matrix[row].tolist())
    return out


def group_fsums(values: np.ndarray, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(sum, count) per group and column of the non-NaN values; each sum equals ``math.fsum`` of them.

    ``values`` is (n,) or (n × columns); ``groups`` gives each of the n its group (0 ≤ g < n_groups).
    The values are sorted by group once for every column. A group with no value has sum 0.0.
    """
    values = np.asarray(values, dtype=float)
    flat = values.ndim == 1
    matrix = values[:, None] if flat else values
    groups = np.asarray(groups, dtype=np.int64)
    n_columns = matrix.shape[1]
    present = ~np.isnan(matrix)
    counts = np.zeros((n_groups, n_columns), dtype=np.int64)
    for c in range(n_columns):
        counts[:, c] = np.bincount(groups[present[:, c]], minlength=n_groups)
    sums = np.zeros((n_groups, n_columns))
    if matrix.shape[0]:
        order = np.argsort(groups, kind="stable")
        ordered = np.where(present, matrix, -0.0)[order]  # -0.0 adds nothing to any float, +0.0 included
        groups = groups[order]
        sizes = np.bincount(groups, minlength=n_groups)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        position = np.arange(groups.size) - starts[groups]
        chosen = (sizes >= 1) & (sizes <= SMALL_GROUP)
        ids = np.flatnonzero(chosen)
        if ids.size:
            slot = np.full(n_groups, -1)
            slot[ids] = np.arange(ids.size)
            members = chosen[groups]
            width = int(sizes[ids].max())
            padded = np.full((ids.size * n_columns, width), -0.0)
            rows = slot[groups[members]] * n_columns
            for c in range(n_columns):
                padded[rows + c, position[members]] = ordered[members, c]
            sums[ids] = exact_row_sums(padded).reshape(ids.size, n_columns)
        large = np.flatnonzero(sizes > SMALL_GROUP).tolist()
        for c in range(n_columns if large else 0):
            listed = ordered[:, c].tolist()  # a missing value is -0.0 here, which changes no sum
            for g in large:
                sums[g, c] = math.fsum(listed[starts[g] : starts[g] + sizes[g]])
    sums[counts == 0] = 0.0
    return (sums[:, 0], counts[:, 0]) if flat else (sums, counts)


def group_means(values: np.ndarray, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean, count) per group (and column) of the non-NaN values, each mean ``math.fsum(values) / len(values)``.

    NaN where a group has no value.
    """
    sums, counts = group_fsums(values, groups, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return means, counts
