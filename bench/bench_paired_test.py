"""How long one paired Wilcoxon test takes on small tied data: ours (exact sign enumeration) against scipy's route.

The dashboard runs one test per pair of rows per metric (15 metrics) plus the turn-position and human
pairings, so a second per test made a 6-row dashboard take minutes on a cold cache. Prints figures only.

    PYTHONPATH=. python bench/bench_paired_test.py
"""

from __future__ import annotations

import time

from scipy import stats

from attunebench.metrics.analysis import paired_test

X = [0.5, 0.6, 0.5, 0.7, 0.5, 0.6, 0.5, 0.5, 0.6, 0.7, 0.5, 0.6]
Y = [0.4, 0.6, 0.4, 0.6, 0.4, 0.5, 0.5, 0.4, 0.6, 0.6, 0.4, 0.5]


def per_call(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


if __name__ == "__main__":
    ours = per_call(lambda: paired_test(X, Y), 200)
    theirs = per_call(lambda: stats.wilcoxon(X, Y), 5)
    p_ours, p_theirs = paired_test(X, Y)[1], stats.wilcoxon(X, Y).pvalue
    print(
        f"12 tied pairs: exact enumeration {1000 * ours:.2f} ms/test, scipy.stats.wilcoxon {1000 * theirs:.0f} ms/test"
    )
    print(f"p-values agree: {p_ours:.6f} vs {p_theirs:.6f}")
