"""Breakdowns count conversations, pool the rows chosen, and compare every capability (SPEC 6).

Expected values are derived by hand in the comments; records come from tests.core.test_analysis,
whose metrics are all 0.5 unless given (so every capability is 0.5 unless a test moves it).
"""

from __future__ import annotations

from typing import Any

import pytest

from attunebench.metrics import analysis as an
from attunebench.metrics.comparison import MIN_CONVERSATIONS_FOR_CI
from tests.core.test_analysis import record, report_of


def _details(category: str, group: str | None = None, om: str = "om/x") -> dict[str, Any]:
    return {"category": category, "participant_group": group, "original_model": om, "n_gt_turns": 4}


def test_a_breakdown_counts_conversations_not_rows() -> None:
    # 2 conversations x 8 model rows: 16 records, but the pooled cell has n = 2 and, below 10, no interval.
    records = [record(f"model-{m}", cid, 40.0 + m, details=_details("Money")) for m in range(8) for cid in ("c1", "c2")]
    out = an.analyze(report_of(records), n_bootstrap=20)
    (money,) = out.breakdowns.by_category.overall
    assert money.n_conversations == 2
    assert money.composite_ci_low is None and money.composite_ci_high is None
    # per conversation: mean over the 8 rows of 40..47 = 43.5; over the 2 conversations still 43.5
    assert money.composite_score == pytest.approx(43.5)
    assert {r.n_conversations for r in out.breakdowns.by_category.rows} == {2}
    assert out.breakdowns.by_original_model.overall[0].n_conversations == 2


def test_a_pooled_cell_gets_an_interval_from_ten_conversations() -> None:
    # composites 40, 41, ..., 49 over 10 conversations: mean 44.5
    values = [40.0 + i for i in range(MIN_CONVERSATIONS_FOR_CI)]
    records = [record("m", f"c{i}", v, details=_details("Work")) for i, v in enumerate(values)]
    (work,) = an.analyze(report_of(records), n_bootstrap=20).breakdowns.by_category.overall
    # squared deviations from the mean sum to 82.5; sd (n − 1) = sqrt(82.5/9) = 3.0277; SE = 3.0277/sqrt(10) = 0.95743; 1.959964 x SE = 1.87653
    assert work.n_conversations == 10
    assert work.composite_ci_low == pytest.approx(44.5 - 1.87653, abs=1e-4)
    assert work.composite_ci_high == pytest.approx(44.5 + 1.87653, abs=1e-4)


def test_baselines_stay_apart_from_the_pooled_lines_by_default() -> None:
    # A baseline scoring 0 on Grief would make Grief the "hardest topic"; pooled over the models it is Money.
    records = [
        record("model-a", "c1", 30.0, details=_details("Money")),
        record("model-a", "c2", 60.0, details=_details("Grief")),
        record("baseline:prior", "c1", 90.0, details=_details("Money")),
        record("baseline:prior", "c2", 0.0, details=_details("Grief")),
    ]
    out = an.analyze(report_of(records), n_bootstrap=20)
    assert out.breakdowns.pooled_rows == ["model-a [default]"]
    assert out.breakdowns.pool_note == "baselines left out of the pooled lines: baseline:prior [default]"
    assert [c.category for c in out.breakdowns.by_category.overall] == ["Money", "Grief"]
    # Asked to pool both: Money (30 + 90)/2 = 60, Grief (60 + 0)/2 = 30, so Grief comes first.
    both = an.analyze(report_of(records), n_bootstrap=20, pool=["model-a", "baseline:prior [default]"])
    assert [(c.category, c.composite_score) for c in both.breakdowns.by_category.overall] == [
        ("Grief", 30.0),
        ("Money", 60.0),
    ]
    with pytest.raises(ValueError, match="cannot pool 'nobody': not a compared row"):
        an.analyze(report_of(records), n_bootstrap=20, pool=["nobody"])


def test_only_baselines_are_pooled_when_nothing_else_was_scored() -> None:
    records = [record("baseline:prior", "c1", 50.0, details=_details("Money"))]
    out = an.analyze(report_of(records), n_bootstrap=20)
    assert out.breakdowns.pooled_rows == ["baseline:prior [default]"]
    assert out.breakdowns.pool_note == "only baselines were scored, so the pooled lines pool the baselines"


def test_groups_are_compared_on_every_capability() -> None:
    # Pairwise accuracy (= preference prediction) 0.9, 0.8, 0.7 for anxiety/depression and 0.3, 0.2, 0.1 for none;
    # every other metric 0.5 so emotion tracking is 0.5 everywhere.
    records = [
        record("m", f"a{i}", 50.0, avg_pairwise_accuracy=v, details=_details("Work", "anxiety_depression"))
        for i, v in enumerate((0.9, 0.8, 0.7))
    ]
    records += [
        record("m", f"n{i}", 50.0, avg_pairwise_accuracy=v, details=_details("Work", "none"))
        for i, v in enumerate((0.3, 0.2, 0.1))
    ]
    out = an.analyze(report_of(records), n_bootstrap=20)
    metrics = {m.metric: m for m in out.breakdowns.by_participant_group.pooled.metrics}
    assert list(metrics) == ["composite_score", *an.CAPABILITIES]
    preference = metrics["preference_prediction"]
    # every anxiety/depression value beats every "none" value: U = 3 x 3 = 9, exact two-sided p = 2/C(6,3) = 0.1
    assert preference.anxiety_depression == pytest.approx(0.8) and preference.none == pytest.approx(0.2)
    assert preference.mann_whitney_u == 9.0 and preference.p == pytest.approx(0.1)
    # the composite is 50 everywhere: no ranking to compare, said so
    assert metrics["composite_score"].p is None
    assert metrics["composite_score"].note == "every score is identical: no ranking to compare"
    assert metrics["emotion_tracking"].note == "every score is identical: no ranking to compare"
    row_metrics = {m.metric: m for m in out.breakdowns.by_participant_group.rows[0].metrics}
    assert row_metrics["preference_prediction"].mann_whitney_u == 9.0


def test_topics_are_compared_with_kruskal_wallis_per_capability() -> None:
    # Composites Money 1, 2 and Work 3, 4: ranks 1, 2 | 3, 4; H = 12/(4·5)·(3²/2 + 7²/2) − 3·5 = 17.4 − 15 = 2.4
    records = [
        record("m", cid, v, details=_details(cat))
        for cid, v, cat in (("c1", 1.0, "Money"), ("c2", 2.0, "Money"), ("c3", 3.0, "Work"), ("c4", 4.0, "Work"))
    ]
    tests = {t.metric: t for t in an.analyze(report_of(records), n_bootstrap=20).breakdowns.by_category.tests}
    assert tests["composite_score"].statistic == pytest.approx(2.4)
    assert (tests["composite_score"].n_groups, tests["composite_score"].n_conversations) == (2, 4)
    # chi-square with 1 degree of freedom: P(X > 2.4) = 0.1213
    assert tests["composite_score"].p == pytest.approx(0.1213, abs=1e-4)
    assert tests["behaviour_judgement"].p is None  # 0.5 everywhere


def test_discrimination_includes_preference_alignment() -> None:
    records = [
        record(name, f"c{i}", 50.0, avg_response_preference_alignment=level + i / 100)
        for name, level in (("a", 0.2), ("b", 0.8))
        for i in range(6)
    ]
    entry = an.analyze(report_of(records), n_bootstrap=20).discrimination.metrics["avg_response_preference_alignment"]
    # b beats a by 0.6 on each of 6 shared conversations: exact two-sided Wilcoxon p = 2/2^6 = 0.03125
    assert entry.n_tested == 1 and entry.pairs[0].p == pytest.approx(0.03125)


def test_human_raters_are_pooled_beside_their_own_rows() -> None:
    # Rater ann: c1 80, c2 60. Rater bob: c2 40, c3 70. Pooled per conversation: c1 80, c2 50, c3 70 -> mean 200/3.
    records = [
        record("human:ann", "c1", 80.0),
        record("human:ann", "c2", 60.0),
        record("human:bob", "c2", 40.0),
        record("human:bob", "c3", 70.0),
        record("model", "c1", 50.0),
        record("model", "c2", 50.0),
        record("model", "c3", 50.0),
    ]
    out = an.analyze(report_of(records), n_bootstrap=20)
    pooled = out.human_baseline.pooled
    assert pooled is not None
    assert (pooled.n_raters, pooled.n_conversations) == (2, 3)
    assert pooled.composite_score == pytest.approx(200 / 3)
    assert pooled.composite_ci_low is None  # 3 conversations: no interval
    assert out.comparability is not None
    lines = {(h.human, h.model): h for h in out.comparability.human_pairings}
    assert set(lines) == {
        ("human:ann [default]", "model [default]"),
        ("human:bob [default]", "model [default]"),
        (an.POOLED_HUMAN_LABEL, "model [default]"),
    }
    together = lines[(an.POOLED_HUMAN_LABEL, "model [default]")]
    # differences 30, 0, 20 over the 3 shared conversations: human − model = 50/3
    assert together.n_shared == 3 and together.mean_difference == pytest.approx(50 / 3)
