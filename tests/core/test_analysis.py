"""SPEC 6 analyses on constructed data whose answers are known."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from attunebench.metrics import analysis as an
from attunebench.metrics import score_documents
from attunebench.metrics.composite import CAPABILITIES
from attunebench.metrics.keys import METRIC_KEYS, TURN_KEYS
from attunebench.metrics.results import (
    Analysis,
    CapabilityScores,
    ConversationRecord,
    CurvePoint,
    Interval,
    ScoringReport,
    TurnHalves,
    to_json,
)
from attunebench.synth import synth_conversations, synth_runs


def record(
    em_model: str,
    cid: str,
    composite: float = 50.0,
    *,
    mode: str = "default",
    details: dict | None = None,
    turns: list[dict[str, Any]] | None = None,
    **values: float | None,
) -> dict[str, Any]:
    """A report record with every metric 0.5 unless given; capabilities follow from these keys."""
    r: dict[str, Any] = {
        "conversationId": cid,
        "em_model": em_model,
        "mode": mode,
        "coverage": 1.0,
        "post_coverage": 1.0,
        "holistic_imputed": False,
    }
    r.update(dict.fromkeys(METRIC_KEYS, 0.5))
    # the ordinal distance counts whole steps (an int); no analysis reads it
    r.update(panas_baseline_adjusted=0.0, composite_score=composite, avg_draft_judge_score=None)
    r.update(q3_model_fit_ordinal_distance=1, **values)
    r["turns"] = turns or []
    if details is not None:
        r["details"] = details
    return r


def report_of(records: list[dict[str, Any]]) -> ScoringReport:
    from attunebench.metrics.aggregate import aggregate_rows

    typed = [ConversationRecord.model_validate(r) for r in records]
    return ScoringReport(conversations=typed, aggregates=aggregate_rows(typed))


# ---------------------------------------------------------------------------
# Statistics helpers
# ---------------------------------------------------------------------------


def test_holm_adjustment_hand_computed() -> None:
    # ascending: 0.01*3 = 0.03; 0.03*2 = 0.06; 0.04*1 = 0.04 -> running max 0.06
    assert an.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert an.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert an.holm([]) == []


def test_variance_ratio_hand_computed() -> None:
    # groups [1,2,3] and [4,5,6]: grand mean 3.5, means 2 and 5
    # SS_between = 3*(1.5²) + 3*(1.5²) = 13.5 (df 1); SS_within = 2 + 2 = 4 (df 4) -> F = 13.5/1 = 13.5
    assert an.variance_ratio([[1, 2, 3], [4, 5, 6]]) == (pytest.approx(13.5), None)


def _anova_f(groups: list[list[float]]) -> float:
    """The textbook one-way ANOVA F, written out as the hand-rolled version the engine used to carry."""
    values = [v for g in groups for v in g]
    grand = sum(values) / len(values)
    means = [sum(g) / len(g) for g in groups]
    ss_between = sum(len(g) * (m - grand) ** 2 for g, m in zip(groups, means, strict=True))
    ss_within = sum((v - m) ** 2 for g, m in zip(groups, means, strict=True) for v in g)
    return (ss_between / (len(groups) - 1)) / (ss_within / (len(values) - len(groups)))


def test_variance_ratio_uneven_groups_hand_computed() -> None:
    # groups [0, 2] and [1, 3, 5]: means 1 and 3, grand mean 11/5 = 2.2
    # SS_between = 2*(1.2²) + 3*(0.8²) = 2.88 + 1.92 = 4.8 (df 1)
    # SS_within = (1 + 1) + (4 + 0 + 4) = 10 (df 3) -> F = 4.8 / (10/3) = 1.44
    assert an.variance_ratio([[0, 2], [1, 3, 5]]) == (pytest.approx(1.44), None)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        # Scores in steps of 0.001, as rated data comes: the textbook formula's squares of differences near
        # 1e-212 underflow to zero, which no score has.
        st.lists(st.integers(0, 1000).map(lambda v: v / 1000), min_size=2, max_size=8).filter(
            lambda g: len(set(g)) > 1
        ),
        min_size=2,
        max_size=5,
    )
)
def test_variance_ratio_agrees_with_the_textbook_formula(groups: list[list[float]]) -> None:
    assert an.variance_ratio(groups)[0] == pytest.approx(_anova_f(groups), rel=1e-6, abs=1e-9)


def test_variance_ratio_degenerate_inputs_are_null_with_a_note() -> None:
    assert an.variance_ratio([[1, 2, 3]]) == (None, "needs at least 2 rows")
    assert an.variance_ratio([[1], [2]])[0] is None
    value, note = an.variance_ratio([[2, 2], [5, 5]])
    assert value is None and "no within-row variance" in note


def test_paired_test_cases() -> None:
    # 8 distinct positive differences: exact two-sided p = 2 / 2^8 = 0.0078125
    x = [float(i + i) for i in range(1, 9)]
    y = [float(i) for i in range(1, 9)]
    _statistic, p, note = an.paired_test(x, y)
    assert p == pytest.approx(2 / 256) and note is None
    assert an.paired_test([1.0, 2.0], [1.0, 2.0]) == (0.0, 1.0, "identical scores on every shared conversation")
    assert an.paired_test([1.0], [2.0])[1] is None


# ---------------------------------------------------------------------------
# Capability profile and independence
# ---------------------------------------------------------------------------


def _four_models() -> list[dict[str, Any]]:
    # emotion (F1 = VA) rises a<b<c<d; behaviour rises the same way; preference falls.
    out = []
    for i, name in enumerate("abcd"):
        level = 0.2 + 0.2 * i
        out.append(
            record(
                name,
                "c1",
                40 + 10 * i,
                avg_emotion_f1=level,
                avg_emotion_va_score=level,
                avg_binary_om_accuracy=level,
                avg_binary_human_accuracy=level,
                avg_pairwise_accuracy=1 - level,
            )
        )
    return out


def test_capability_profile_values() -> None:
    [row] = an.capability_profile(
        report_of(
            [
                record(
                    "m",
                    "c1",
                    60.0,
                    avg_emotion_f1=0.8,
                    avg_emotion_va_score=0.6,
                    avg_binary_human_accuracy=0.9,
                    avg_binary_human_accuracy_hp=0.6,
                ),
                record(
                    "m",
                    "c2",
                    70.0,
                    avg_emotion_f1=0.4,
                    avg_emotion_va_score=0.2,
                    avg_binary_human_accuracy=0.7,
                    avg_binary_human_accuracy_hp=0.8,
                ),
            ]
        )
    )
    # emotion tracking per conversation: (0.8 + 0.6)/2 = 0.7 and (0.4 + 0.2)/2 = 0.3 -> mean 0.5
    assert row.capabilities.emotion_tracking == pytest.approx(0.5)
    # human acc mean 0.8, HP wording mean 0.7 -> gap 0.1, alignment 0.7/0.8 = 0.875
    behaviour = row.components.behaviour_judgement
    assert behaviour.hp_perspective_gap == pytest.approx(0.1)
    assert behaviour.hp_perspective_alignment == pytest.approx(0.875)
    assert row.composite_score == 65.0 and row.n_conversations == 2 and not row.human_baseline


def test_rank_independence_on_known_rankings() -> None:
    profile = an.capability_profile(report_of(_four_models()))
    ind = an.rank_independence(profile)
    rho, tau = ind.spearman.rho, ind.kendall.tau
    assert rho["emotion_tracking"]["behaviour_judgement"] == pytest.approx(1.0)
    assert rho["emotion_tracking"]["preference_prediction"] == pytest.approx(-1.0)
    assert tau["behaviour_judgement"]["preference_prediction"] == pytest.approx(-1.0)
    # Kendall exact p for a perfect ranking of 4: 2 orderings of 4! = 24 are as extreme -> 2/24
    assert ind.kendall.p["emotion_tracking"]["behaviour_judgement"] == pytest.approx(2 / 24)
    assert ind.rankings["emotion_tracking"] == ["d [default]", "c [default]", "b [default]", "a [default]"]
    # response quality and holistic are constant across rows: undefined, with a note
    assert rho["response_quality"]["emotion_tracking"] is None
    assert ind.note is not None and "constant" in ind.note


def test_rank_independence_needs_three_rows() -> None:
    ind = an.rank_independence(an.capability_profile(report_of(_four_models()[:2])))
    assert all(v is None for row in ind.spearman.rho.values() for v in row.values())
    assert ind.note is not None and "at least 3" in ind.note


# ---------------------------------------------------------------------------
# Discrimination
# ---------------------------------------------------------------------------


def _three_rows(n: int = 10) -> list[dict[str, Any]]:
    records = []
    for i in range(n):
        base = 40.0 + 3 * (i % 4)
        records.append(record("b", f"c{i}", base))
        records.append(record("c", f"c{i}", base))  # identical to b everywhere
        records.append(record("a", f"c{i}", base + i + 1))  # better than b by 1..n, all distinct
    return records


def test_discrimination_tests_each_pair_on_its_own_shared_conversations() -> None:
    """Pairs are tested together in arrays; each result must still be its own pair's test on its shared set."""
    import math
    import random

    rng = random.Random(3)
    records = []
    for row in ("a", "b", "c", "d"):
        for i in range(70):
            if row == "c" and i % 7 == 0:
                continue  # c misses some conversations: its pairs share fewer
            if row == "d" and i >= 12:
                continue  # d has 12: its pairs take the exact or small-sample paths
            value = 40.0 + rng.choice([0.0, 0.0, 1.0, 2.5]) * (i % 5) + {"a": 0, "b": 1, "c": 0, "d": 3}[row]
            records.append(record(row, f"c{i:03d}", value))
    report = report_of(records)
    entry = an.discrimination(report, metrics=("composite_score",)).metrics["composite_score"]
    values = {
        (r.em_model, r.conversationId): r.composite_score for r in report.conversations if r.composite_score is not None
    }
    assert entry.n_pairs == 6
    for pair in entry.pairs:
        a, b = pair.a.split(" [")[0], pair.b.split(" [")[0]
        shared = sorted({c for m, c in values if m == a} & {c for m, c in values if m == b})
        x, y = [values[(a, c)] for c in shared], [values[(b, c)] for c in shared]
        statistic, p, note = an.paired_test(x, y)
        assert (pair.n_shared, pair.statistic, pair.p, pair.note) == (len(shared), statistic, p, note)
        assert pair.mean_difference == math.fsum(u - v for u, v in zip(x, y, strict=True)) / len(x)


def test_discrimination_counts_significant_pairs_after_holm() -> None:
    result = an.discrimination(report_of(_three_rows()), metrics=("composite_score",))
    entry = result.metrics["composite_score"]
    pairs = {(p.a, p.b): p for p in entry.pairs}
    ab = pairs[("a [default]", "b [default]")]
    # 10 distinct positive differences: exact p = 2/2^10; Holm over 3 tests: sorted p's
    # 2/1024 (x3), 2/1024 (x2 -> max with previous), 1.0 (x1) -> 6/1024, 6/1024, 1.0
    assert ab.p == pytest.approx(2 / 1024)
    assert ab.p_holm == pytest.approx(6 / 1024)
    assert ab.different is True and ab.n_shared == 10 and ab.mean_difference == pytest.approx(5.5)
    bc = pairs[("b [default]", "c [default]")]
    assert bc.p == 1.0 and bc.different is False and bc.note is not None and "identical" in bc.note
    assert entry.n_tested == 3 and entry.n_different == 2
    assert entry.share_different == pytest.approx(2 / 3)
    assert entry.variance_ratio is not None and entry.variance_ratio > 1


def test_discrimination_with_one_row_is_empty_with_a_note() -> None:
    result = an.discrimination(report_of([record("a", "c1"), record("a", "c2")]), metrics=("composite_score",))
    entry = result.metrics["composite_score"]
    assert entry.n_pairs == 0 and entry.share_different is None
    assert entry.note is not None and "fewer than two" in entry.note
    assert entry.variance_ratio is None


def test_discrimination_without_shared_conversations_is_untested() -> None:
    result = an.discrimination(report_of([record("a", "c1"), record("b", "c2")]), metrics=("composite_score",))
    entry = result.metrics["composite_score"]
    assert entry.n_tested == 0 and entry.share_different is None
    assert entry.pairs[0].note == "fewer than 2 shared conversations"


# ---------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    report = report_of(_three_rows())
    first = an.bootstrap(report, n_resamples=300, seed=5)
    assert first == an.bootstrap(report, n_resamples=300, seed=5)
    assert first != an.bootstrap(report, n_resamples=300, seed=6)
    for row in first.rows:
        ci = row.composite_score
        assert ci.low is not None and ci.estimate is not None and ci.high is not None
        assert ci.low <= ci.estimate <= ci.high
    a = next(r for r in first.rows if r.em_model == "a")
    # a = base + (i+1): i%4 over i=0..9 is 0,1,2,3,0,1,2,3,0,1 (sum 13) -> mean base 40 + 3*1.3 = 43.9;
    # mean of i+1 over 1..10 = 5.5 -> 49.4
    assert a.composite_score.estimate == pytest.approx(49.4)
    # constant capability values -> a degenerate interval at the value
    assert a.behaviour_judgement == Interval(estimate=0.5, low=0.5, high=0.5)


def test_bootstrap_outrank_probabilities() -> None:
    outrank = an.bootstrap(report_of(_three_rows()), n_resamples=300, seed=1).outrank_probability
    # a beats b on every conversation, so on every paired resample
    assert outrank["a [default]"]["b [default]"] == 1.0
    assert outrank["b [default]"]["a [default]"] == 0.0
    # b and c are identical: every replicate ties, counted half
    assert outrank["b [default]"]["c [default]"] == 0.5
    assert outrank["a [default]"]["a [default]"] is None


def test_bootstrap_of_nothing_has_a_note() -> None:
    assert an.bootstrap(ScoringReport(conversations=[], aggregates=[])).note == "nothing to resample"


# ---------------------------------------------------------------------------
# Breakdowns
# ---------------------------------------------------------------------------


def _details(category: str, group: str | None, om: str = "om/x", n_turns: int = 4) -> dict[str, Any]:
    return {"category": category, "participant_group": group, "original_model": om, "n_gt_turns": n_turns}


def test_breakdown_by_category_and_original_model() -> None:
    report = report_of(
        [
            record("m", "c1", 40.0, details=_details("Romantic relationships", None, "om/a")),
            record("m", "c2", 60.0, details=_details("Romantic relationships", None, "om/b")),
            record("m", "c3", 90.0, details=_details("Work", None, "om/a")),
        ]
    )
    info = an._conversation_info(report, None)
    by_cat = an.breakdown_by(report, info, "category")
    # hardest first: Romantic (40 + 60)/2 = 50 before Work 90
    assert [(r.category, r.composite_score, r.n_conversations) for r in by_cat.overall] == [
        ("Romantic relationships", 50.0, 2),
        ("Work", 90.0, 1),
    ]
    by_om = an.breakdown_by(report, info, "original_model")
    assert {r.original_model: r.composite_score for r in by_om.overall} == {"om/a": 65.0, "om/b": 60.0}


def test_participant_groups_mann_whitney() -> None:
    records = [
        record("m", f"a{i}", v, details=_details("Work", "anxiety_depression")) for i, v in enumerate((80, 85, 90))
    ]
    records += [record("m", f"n{i}", v, details=_details("Work", "none")) for i, v in enumerate((50, 55, 60))]
    records.append(record("m", "x", 10.0, details=_details("Work", None)))  # unknown group: left out
    report = report_of(records)
    out = an.participant_groups(report, an._conversation_info(report, None))
    row = out.rows[0]
    # every anxiety/depression score beats every "none" score: U = 3*3 = 9;
    # exact two-sided p = 2 * 1/C(6,3) = 2/20 = 0.1
    assert row.mann_whitney_u == 9.0
    assert row.p == pytest.approx(0.1)
    assert (row.n_anxiety_depression, row.n_none) == (3, 3)
    assert row.composite_anxiety_depression == 85.0 and row.composite_none == 55.0
    assert out.pooled.mann_whitney_u == 9.0


def test_participant_groups_with_an_empty_group_is_null() -> None:
    report = report_of([record("m", "a", 70.0, details=_details("Work", "anxiety_depression"))])
    row = an.participant_groups(report, an._conversation_info(report, None)).rows[0]
    assert row.p is None and row.note == "a group has no conversations"


def _turn(index: int, behaviour: float, f1: float = 0.5) -> dict[str, Any]:
    """A scored turn: the given behaviour accuracy and emotion F1, every other metric 0.5."""
    binary = {"tp": 0, "fp": 0, "tn": 0, "fn": 0, "accuracy": behaviour, "precision": 0.0, "recall": 0.0}
    binary.update(f1=0.0, mcc=0.0)
    turn: dict[str, Any] = dict.fromkeys(TURN_KEYS, 0.5)
    turn.update(
        turnNumber=index + 1,
        turn_index=index,
        emotion_f1=f1,
        binary_om=binary,
        binary_human=binary,
        binary_om_hp=binary,
        binary_human_hp=binary,
        pairwise_accuracy=1.0,
    )
    return turn


def test_turn_position_early_late_and_curve() -> None:
    # 4 GT turns: positions 0, 1 early; 2, 3 late. 3 GT turns: 0 early, 1 middle (neither), 2 late.
    report = report_of(
        [
            record(
                "m",
                "c1",
                turns=[_turn(0, 1.0), _turn(1, 0.8), _turn(2, 0.6), _turn(3, 0.4)],
                details=_details("Work", None, n_turns=4),
            ),
            record(
                "m",
                "c2",
                turns=[_turn(0, 0.9), _turn(1, 0.0), _turn(2, 0.5)],
                details=_details("Work", None, n_turns=3),
            ),
        ]
    )
    out = an.turn_position(report, an._conversation_info(report, None))
    halves = out.rows[0].halves.behaviour_accuracy
    # early: 1.0, 0.8, 0.9 -> 0.9; late: 0.6, 0.4, 0.5 -> 0.5; late − early = −0.4
    assert halves.early == pytest.approx(0.9)
    assert halves.late == pytest.approx(0.5)
    assert halves.late_minus_early == pytest.approx(-0.4)
    assert halves.n_paired_conversations == 2
    curve = out.rows[0].curve
    # turn 1: (1.0 + 0.9)/2; turn 2: (0.8 + 0.0)/2; turn 4 only from c1
    assert [(p.turn, p.n) for p in curve] == [(1, 2), (2, 2), (3, 2), (4, 1)]
    assert curve[0].behaviour_accuracy == pytest.approx(0.95)
    assert curve[1].behaviour_accuracy == pytest.approx(0.4)


# ---------------------------------------------------------------------------
# The whole analysis
# ---------------------------------------------------------------------------


def test_analyze_single_model_degrades_gracefully() -> None:
    report = report_of([record("solo", "c1", 50.0), record("solo", "c2", 50.0)])
    out = an.analyze(report, n_bootstrap=50)
    json.dumps(to_json(out), allow_nan=False)
    assert out.rows == ["solo [default]"]
    assert any("fewer than 2" in n for n in out.notes)
    assert any("no conversation metadata" in n for n in out.notes)
    assert out.independence.note is not None and out.independence.note.startswith("rank correlations need")
    assert out.discrimination.metrics["composite_score"].share_different is None


def test_analyze_flags_human_baseline_rows() -> None:
    report = report_of([record("human:ann", "c1", 80.0), record("model", "c1", 60.0)])
    out = an.analyze(report, n_bootstrap=20)
    assert out.human_baseline.rows == ["human:ann [default]"]
    # The human is not ranked among the models: it is shown apart and compared on the conversation it rated.
    assert [row.em_model for row in out.capability_profile] == ["model"]
    assert out.comparability is not None
    assert [(a.label, a.human_baseline, a.n_conversations) for a in out.comparability.apart] == [
        ("human:ann [default]", True, 1)
    ]
    (pairing,) = out.comparability.human_pairings
    assert (pairing.human, pairing.model, pairing.n_shared) == ("human:ann [default]", "model [default]", 1)
    assert pairing.mean_difference == 20.0 and pairing.p is None  # one pair: untestable, and said so


def test_analyze_on_synthetic_runs_separates_skill_levels() -> None:
    conversations = synth_conversations(24, seed=11, min_turns=3, max_turns=6)
    runs = []
    for name, skill in (("weak", 0.1), ("mid", 0.5), ("strong", 0.9)):
        runs += synth_runs(conversations, name, "default", seed=11, skill=skill)
    report = score_documents(conversations, runs)
    out = an.analyze(report, conversations, n_bootstrap=200, seed=3)
    json.dumps(to_json(out), allow_nan=False)
    assert out.independence.rankings["behaviour_judgement"] == [
        "strong [default]",
        "mid [default]",
        "weak [default]",
    ]
    assert out.discrimination.metrics["composite_score"].share_different == 1.0
    assert out.bootstrap.outrank_probability["strong [default]"]["weak [default]"] == 1.0
    categories = {r.category for r in out.breakdowns.by_category.overall}
    assert categories == {c.metadata.category for c in conversations}
    assert out.breakdowns.by_turn_position.note is None


# ---------------------------------------------------------------------------
# The typed results
# ---------------------------------------------------------------------------


def test_analysis_json_reads_back_into_the_same_model() -> None:
    conversations = synth_conversations(8, seed=2, min_turns=2, max_turns=4)
    runs = synth_runs(conversations, "a", "default", seed=2, skill=0.8)
    runs += synth_runs(conversations, "human:b", "default", seed=2, skill=0.4)
    out = an.analyze(score_documents(conversations, runs), conversations, n_bootstrap=40, seed=1)
    text = json.dumps(to_json(out), allow_nan=False)
    assert Analysis.model_validate_json(text) == out
    # a JSON key spelt differently is an error, not a silently missing value
    data = json.loads(text)
    data["human_baseline"]["note_"] = data["human_baseline"].pop("note")
    with pytest.raises(ValidationError, match="note"):
        Analysis.model_validate(data)


def test_results_are_frozen_and_refuse_nan() -> None:
    interval = Interval(estimate=0.5, low=0.4, high=0.6)
    with pytest.raises(ValidationError, match="frozen"):
        interval.low = 0.1
    with pytest.raises(ValidationError, match="finite"):
        Interval(estimate=float("nan"), low=None, high=None)


def test_result_fields_match_the_names_the_analyses_loop_over() -> None:
    assert tuple(CapabilityScores.model_fields) == CAPABILITIES
    assert tuple(TurnHalves.model_fields) == tuple(an.TURN_POSITION_METRICS)
    assert tuple(CurvePoint.model_fields)[2:] == tuple(an.TURN_POSITION_METRICS)
    scores = CapabilityScores(**dict.fromkeys(CAPABILITIES, 0.25))
    assert scores.capability("response_quality") == 0.25
    with pytest.raises(KeyError, match="unknown capability 'composite_score'"):
        scores.capability("composite_score")


def test_report_json_is_streamed_with_the_bytes_of_one_dump(tmp_path) -> None:
    """write_json writes a scoring report row by row; the file is byte for byte the report dumped in one piece."""
    from attunebench.metrics.report import write_json

    conversations = synth_conversations(3, seed=5, min_turns=2, max_turns=3)
    runs = synth_runs(conversations, "m/a", "default", seed=5) + synth_runs(conversations, "m/b", "verbose", seed=6)
    for report in (
        score_documents(conversations, runs),
        score_documents(conversations, runs, include_details=True),
        ScoringReport(conversations=[], aggregates=[]),
    ):
        out = tmp_path / "report.json"
        write_json(report, out)
        expected = json.dumps(to_json(report), ensure_ascii=False, indent=2, allow_nan=False) + "\n"
        assert out.read_text(encoding="utf-8") == expected
        assert ScoringReport.model_validate_json(out.read_text(encoding="utf-8")) == report
