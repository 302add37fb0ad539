"""How long one paired Wilcoxon test takes on small tied data: ours (exact sign enumeration) against scipy's route.

The dashboard runs one test per pair of rows per metric (15 metrics) plus the turn-position and human
pairings, so a second per test made a 6-row dashboard take minutes on a cold cache. Prints figures only.

    PYTHONPATH=. python bench/bench_paired_test.py [--smoke]
"""

from __future__ import annotations

import argparse
import time

from figures import figures_line
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
    parser = argparse.ArgumentParser(description="one paired Wilcoxon test: ours against scipy's")
    parser.add_argument("--smoke", action="store_true", help="a few calls each: the path, not the timing")
    smoke = parser.parse_args().smoke
    ours = per_call(lambda: paired_test(X, Y), 5 if smoke else 200)
    theirs = per_call(lambda: stats.wilcoxon(X, Y), 1 if smoke else 5)
    p_ours, p_theirs = paired_test(X, Y)[1], stats.wilcoxon(X, Y).pvalue
    print(
        f"12 tied pairs: exact enumeration {1000 * ours:.2f} ms/test, scipy.stats.wilcoxon {1000 * theirs:.0f} ms/test"
    )
    print(f"p-values agree: {p_ours:.6f} vs {p_theirs:.6f}")
    if abs(p_ours - p_theirs) > 1e-9:
        raise SystemExit(f"the p-values differ: {p_ours} vs {p_theirs}")
    print(figures_line("bench_paired_test", ours_ms=1000 * ours, scipy_ms=1000 * theirs, p_value=p_ours))
