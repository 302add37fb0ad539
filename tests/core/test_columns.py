"""The analyses' columnar sums give exactly what math.fsum gives, group by group."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attunebench.metrics import analysis as an
from attunebench.metrics.columns import SMALL_GROUP, exact_row_sums, group_fsums, group_means
from attunebench.metrics.results import ScoringReport
from attunebench.synth import synth_conversations, synth_runs

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
value = st.one_of(finite, st.just(math.nan), st.sampled_from([0.0, -0.0, 1 / 3, 2 / 3, 1e-300, 1 - 2**-53]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), value), max_size=120))
def test_group_sums_are_fsum_of_each_group(pairs: list[tuple[int, float]]) -> None:
    groups = np.array([g for g, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=float)
    sums, counts = group_fsums(values, groups, 6)
    means, _ = group_means(values, groups, 6)
    for g in range(6):
        members = [v for gg, v in pairs if gg == g and not math.isnan(v)]
        assert counts[g] == len(members)
        assert sums[g] == math.fsum(members)
        if members:
            assert means[g] == math.fsum(members) / len(members)
        else:
            assert math.isnan(means[g])


def test_large_groups_and_columns_match_fsum() -> None:
    rng = np.random.default_rng(3)
    values = rng.random((5000, 3)) * 10.0 ** rng.integers(-8, 8, size=(5000, 3))
    values[rng.random((5000, 3)) < 0.1] = np.nan
    groups = np.where(rng.random(5000) < 0.5, 0, rng.integers(1, 400, size=5000))  # one group far above SMALL_GROUP
    assert np.bincount(groups)[0] > SMALL_GROUP
    sums, counts = group_fsums(values, groups, 400)
    for g in range(400):
        for c in range(3):
            members = values[groups == g, c]
            members = members[~np.isnan(members)].tolist()
            assert (sums[g, c], counts[g, c]) == (math.fsum(members), len(members))
    rows = rng.random((50, 3000)) - rng.random((50, 3000))
    assert exact_row_sums(rows).tolist() == [math.fsum(row.tolist()) for row in rows]


def test_turn_position_means_are_those_of_each_rows_turns() -> None:
    """The columnar curve and halves hold the plain per-turn means (math.fsum / n) of each row's turns."""
    from attunebench.metrics import score_documents

    conversations = synth_conversations(12, seed=5)
    runs = [run for m in ("a", "b") for run in synth_runs(conversations, f"synth:{m}", "default", seed=5)]
    report: ScoringReport = score_documents(conversations, runs, include_details=True)
    info = an._conversation_info(report, conversations)
    result = an.turn_position(report, info)
    for row in result.rows:
        records = [r for r in report.conversations if (r.em_model, r.mode) == (row.em_model, row.mode)]
        for point in row.curve:
            at = [t["emotion_f1"] for r in records for t in r.turns if t["turn_index"] + 1 == point.turn]
            assert point.emotion_f1 == math.fsum(at) / len(at)
        early = [
            t["pairwise_accuracy"]
            for r in records
            for t in r.turns
            if (t["turn_index"] + 0.5) / info[r.conversationId]["n_gt_turns"] < 0.5
        ]
        assert row.halves.pairwise_accuracy.early == math.fsum(early) / len(early)
