"""The analyses AttuneBench exists for (SPEC 6), over a scoring report.

Everything takes the scoring report (:class:`attunebench.metrics.results.ScoringReport`,
as ``ScoringResult.report`` builds it or as read back from ``attune score --json``) plus, for the breakdowns,
the ground-truth conversations, and returns the typed models of
:mod:`attunebench.metrics.results`. Degenerate inputs (one model, constant scores,
too few shared conversations) never raise and never put NaN in the output:
the affected value is None and a note says why, because a researcher reading
the JSON must be able to tell "no difference" from "could not be tested".

A "row" is one (em_model, mode) pair, as in the leaderboard.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile
from attunebench.metrics.aggregate import mean_or_none, standard_error
from attunebench.metrics.columns import exact_row_sums, group_means
from attunebench.metrics.comparison import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_SEED,
    MIN_CONVERSATIONS_FOR_CI,
    PRIOR_BASELINE,
    ComparableSplit,
    is_mode_agnostic,
    skill,
    split_comparable,
)
from attunebench.metrics.composite import CAPABILITIES, capability_scores, composite_parts, hp_perspective
from attunebench.metrics.keys import METRIC_KEYS, is_human
from attunebench.metrics.results import (
    Analysis,
    BehaviourJudgementParts,
    Bootstrap,
    BootstrapRow,
    Breakdowns,
    CapabilityComponents,
    CapabilityScores,
    CategoryBreakdown,
    CategoryOverall,
    CategoryRow,
    Comparability,
    ConversationRecord,
    CurvePoint,
    Discrimination,
    EmotionTrackingParts,
    GroupComparison,
    GroupMetric,
    GroupRow,
    HalfComparison,
    HolisticComprehensionParts,
    HumanBaseline,
    HumanPairing,
    Independence,
    Interval,
    Kendall,
    Matrix,
    MetricDiscrimination,
    OriginalModelBreakdown,
    OriginalModelOverall,
    OriginalModelRow,
    PairTest,
    ParticipantGroups,
    PooledHuman,
    PreferencePredictionParts,
    ProfileRow,
    ResponseQualityParts,
    ScoringReport,
    SkillIntervals,
    Spearman,
    SpreadTest,
    TurnHalves,
    TurnPosition,
    TurnPositionRow,
    TurnScores,
    row_label,
)

ALPHA = 0.05
CONFIDENCE = 0.95
Z_95 = 1.959964
MIN_ROWS_FOR_CORRELATION = 3  # two points always correlate at ±1: nothing to learn

# Metrics whose power to separate rows is reported (capabilities first, then their parts).
DISCRIMINATION_METRICS: tuple[str, ...] = (
    "composite_score",
    *CAPABILITIES,
    "avg_emotion_f1",
    "avg_emotion_va_score",
    "avg_binary_om_accuracy",
    "avg_binary_human_accuracy",
    "avg_pairwise_accuracy",
    "avg_pairwise_kendall_tau",
    "avg_response_similarity",
    "avg_response_preference_alignment",
    "avg_draft_judge_score",
    "panas_baseline_adjusted",
    "four_branch_normalized",
)
# The per-turn scores the turn-position analysis reads (by their keys in a turn's scores), each read into one
# array over every scored turn.
TURN_FIELDS: dict[str, tuple[str, ...]] = {
    "emotion_f1": ("emotion_f1",),
    "emotion_va_score": ("emotion_va_score",),
    "binary_om_accuracy": ("binary_om", "accuracy"),
    "binary_human_accuracy": ("binary_human", "accuracy"),
    "pairwise_accuracy": ("pairwise_accuracy",),
}
# Per-turn metrics followed along the conversation (SPEC 6: behaviour accuracy drifts down), each computed
# from those arrays elementwise (the same arithmetic per turn as on one turn's values).
TURN_POSITION_METRICS: dict[str, Callable[[Mapping[str, np.ndarray]], np.ndarray]] = {
    "emotion_f1": lambda t: t["emotion_f1"],
    "emotion_va_score": lambda t: t["emotion_va_score"],
    "binary_om_accuracy": lambda t: t["binary_om_accuracy"],
    "binary_human_accuracy": lambda t: t["binary_human_accuracy"],
    "behaviour_accuracy": lambda t: (t["binary_om_accuracy"] + t["binary_human_accuracy"]) / 2,
    "pairwise_accuracy": lambda t: t["pairwise_accuracy"],
}
GROUPS: tuple[str, str] = ("anxiety_depression", "none")


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    """A JSON-safe float: numpy scalars converted, NaN/inf become None."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given).

    p_(i) adjusted = max over j ≤ i of min(1, (m − j + 1) · p_(j)) in ascending order.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _rows(report: ScoringReport) -> dict[tuple[str, str], list[ConversationRecord]]:
    rows: dict[tuple[str, str], list[ConversationRecord]] = {}
    for record in report.conversations:
        rows.setdefault((record.em_model, record.mode), []).append(record)
    return dict(sorted(rows.items()))


# The columns of a RecordTable: what conversation_values gives, then the holistic parts the profile shows.
PARTS: tuple[str, ...] = ("panas", "convq", "four_branch")
TABLE_COLUMNS: tuple[str, ...] = (
    "coverage",
    "post_coverage",
    *METRIC_KEYS,
    *CAPABILITIES,
    *(f"part:{p}" for p in PARTS),
)


class RecordTable:
    """Every record's per-conversation values, read from its model once, as one (record × column) array.

    Why: the profile, the discrimination tests, the bootstrap and the breakdowns each read every record's
    metrics and capability scores; at thousands of conversations × dozens of rows, reading them through the
    records' models once per analysis (instead of once per analysis and per record) was a large part of the
    time. Records are grouped by row as :func:`_rows` groups them; a missing value is NaN.
    """

    def __init__(self, report: ScoringReport) -> None:
        rows = _rows(report)
        self.report = report
        self.keys = list(rows)
        self.records = [record for records in rows.values() for record in records]
        self.spans: dict[tuple[str, str], tuple[int, int]] = {}
        start = 0
        for key, records in rows.items():
            self.spans[key] = (start, start + len(records))
            start += len(records)
        self.column = {name: i for i, name in enumerate(TABLE_COLUMNS)}
        data = []
        for record in self.records:
            fields = vars(record)  # the record's field values by name: what record.metrics() reads, without copying
            caps = capability_scores(fields)
            parts = composite_parts(fields)
            data.append(
                (
                    record.coverage,
                    record.post_coverage,
                    *(fields[name] for name in METRIC_KEYS),
                    *(caps[name] for name in CAPABILITIES),
                    *(parts[name] for name in PARTS),
                )
            )
        self.values = np.array(data, dtype=float).reshape(len(data), len(TABLE_COLUMNS))  # None reads as NaN
        self.row_of = {id(record): i for i, record in enumerate(self.records)}
        self._cells: tuple[list[str], dict[tuple[int, int], int]] | None = None

    def cells(self) -> tuple[list[str], dict[tuple[int, int], int]]:
        """The conversations of every row (sorted), and (row, conversation) -> its record's index.

        A later record of the same row and conversation replaces an earlier one.
        """
        if self._cells is None:
            universe = sorted({r.conversationId for r in self.records})
            position = {cid: i for i, cid in enumerate(universe)}
            cells: dict[tuple[int, int], int] = {}
            for r_i, key in enumerate(self.keys):
                start, stop = self.spans[key]
                for index in range(start, stop):
                    cells[(r_i, position[self.records[index].conversationId])] = index
            self._cells = (universe, cells)
        return self._cells

    def columns(self, names: Sequence[str]) -> np.ndarray:
        """The (record × name) values of the named columns; a name the table does not hold is all NaN."""
        out = np.full((len(self.records), len(names)), np.nan)
        for i, name in enumerate(names):
            if name in self.column:
                out[:, i] = self.values[:, self.column[name]]
        return out

    def row_mean(self, key: tuple[str, str], name: str) -> float | None:
        """mean_or_none of a column over one row's records."""
        start, stop = self.spans[key]
        values = self.values[start:stop, self.column[name]]
        return mean_or_none(values[~np.isnan(values)].tolist())

    @classmethod
    def of(cls, report: ScoringReport, table: RecordTable | None) -> RecordTable:
        """``table`` when it was built from ``report``, else a new table of it."""
        return table if table is not None and table.report is report else cls(report)


# ---------------------------------------------------------------------------
# Capability profile
# ---------------------------------------------------------------------------


def capability_profile(report: ScoringReport, table: RecordTable | None = None) -> list[ProfileRow]:
    """Per row: the five capability scores and the metrics each is made of (SPEC 6).

    ``table`` is the report's :class:`RecordTable` when the caller built it already.
    """
    table = RecordTable.of(report, table)
    aggregates = {(a.em_model, a.mode): a for a in report.aggregates}
    out = []
    for key in table.keys:
        em_model, mode = key
        start, stop = table.spans[key]

        def mean(name: str, key: tuple[str, str] = key) -> float | None:
            return table.row_mean(key, name)

        agg = aggregates.get(key)
        human_acc = mean("avg_binary_human_accuracy")
        human_acc_hp = mean("avg_binary_human_accuracy_hp")
        gap, alignment = hp_perspective(human_acc, human_acc_hp)
        out.append(
            ProfileRow(
                em_model=em_model,
                mode=mode,
                label=row_label(em_model, mode),
                human_baseline=is_human(em_model),
                n_conversations=stop - start,
                coverage=mean("coverage"),
                composite_score=mean("composite_score"),
                se_composite=agg.se_composite if agg else None,
                capabilities=CapabilityScores(**{name: mean(name) for name in CAPABILITIES}),
                components=CapabilityComponents(
                    emotion_tracking=EmotionTrackingParts(
                        emotion_f1=mean("avg_emotion_f1"),
                        emotion_va_score=mean("avg_emotion_va_score"),
                        emotion_f1_intensity=mean("avg_emotion_f1_intensity"),
                        emotion_intensity_mae=mean("avg_emotion_intensity_mae"),
                    ),
                    behaviour_judgement=BehaviourJudgementParts(
                        binary_om_accuracy=mean("avg_binary_om_accuracy"),
                        binary_human_accuracy=human_acc,
                        binary_om_accuracy_hp=mean("avg_binary_om_accuracy_hp"),
                        binary_human_accuracy_hp=human_acc_hp,
                        hp_perspective_gap=gap,
                        hp_perspective_alignment=alignment,
                    ),
                    preference_prediction=PreferencePredictionParts(
                        pairwise_accuracy=mean("avg_pairwise_accuracy"),
                        pairwise_kendall_tau=mean("avg_pairwise_kendall_tau"),
                    ),
                    response_quality=ResponseQualityParts(
                        response_similarity=mean("avg_response_similarity"),
                        response_preference_alignment=mean("avg_response_preference_alignment"),
                        draft_judge_score=mean("avg_draft_judge_score"),
                        draft_binary_alignment=mean("avg_draft_binary_alignment"),
                    ),
                    holistic_comprehension=HolisticComprehensionParts(
                        panas=mean("part:panas"),
                        conversation_questions=mean("part:convq"),
                        four_branch_normalized=mean("part:four_branch"),
                    ),
                ),
            )
        )
    return out


# ---------------------------------------------------------------------------
# Independence of capability rankings
# ---------------------------------------------------------------------------


def rank_independence(profile: Sequence[ProfileRow], metrics: Sequence[str] = CAPABILITIES) -> Independence:
    """Spearman and Kendall correlations (with p-values) of row scores between capabilities.

    Rank correlations compare the *rankings* of rows, which is what SPEC 6 asks:
    do models that track emotions well also judge behaviour well?
    """
    from scipy import stats

    labels = [row.label for row in profile]
    values = {m: [row.capabilities.capability(m) for row in profile] for m in metrics}
    rankings = {
        m: [labels[i] for i in sorted(range(len(labels)), key=lambda i: (-(values[m][i] or 0.0), labels[i]))]
        for m in metrics
    }
    rho_matrix: Matrix = {}
    p_spearman: Matrix = {}
    tau_matrix: Matrix = {}
    p_kendall: Matrix = {}
    note = None
    notes = []
    if len(profile) < MIN_ROWS_FOR_CORRELATION:
        note = (
            f"rank correlations need at least {MIN_ROWS_FOR_CORRELATION} (model, mode) rows; "
            f"got {len(profile)}, so every coefficient is null"
        )
    off_diagonal = []
    for a in metrics:
        rho_matrix[a], p_spearman[a], tau_matrix[a], p_kendall[a] = {}, {}, {}, {}
        for b in metrics:
            rho = p_s = tau = p_k = None
            usable = [(x, y) for x, y in zip(values[a], values[b], strict=True) if x is not None and y is not None]
            if len(usable) >= MIN_ROWS_FOR_CORRELATION:
                x = [u[0] for u in usable]
                y = [u[1] for u in usable]
                if len(set(x)) < 2 or len(set(y)) < 2:
                    notes.append(f"{a} vs {b}: a capability is constant across rows, correlation undefined")
                else:
                    s = stats.spearmanr(x, y)
                    k = stats.kendalltau(x, y)
                    rho, p_s, tau, p_k = _num(s.statistic), _num(s.pvalue), _num(k.statistic), _num(k.pvalue)
                    if a != b and rho is not None:
                        off_diagonal.append(abs(rho))
            rho_matrix[a][b] = rho
            p_spearman[a][b] = p_s
            tau_matrix[a][b] = tau
            p_kendall[a][b] = p_k
    if notes and note is None:
        note = "; ".join(sorted(set(notes)))
    return Independence(
        metrics=list(metrics),
        n_rows=len(profile),
        rankings=rankings,
        spearman=Spearman(rho=rho_matrix, p=p_spearman),
        kendall=Kendall(tau=tau_matrix, p=p_kendall),
        # each unordered pair appears twice off the diagonal; the mean is unaffected
        mean_abs_spearman=sum(off_diagonal) / len(off_diagonal) if off_diagonal else None,
        note=note,
    )


# ---------------------------------------------------------------------------
# Discrimination: which metrics separate models
# ---------------------------------------------------------------------------


EXACT_SIGN_FLIP_MAX = 13  # 2**13 sign patterns: enumerated at once, in milliseconds


def _exact_sign_flip_p(nonzero: np.ndarray) -> float:
    """Exact two-sided p of the Wilcoxon signed-rank statistic by enumerating every sign pattern.

    The same null distribution scipy's ``wilcoxon`` samples with a permutation
    test when ties or zeros rule out its exact table (zeros dropped, average
    ranks for ties), but computed in one array operation: scipy's route takes
    about a second per pair on 12 tied values, and the dashboard runs hundreds.
    """
    from scipy import stats

    ranks = stats.rankdata(np.abs(nonzero))
    n = ranks.size
    observed = float(ranks[nonzero > 0].sum())
    patterns = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    r_plus = patterns @ ranks
    tolerance = 1e-9 * max(1.0, float(ranks.sum()))
    greater = float(np.mean(r_plus >= observed - tolerance))
    less = float(np.mean(r_plus <= observed + tolerance))
    return min(1.0, 2 * min(greater, less))


PairResult = tuple[float | None, float | None, str | None]


def paired_test(x: Sequence[float], y: Sequence[float]) -> PairResult:
    """(statistic, p, note) of a two-sided Wilcoxon signed-rank test on paired values.

    Fewer than 2 pairs: untestable (None). All differences zero: p = 1, since the
    data show no difference at all (scipy would return NaN there). With ties or
    zero differences among at most 13 non-zero differences the p-value is exact
    (every sign pattern enumerated); otherwise scipy's default method.
    """
    return paired_tests([(x, y)])[0]


def _scipy_method(diffs: np.ndarray) -> str:
    """The method scipy's ``wilcoxon`` picks by default for these differences (its "auto" rule).

    Rows that share it and their length can go through scipy in one call with the same results,
    because that call's decision, made over the whole array, is then each row's own decision.
    """
    if diffs.size > 50:
        return "asymptotic"
    nonzero = diffs[diffs != 0]
    if nonzero.size == diffs.size and np.unique(np.abs(nonzero)).size == nonzero.size:
        return "exact"
    return "tied"  # ties or zeros among more than 13 non-zero differences: the normal approximation


def _sign_flip_result(nonzero: np.ndarray) -> PairResult:
    """(statistic, exact p, no note) for non-zero differences that scipy's exact table cannot take."""
    from scipy import stats

    ranks = stats.rankdata(np.abs(nonzero))
    r_plus = float(ranks[nonzero > 0].sum())
    return (min(r_plus, float(ranks.sum()) - r_plus), _exact_sign_flip_p(nonzero), None)


def _batch_tests(x: np.ndarray, y: np.ndarray, method: str, diffs: np.ndarray | None = None) -> list[PairResult]:
    """(statistic, p, note) of each row of ``x`` against the same row of ``y``: rows of one length and scipy method.

    ``diffs`` is ``x - y`` when the caller has it already.

    What ``scipy.stats.wilcoxon`` gives each row. The rows scipy answers by its normal approximation (every
    method but "exact") are ranked here in arrays (:func:`attunebench.metrics.signed_rank.normal_approximation`,
    the same floats), unless a difference is not finite; the rest go through scipy in one call.
    """
    from scipy import stats

    from attunebench.metrics.signed_rank import MAX_DIFFERENCES, normal_approximation

    if diffs is None:
        diffs = x - y
    if method != "exact" and diffs.shape[1] <= MAX_DIFFERENCES and np.isfinite(diffs).all():
        statistic, pvalue = normal_approximation(diffs)
    else:
        tested = stats.wilcoxon(x, y, axis=1)
        statistic, pvalue = np.asarray(tested.statistic), np.asarray(tested.pvalue)
    results: list[PairResult] = []
    for s, pv in zip(statistic.tolist(), pvalue.tolist(), strict=True):
        p = _num(pv)
        results.append((None, None, "test undefined for these values") if p is None else (_num(s), p, None))
    return results


def paired_tests(pairs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> list[PairResult]:
    """:func:`paired_test` of each pair, the pairs that need scipy tested in one array call per kind.

    Why: the discrimination analysis tests every pair of rows on every metric (thousands of tests
    at the paper's eleven models × four modes), and scipy's per-call overhead, not the arithmetic,
    was nearly all of its time. Rows of one call share their length and scipy's method, so each
    row's result is what its own call gives.
    """

    results: list[PairResult | None] = []
    batches: dict[tuple[int, str], list[int]] = {}
    arrays: list[tuple[np.ndarray, np.ndarray]] = []
    for index, (x, y) in enumerate(pairs):
        arrays.append((np.asarray(x, dtype=float), np.asarray(y, dtype=float)))
        if len(x) < 2:
            results.append((None, None, "fewer than 2 shared conversations"))
            continue
        diffs = np.asarray([a - b for a, b in zip(x, y, strict=True)], dtype=float)
        if not diffs.any():
            results.append((0.0, 1.0, "identical scores on every shared conversation"))
            continue
        nonzero = diffs[diffs != 0]
        tied = np.unique(np.abs(nonzero)).size < nonzero.size
        if (tied or nonzero.size < diffs.size) and nonzero.size <= EXACT_SIGN_FLIP_MAX:
            results.append(_sign_flip_result(nonzero))
            continue
        results.append(None)
        batches.setdefault((diffs.size, _scipy_method(diffs)), []).append(index)
    for (_, method), members in batches.items():
        tested = _batch_tests(
            np.stack([arrays[i][0] for i in members]), np.stack([arrays[i][1] for i in members]), method
        )
        for index, result in zip(members, tested, strict=True):
            results[index] = result
    done = [result for result in results if result is not None]
    if len(done) != len(results):
        raise RuntimeError("a paired test was left without a result")
    return done


def variance_ratio(groups: Sequence[Sequence[float]]) -> tuple[float | None, str | None]:
    """One-way ANOVA F (``scipy.stats.f_oneway``) over rows' per-conversation values.

    Large values mean a metric separates rows far beyond its conversation-to-
    conversation noise. None (with a note) when fewer than 2 rows, no
    within-row degrees of freedom, or no within-row variance (where scipy would
    return inf or NaN with a warning).
    """
    groups = [list(g) for g in groups if g]
    k = len(groups)
    n = sum(len(g) for g in groups)
    if k < 2:
        return None, "needs at least 2 rows"
    if n - k < 1:
        return None, "needs more than one conversation in some row"
    means = [math.fsum(g) / len(g) for g in groups]
    if all(v == m for g, m in zip(groups, means, strict=True) for v in g):
        return None, "no within-row variance (every conversation scores the same within each row)"
    from scipy import stats

    return _num(stats.f_oneway(*groups).statistic), None


def _shared_tests(x: np.ndarray, y: np.ndarray, diffs: np.ndarray) -> list[PairResult]:
    """:func:`paired_test` of each row of ``x`` against the same row of ``y`` (one length, no missing values).

    ``diffs`` is ``x - y``. Why: at thousands of conversations the discrimination analysis tests hundreds of
    pairs of rows per metric, and building each pair's differences in Python was most of its time. Rows whose
    non-zero differences are few enough for the exact sign-flip path go through it one by one (rare at scale);
    the rest are grouped by scipy's method and tested together (:func:`_batch_tests`), exactly as
    :func:`paired_tests` groups them, so every result is what the pair's own call gives.
    """
    n_pairs, n = x.shape
    if n < 2:
        return [(None, None, "fewer than 2 shared conversations")] * n_pairs
    nonzero = np.count_nonzero(diffs, axis=1)
    results: list[PairResult | None] = [None] * n_pairs
    batches: dict[str, list[int]] = {}
    for k in range(n_pairs):
        if nonzero[k] == 0:
            results[k] = (0.0, 1.0, "identical scores on every shared conversation")
            continue
        if nonzero[k] <= EXACT_SIGN_FLIP_MAX:
            kept = diffs[k][diffs[k] != 0]
            if nonzero[k] < n or np.unique(np.abs(kept)).size < kept.size:  # zeros or ties: the exact sign flip
                results[k] = _sign_flip_result(kept)
                continue
        batches.setdefault(_scipy_method(diffs[k]), []).append(k)
    for method, members in batches.items():
        tested = _batch_tests(x[members], y[members], method, diffs[members])
        for k, result in zip(members, tested, strict=True):
            results[k] = result
    return [r if r is not None else (None, None, "test undefined for these values") for r in results]


def discrimination(
    report: ScoringReport,
    metrics: Sequence[str] = DISCRIMINATION_METRICS,
    alpha: float = ALPHA,
    table: RecordTable | None = None,
) -> Discrimination:
    """Per metric: paired Wilcoxon test for every pair of rows, Holm-corrected (SPEC 6).

    Each metric's values are one (row × conversation) array; the pairs of rows that share the same
    conversations (at scale, nearly all) are tested together (:func:`_shared_tests`). ``table`` is the
    report's :class:`RecordTable` when the caller built it already.
    """
    table = RecordTable.of(report, table)
    keys = table.keys
    universe, cells = table.cells()
    position = {cid: i for i, cid in enumerate(universe)}
    order: dict[tuple[str, str], list[int]] = {}  # each row's conversations in its records' order
    for key in keys:
        start, stop = table.spans[key]
        order[key] = list(dict.fromkeys(position[r.conversationId] for r in table.records[start:stop]))
    by_metric = table.columns(metrics)  # NaN: no value, left out
    where = (np.array([c[0] for c in cells], dtype=int), np.array([c[1] for c in cells], dtype=int))
    chosen = np.array(list(cells.values()), dtype=int)
    out: dict[str, MetricDiscrimination] = {}
    for m_i, metric in enumerate(metrics):
        values = np.full((len(keys), len(universe)), np.nan)
        values[where] = by_metric[chosen, m_i]
        present = ~np.isnan(values)
        groups: dict[bytes, list[tuple[int, int]]] = {}
        for i in range(len(keys)):
            for j in range(i + 1, len(keys)):
                groups.setdefault((present[i] & present[j]).tobytes(), []).append((i, j))
        found: dict[tuple[int, int], tuple[int, float | None, PairResult]] = {}
        for mask_bytes, members in groups.items():
            shared = np.flatnonzero(np.frombuffer(mask_bytes, dtype=bool))
            columns = values[:, shared]
            left = columns[[i for i, _ in members]]
            right = columns[[j for _, j in members]]
            diffs = left - right
            tests = _shared_tests(left, right, diffs)
            sums = exact_row_sums(diffs).tolist()  # each pair's math.fsum of its differences
            for k, pair in enumerate(members):
                mean_difference = _num(sums[k] / shared.size) if shared.size else None
                found[pair] = (int(shared.size), mean_difference, tests[k])
        ordered = [(i, j) for i in range(len(keys)) for j in range(i + 1, len(keys))]
        tested_p = [p for pair in ordered if (p := found[pair][2][1]) is not None]
        adjusted = iter(holm(tested_p))
        pairs = []
        for i, j in ordered:
            n_shared, mean_difference, (statistic, p, note) = found[(i, j)]
            p_holm = next(adjusted) if p is not None else None
            pairs.append(
                PairTest(
                    a=row_label(*keys[i]),
                    b=row_label(*keys[j]),
                    n_shared=n_shared,
                    mean_difference=mean_difference,
                    statistic=statistic,
                    p=p,
                    p_holm=p_holm,
                    different=None if p_holm is None else p_holm < alpha,
                    note=note,
                )
            )
        scores = {}
        for r_i, key in enumerate(keys):
            in_order = np.array(order[key], dtype=int)
            scores[key] = values[r_i, in_order][present[r_i, in_order]].tolist()
        n_different = sum(1 for pair in pairs if pair.different)
        ratio, ratio_note = variance_ratio([scores[key] for key in keys])
        note = None
        if not pairs:
            note = "fewer than two (model, mode) rows: nothing to compare"
        elif not tested_p:
            note = "no pair of rows could be tested (too few shared conversations)"
        out[metric] = MetricDiscrimination(
            n_pairs=len(pairs),
            n_tested=len(tested_p),
            n_different=n_different,
            share_different=n_different / len(tested_p) if tested_p else None,
            variance_ratio=_num(ratio),
            variance_ratio_note=ratio_note,
            note=note,
            pairs=pairs,
        )
    return Discrimination(alpha=alpha, correction="holm", test="wilcoxon signed-rank (two-sided)", metrics=out)


# ---------------------------------------------------------------------------
# Bootstrap confidence intervals
# ---------------------------------------------------------------------------


def bootstrap(
    report: ScoringReport,
    n_resamples: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
    min_conversations: int = MIN_CONVERSATIONS_FOR_CI,
    table: RecordTable | None = None,
) -> Bootstrap:
    """Percentile CIs of each row's composite and capabilities, resampling conversations.

    One resample draws conversation ids (with replacement) from the union of
    all rows' conversations and applies the same draw to every row, so rows
    are compared on the same resampled conversations; a row's replicate is its
    mean over the drawn conversations it has. P(a outranks b) is the share of
    replicates where a's composite beats b's (ties count half).

    A row with fewer than ``min_conversations`` conversations gets its estimate
    but no interval (low and high null). When the report has a
    ``baseline:prior`` row, each row also gets its skill over it per replicate,
    (row − prior) / (scale − prior), so the skill interval is paired too. ``table`` is the report's
    :class:`RecordTable` when the caller built it already.
    """
    table = RecordTable.of(report, table)
    keys = table.keys
    metrics = ("composite_score", *CAPABILITIES)
    universe, cells = table.cells()
    n_u, n_rows = len(universe), len(keys)

    prior_keys = [key for key in keys if key[0] == PRIOR_BASELINE]
    prior_label = row_label(*prior_keys[0]) if prior_keys else None

    def result(rows: list[BootstrapRow], outrank: Matrix, note: str | None) -> Bootstrap:
        return Bootstrap(
            seed=seed,
            n_resamples=n_resamples,
            confidence=confidence,
            resampling="conversations, paired across rows",
            rows=rows,
            outrank_probability=outrank,
            note=note,
            min_conversations_for_ci=min_conversations,
            prior_baseline=prior_label if rows else None,
        )

    if n_rows == 0 or n_u == 0 or n_resamples < 1:
        return result([], {}, "nothing to resample")

    values = np.full((len(metrics), n_rows, n_u), np.nan)
    where = (np.array([c[0] for c in cells], dtype=int), np.array([c[1] for c in cells], dtype=int))
    values[:, where[0], where[1]] = table.columns(metrics)[np.array(list(cells.values()), dtype=int)].T

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_u, size=(n_resamples, n_u))
    counts = (
        np.bincount((np.arange(n_resamples)[:, None] * n_u + draws).ravel(), minlength=n_resamples * n_u)
        .reshape(n_resamples, n_u)
        .astype(float)
    )
    low_q, high_q = 100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2

    replicates = np.empty((len(metrics), n_resamples, n_rows))
    for m_i in range(len(metrics)):
        present = ~np.isnan(values[m_i])
        numerator = counts @ np.where(present, values[m_i], 0.0).T
        denominator = counts @ present.T.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            replicates[m_i] = np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)

    prior_index = keys.index(prior_keys[0]) if prior_keys else None
    scales = [100.0 if metric == "composite_score" else 1.0 for metric in metrics]

    def interval(observed: float | None, reps: np.ndarray, allowed: bool) -> Interval:
        reps = reps[~np.isnan(reps)]
        low = high = None
        if allowed and reps.size:
            low, high = np.percentile(reps, [low_q, high_q])
        return Interval(estimate=_num(observed), low=_num(low), high=_num(high))

    boot_rows = []
    few = []
    for r_i, key in enumerate(keys):
        n_row = int((~np.isnan(values[0, r_i])).sum())
        allowed = n_row >= min_conversations
        if not allowed:
            few.append(f"{row_label(*key)} (n = {n_row})")
        intervals = {}
        skills = {}
        for m_i, metric in enumerate(metrics):
            observed = values[m_i, r_i][~np.isnan(values[m_i, r_i])]
            estimate = float(observed.mean()) if observed.size else None
            intervals[metric] = interval(estimate, replicates[m_i, :, r_i], allowed)
            if prior_index is not None:
                prior_obs = values[m_i, prior_index][~np.isnan(values[m_i, prior_index])]
                prior_estimate = float(prior_obs.mean()) if prior_obs.size else None
                prior_reps = replicates[m_i, :, prior_index]
                with np.errstate(invalid="ignore", divide="ignore"):
                    # A replicate whose prior is perfect has no skill scale: NaN, dropped like a missing value.
                    skill_reps = np.where(
                        prior_reps < scales[m_i],
                        (replicates[m_i, :, r_i] - prior_reps) / (scales[m_i] - prior_reps),
                        np.nan,
                    )
                skills[metric] = interval(skill(estimate, prior_estimate, scales[m_i]), skill_reps, allowed)
        boot_rows.append(
            BootstrapRow(
                em_model=key[0],
                mode=key[1],
                label=row_label(*key),
                human_baseline=is_human(key[0]),
                skill=SkillIntervals(**skills) if skills else None,
                **intervals,
            )
        )

    composite = replicates[0]
    outrank: Matrix = {}
    for i, a in enumerate(keys):
        outrank[row_label(*a)] = {}
        for j, b in enumerate(keys):
            prob = None
            if i != j:
                ok = ~np.isnan(composite[:, i]) & ~np.isnan(composite[:, j])
                if ok.any():
                    ci, cj = composite[ok, i], composite[ok, j]
                    prob = float(np.mean((ci > cj) + 0.5 * (ci == cj)))
            outrank[row_label(*a)][row_label(*b)] = prob
    note = f"no interval for rows with fewer than {min_conversations} conversations: {', '.join(few)}" if few else None
    return result(boot_rows, outrank, note)


# ---------------------------------------------------------------------------
# Breakdowns
# ---------------------------------------------------------------------------


def _conversation_info(
    report: ScoringReport, conversations: Sequence[ConversationFile] | Mapping[str, ConversationFile] | None
) -> dict[str, dict[str, Any]]:
    """conversationId -> category, original model, participant group, number of GT turns."""
    info: dict[str, dict[str, Any]] = {}
    if conversations is not None:
        docs = conversations.values() if isinstance(conversations, Mapping) else conversations
        for doc in docs:
            profile = doc.participant_profile
            info[doc.conversationId] = {
                "category": doc.metadata.category,
                "original_model": doc.metadata.model,
                "participant_group": cat.participant_group(profile.consented_diagnoses() if profile else None),
                "n_gt_turns": len(doc.turns),
            }
    for record in report.conversations:
        details = record.details
        if details and record.conversationId not in info:
            info[record.conversationId] = {
                "category": details.category,
                "original_model": details.original_model,
                "participant_group": details.participant_group,
                "n_gt_turns": details.n_gt_turns,
            }
    return info


# Metrics every breakdown reports: the composite, then each capability (SPEC 6: not only the composite).
BREAKDOWN_METRICS: tuple[str, ...] = ("composite_score", *CAPABILITIES)
POOLED_HUMAN_LABEL = "all human raters (pooled)"

ConversationValues = dict[str, float | None]  # composite_score and each capability of one conversation


def _values_of(record: ConversationRecord) -> ConversationValues:
    caps = capability_scores(record.metrics())
    return {"composite_score": record.composite_score, **{name: caps[name] for name in CAPABILITIES}}


def per_conversation(
    records: Iterable[ConversationRecord], values_of: Callable[[ConversationRecord], ConversationValues] = _values_of
) -> dict[str, ConversationValues]:
    """conversationId -> each breakdown metric averaged over the given rows' records of that conversation.

    A conversation replayed by several pooled rows is one observation (SPEC 6 breakdowns count
    conversations, not rows): its value is the mean over those rows.
    """
    grouped: dict[str, list[ConversationValues]] = {}
    for record in records:
        grouped.setdefault(record.conversationId, []).append(values_of(record))
    return {
        cid: {m: mean_or_none(v[m] for v in values) for m in BREAKDOWN_METRICS}
        for cid, values in sorted(grouped.items())
    }


class RowValues:
    """Each row's per-conversation values and the pooled rows', computed once for all breakdowns of a report.

    Why: the category, original-model and participant-group breakdowns each read every row's
    per-conversation values and the pooled rows'; computing them once per analysis (each record's
    values once) rather than once per breakdown saves most of their time at thousands of conversations.
    """

    def __init__(self, report: ScoringReport, pool: Sequence[str], table: RecordTable | None = None) -> None:
        table = RecordTable.of(report, table)
        self.pool = list(pool)
        self.rows = {key: _per_conversation(table, range(*table.spans[key])) for key in table.keys}
        self.pooled = _per_conversation(table, [table.row_of[id(r)] for r in _pooled_records(report, pool)])


def _per_conversation(table: RecordTable, indices: Iterable[int]) -> dict[str, ConversationValues]:
    """:func:`per_conversation` of the table's records at ``indices``, averaged in arrays (the same means)."""
    chosen = np.fromiter(indices, dtype=np.int64)
    cids = [table.records[i].conversationId for i in chosen.tolist()]
    names = sorted(set(cids))
    slot = {cid: i for i, cid in enumerate(names)}
    groups = np.array([slot[cid] for cid in cids], dtype=np.int64)
    means = group_means(table.columns(BREAKDOWN_METRICS)[chosen], groups, len(names))[0].tolist()
    return {
        cid: {m: None if math.isnan(v := means[g][j]) else v for j, m in enumerate(BREAKDOWN_METRICS)}
        for g, cid in enumerate(names)
    }


def _summary(values: Sequence[ConversationValues]) -> dict[str, Any]:
    """The shared columns of breakdown rows: n conversations, mean composite with its interval, mean capabilities.

    The interval is mean ± 1.96·SE over the cell's conversations, left out below
    MIN_CONVERSATIONS_FOR_CI like every interval (a cell of 1 or 2 conversations is a
    reading, not an estimate).
    """
    composites = [v["composite_score"] for v in values if v["composite_score"] is not None]
    mean = mean_or_none(composites)
    se = standard_error(composites) if len(composites) >= MIN_CONVERSATIONS_FOR_CI else None
    return {
        "n_conversations": len(values),
        "composite_score": mean,
        **{name: mean_or_none(v[name] for v in values) for name in CAPABILITIES},
        "composite_ci_low": None if se is None or mean is None else mean - Z_95 * se,
        "composite_ci_high": None if se is None or mean is None else mean + Z_95 * se,
    }


def pooled_rows(report: ScoringReport, pool: Sequence[str] | None = None) -> tuple[list[str], str | None]:
    """The row labels the pooled breakdown lines average, and a note saying how they were chosen.

    ``pool`` names rows by label (``model [mode]``) or by model (every mode of it); unknown
    names raise ValueError. By default every model row is pooled and the offline baselines
    are left apart (they are reference points, not models under study); when only baselines
    were scored they are pooled, and the note says so.
    """
    labels = {row_label(*key): key for key in _rows(report)}
    if pool:
        chosen: list[str] = []
        unknown = []
        for name in pool:
            matches = [lab for lab, key in labels.items() if name in (lab, key[0])]
            if not matches:
                unknown.append(name)
            chosen.extend(m for m in matches if m not in chosen)
        if unknown:
            raise ValueError(
                f"cannot pool {', '.join(repr(u) for u in unknown)}: not a compared row; "
                f"rows are {', '.join(sorted(labels)) or 'none'}"
            )
        return sorted(chosen), "pooled rows chosen: " + ", ".join(sorted(chosen))
    models = [lab for lab, key in labels.items() if not is_mode_agnostic(key[0])]
    if models:
        left = sorted(set(labels) - set(models))
        return sorted(models), (f"baselines left out of the pooled lines: {', '.join(left)}" if left else None)
    return sorted(labels), "only baselines were scored, so the pooled lines pool the baselines" if labels else None


def _chosen_pool(report: ScoringReport, pool: Sequence[str] | None, prepared: RowValues | None) -> list[str]:
    """:func:`pooled_rows` of ``pool``; the prepared values' pool when they were made for it (already chosen)."""
    if prepared is not None and pool is not None and list(pool) == prepared.pool:
        return prepared.pool
    return pooled_rows(report, pool)[0]


def _pooled_records(report: ScoringReport, pool: Sequence[str]) -> list[ConversationRecord]:
    chosen = set(pool)
    return [r for r in report.conversations if row_label(r.em_model, r.mode) in chosen]


def _kruskal(groups: Mapping[str, Sequence[float]]) -> tuple[float | None, float | None, str | None]:
    from scipy import stats

    present = [list(g) for g in groups.values() if g]
    if len(present) < 2:
        return None, None, "needs at least 2 values with conversations"
    if len({v for g in present for v in g}) < 2:
        return None, None, "every score is identical: no ranking to compare"
    result = stats.kruskal(*present)
    p = _num(result.pvalue)
    return _num(result.statistic), p, None if p is not None else "test undefined for these values"


def _spread_tests(buckets: Mapping[str, Sequence[ConversationValues]]) -> list[SpreadTest]:
    """Kruskal–Wallis across the breakdown's values, per metric, one value per conversation."""
    tests = []
    for metric in BREAKDOWN_METRICS:
        groups = {key: [v for c in values if (v := c[metric]) is not None] for key, values in buckets.items()}
        statistic, p, note = _kruskal(groups)
        tests.append(
            SpreadTest(
                metric=metric,
                n_conversations=sum(len(g) for g in groups.values()),
                n_groups=sum(1 for g in groups.values() if g),
                statistic=statistic,
                p=p,
                note=note,
            )
        )
    return tests


Summaries = list[tuple[str, dict[str, Any]]]  # (value of the field, _summary of its conversations)


def _breakdown(
    report: ScoringReport,
    info: Mapping[str, Mapping[str, Any]],
    field: str,
    pool: Sequence[str],
    prepared: RowValues | None = None,
) -> tuple[list[tuple[str, str, Summaries]], Summaries, list[SpreadTest], str | None]:
    """Per row, and over the pooled rows, the summary of each value of ``field``; the tests; a note on unknowns."""

    def buckets_of(values: Mapping[str, ConversationValues]) -> tuple[dict[str, list[ConversationValues]], int]:
        buckets: dict[str, list[ConversationValues]] = {}
        missing = 0
        for cid, v in values.items():
            value = info.get(cid, {}).get(field)
            if value is None:
                missing += 1
                continue
            buckets.setdefault(value, []).append(v)
        return buckets, missing

    values = prepared if prepared is not None and prepared.pool == list(pool) else RowValues(report, pool)
    per_row = []
    for (em_model, mode), row_values in values.rows.items():
        buckets, _ = buckets_of(row_values)
        per_row.append((em_model, mode, [(value, _summary(members)) for value, members in sorted(buckets.items())]))
    overall, missing = buckets_of(values.pooled)
    summaries = [(value, _summary(members)) for value, members in overall.items()]
    # hardest first: the lowest mean composite
    summaries.sort(key=lambda vs: (math.inf if vs[1]["composite_score"] is None else vs[1]["composite_score"], vs[0]))
    note = f"{missing} scored conversations had no known {field} and are left out" if missing else None
    return per_row, summaries, _spread_tests(overall), note


@overload
def breakdown_by(
    report: ScoringReport,
    info: Mapping[str, Mapping[str, Any]],
    field: Literal["category"],
    pool: Sequence[str] | None = None,
    prepared: RowValues | None = None,
) -> CategoryBreakdown: ...
@overload
def breakdown_by(
    report: ScoringReport,
    info: Mapping[str, Mapping[str, Any]],
    field: Literal["original_model"],
    pool: Sequence[str] | None = None,
    prepared: RowValues | None = None,
) -> OriginalModelBreakdown: ...
def breakdown_by(
    report: ScoringReport,
    info: Mapping[str, Mapping[str, Any]],
    field: Literal["category", "original_model"],
    pool: Sequence[str] | None = None,
    prepared: RowValues | None = None,
) -> CategoryBreakdown | OriginalModelBreakdown:
    """Per row and per value of ``field`` (category or original model), plus the pooled rows (:func:`pooled_rows`).

    ``prepared`` is the report's :class:`RowValues` when the caller computed them already.
    """
    chosen = _chosen_pool(report, pool, prepared)
    per_row, overall, tests, note = _breakdown(report, info, field, chosen, prepared)
    if field == "category":
        return CategoryBreakdown(
            rows=[CategoryRow(em_model=e, mode=m, category=v, **s) for e, m, values in per_row for v, s in values],
            overall=[CategoryOverall(category=v, **s) for v, s in overall],
            note=note,
            tests=tests,
        )
    if field == "original_model":
        return OriginalModelBreakdown(
            rows=[
                OriginalModelRow(em_model=e, mode=m, original_model=v, **s)
                for e, m, values in per_row
                for v, s in values
            ],
            overall=[OriginalModelOverall(original_model=v, **s) for v, s in overall],
            note=note,
            tests=tests,
        )
    raise ValueError(f"cannot break down by {field!r}; expected 'category' or 'original_model'")


def _mann_whitney(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None, str | None]:
    from scipy import stats

    if not x or not y:
        return None, None, "a group has no conversations"
    if len(set(x) | set(y)) < 2:
        return None, None, "every score is identical: no ranking to compare"
    result = stats.mannwhitneyu(x, y, alternative="two-sided")
    p = _num(result.pvalue)
    return _num(result.statistic), p, None if p is not None else "test undefined for these values"


def compare_groups(values: Mapping[str, ConversationValues], info: Mapping[str, Mapping[str, Any]]) -> GroupComparison:
    """Diagnosed anxiety/depression vs none over one value per conversation: Mann–Whitney U per metric.

    A conversation counts only when its participant group is known, which
    needs recorded consent (SPEC 2.5): without it the group is unknown.
    """
    by_group: dict[str, list[ConversationValues]] = {g: [] for g in GROUPS}
    for cid, v in values.items():
        group = info.get(cid, {}).get("participant_group")
        if group in by_group:
            by_group[group].append(v)
    metrics = []
    for metric in BREAKDOWN_METRICS:
        diagnosed = [x for v in by_group[GROUPS[0]] if (x := v[metric]) is not None]
        undiagnosed = [x for v in by_group[GROUPS[1]] if (x := v[metric]) is not None]
        u, p, note = _mann_whitney(diagnosed, undiagnosed)
        metrics.append(
            GroupMetric(
                metric=metric,
                anxiety_depression=mean_or_none(diagnosed),
                none=mean_or_none(undiagnosed),
                mann_whitney_u=u,
                p=p,
                note=note,
            )
        )
    composite = metrics[0]
    return GroupComparison(
        n_anxiety_depression=len(by_group[GROUPS[0]]),
        n_none=len(by_group[GROUPS[1]]),
        composite_anxiety_depression=composite.anxiety_depression,
        composite_none=composite.none,
        mann_whitney_u=composite.mann_whitney_u,
        p=composite.p,
        note=composite.note,
        metrics=metrics,
    )


def participant_groups(
    report: ScoringReport,
    info: Mapping[str, Mapping[str, Any]],
    pool: Sequence[str] | None = None,
    prepared: RowValues | None = None,
) -> ParticipantGroups:
    """Diagnosed anxiety/depression vs none, per row and over the pooled rows, on the composite and each capability.

    The pooled test uses one value per conversation (its mean over the pooled
    rows) so that a conversation replayed by many models is not counted many times.
    """
    chosen = _chosen_pool(report, pool, prepared)
    values = prepared if prepared is not None and prepared.pool == list(chosen) else RowValues(report, chosen)
    per_row = [
        GroupRow(em_model=em_model, mode=mode, **compare_groups(row_values, info).model_dump())
        for (em_model, mode), row_values in values.rows.items()
    ]
    return ParticipantGroups(
        groups=list(GROUPS),
        test="mann-whitney U (two-sided), on the composite and each capability",
        rows=per_row,
        pooled=compare_groups(values.pooled, info),
    )


def _turn_field(turns: Sequence[TurnScores], path: tuple[str, ...]) -> np.ndarray:
    """One score of every turn (``path``: its key, or a key and the key inside it) as an array; None reads as NaN."""
    if len(path) == 1:
        (key,) = path
        return np.array([t[key] for t in turns], dtype=float)  # type: ignore[literal-required]
    outer, inner = path
    return np.array([t[outer][inner] for t in turns], dtype=float)  # type: ignore[literal-required]


def turn_position(
    report: ScoringReport, info: Mapping[str, Mapping[str, Any]], table: RecordTable | None = None
) -> TurnPosition:
    """Early vs late half of each conversation, and a per-turn-index curve, per row.

    A turn at 0-based position i of n GT turns is early if (i + 0.5)/n < 0.5 and
    late if > 0.5; the middle turn of an odd-length conversation is in neither.
    The late − early difference is tested with a paired Wilcoxon test over
    conversations that have both halves scored.

    Every record's turns are read once into arrays (one value per scored turn and
    metric) and grouped there: walking them in Python per row was most of the
    analyses' time at thousands of conversations. Each mean is still
    ``math.fsum(values) / len(values)`` (:func:`attunebench.metrics.columns.group_means`). ``table`` is the
    report's :class:`RecordTable` when the caller built it already (for its grouping of the records by row).
    """
    table = RecordTable.of(report, table)
    keys = table.keys
    records = table.records
    lengths: list[int] = []
    n_turns: list[int] = []
    turns: list[TurnScores] = []
    approximated = 0
    for r in records:
        n = info.get(r.conversationId, {}).get("n_gt_turns")
        if not n:
            approximated += 1
            n = max((t["turn_index"] for t in r.turns), default=-1) + 1
        n_turns.append(n)
        lengths.append(len(r.turns))
        turns.extend(r.turns)
    n_records = len(records)
    record_of = np.repeat(np.arange(n_records), lengths)
    row_sizes = [table.spans[key][1] - table.spans[key][0] for key in keys]
    row_of_record = np.repeat(np.arange(len(keys)), row_sizes)
    row_of = row_of_record[record_of]
    index = np.array([t["turn_index"] for t in turns], dtype=np.int64)
    relative = (index + 0.5) / np.array(n_turns, dtype=float)[record_of]
    half = np.where(relative < 0.5, 0, np.where(relative > 0.5, 1, -1))  # 0 early, 1 late, -1 neither
    in_half = half >= 0
    fields = {name: _turn_field(turns, path) for name, path in TURN_FIELDS.items()}
    # one column per metric; a missing score reads as NaN and is left out
    values = np.column_stack([rule(fields) for rule in TURN_POSITION_METRICS.values()]) if turns else np.empty((0, 6))

    # the curve: one point per (row, turn index) that has a scored turn, in turn order
    low = int(index.min()) if index.size else 0
    width = int(index.max()) - low + 1 if index.size else 1
    points, point_of = np.unique(row_of * width + (index - low), return_inverse=True)
    curve_means, curve_counts = group_means(values, point_of, points.size)
    # each row's halves, and each record's (for the paired test)
    halves = group_means(values[in_half], row_of[in_half] * 2 + half[in_half], 2 * len(keys))[0]
    record_means, record_counts = group_means(values[in_half], record_of[in_half] * 2 + half[in_half], 2 * n_records)
    column = {m: j for j, m in enumerate(TURN_POSITION_METRICS)}

    pairs: list[tuple[list[float], list[float]]] = []
    n_paired: list[int] = []
    spans = np.concatenate(([0], np.cumsum(row_sizes)))
    for r_i in range(len(keys)):
        for m in TURN_POSITION_METRICS:
            means, counts = record_means[:, column[m]], record_counts[:, column[m]]
            start, stop = 2 * spans[r_i], 2 * spans[r_i + 1]
            early_means, late_means = means[start:stop:2], means[start + 1 : stop : 2]
            both = (counts[start:stop:2] > 0) & (counts[start + 1 : stop : 2] > 0)
            pairs.append((late_means[both].tolist(), early_means[both].tolist()))
            n_paired.append(int(both.sum()))
    tested = iter(paired_tests(pairs))
    paired_n = iter(n_paired)

    def number(value: float) -> float | None:
        return None if math.isnan(value) else float(value)

    point_row, point_index = points // width, points % width + low + 1
    rows_out = []
    for r_i, (em_model, mode) in enumerate(keys):
        metrics_out = {}
        for m in TURN_POSITION_METRICS:
            early, late = number(halves[2 * r_i, column[m]]), number(halves[2 * r_i + 1, column[m]])
            _, p, note = next(tested)
            metrics_out[m] = HalfComparison(
                early=early,
                late=late,
                late_minus_early=None if early is None or late is None else late - early,
                n_paired_conversations=next(paired_n),
                p=p,
                note=note,
            )
        rows_out.append(
            TurnPositionRow(
                em_model=em_model,
                mode=mode,
                halves=TurnHalves(**metrics_out),
                curve=[
                    CurvePoint(
                        turn=int(point_index[k]),
                        n=int(curve_counts[k, column["pairwise_accuracy"]]),
                        **{m: number(curve_means[k, j]) for m, j in column.items()},
                    )
                    for k in np.flatnonzero(point_row == r_i).tolist()
                ],
            )
        )
    note = (
        f"{approximated} conversations had no known GT turn count; their length was taken from the scored turns"
        if approximated
        else None
    )
    return TurnPosition(metrics=list(TURN_POSITION_METRICS), rows=rows_out, note=note)


def _human_rows(split: ComparableSplit) -> dict[tuple[str, str], list[ConversationRecord]]:
    return {key: records for key, records in _rows(split.apart).items() if is_human(key[0])}


def pooled_human(split: ComparableSplit) -> PooledHuman | None:
    """Every human rater as one baseline: per conversation the mean over its raters, then over conversations."""
    humans = _human_rows(split)
    if not humans:
        return None
    values = per_conversation(r for records in humans.values() for r in records)
    summary = _summary(list(values.values()))
    return PooledHuman(label=POOLED_HUMAN_LABEL, n_raters=len(humans), **summary)


def _pairings(
    label: str, human: Mapping[str, float], compared: Mapping[tuple[str, str], list[ConversationRecord]]
) -> list[HumanPairing]:
    """One human (or the pooled raters) against each compared model row on shared conversations, Holm over them."""
    prior_rows = [records for (em_model, _), records in compared.items() if em_model == PRIOR_BASELINE]
    prior = {r.conversationId: r.composite_score for r in prior_rows[0]} if prior_rows else {}
    pending: list[HumanPairing] = []
    for (m_model, m_mode), m_records in compared.items():
        model = {r.conversationId: r.composite_score for r in m_records}
        shared = sorted(human.keys() & model.keys())
        x = [human[c] for c in shared]
        y = [model[c] for c in shared]
        statistic, p, note = paired_test(x, y)
        h_mean, m_mean = mean_or_none(x), mean_or_none(y)
        p_mean = mean_or_none(prior[c] for c in shared if c in prior) if prior else None
        pending.append(
            HumanPairing(
                human=label,
                model=row_label(m_model, m_mode),
                n_shared=len(shared),
                human_composite=h_mean,
                model_composite=m_mean,
                mean_difference=None if h_mean is None or m_mean is None else h_mean - m_mean,
                prior_composite=p_mean,
                human_skill=skill(h_mean, p_mean, 100.0),
                model_skill=skill(m_mean, p_mean, 100.0),
                statistic=statistic,
                p=p,
                p_holm=None,
                note=note,
            )
        )
    adjusted = iter(holm([pair.p for pair in pending if pair.p is not None]))
    return [pair.model_copy(update={"p_holm": next(adjusted)}) if pair.p is not None else pair for pair in pending]


def human_pairings(split: ComparableSplit) -> list[HumanPairing]:
    """Each human row against each compared model row on the conversations both have (Wilcoxon, Holm per human).

    The prior baseline's mean on the same conversations gives both sides'
    skill, so a human rated on the 4 shortest conversations is measured
    against the floor of those 4, not of the whole set. With two or more
    raters, the raters pooled (one value per conversation: the mean over the
    raters who rated it) are compared too, after the per-rater lines.
    """
    compared = _rows(split.compared)
    humans = _human_rows(split)
    out: list[HumanPairing] = []
    for (h_model, h_mode), h_records in humans.items():
        scores = {r.conversationId: r.composite_score for r in h_records}
        out.extend(_pairings(row_label(h_model, h_mode), scores, compared))
    if len(humans) >= 2:
        pooled = per_conversation(r for records in humans.values() for r in records)
        scores = {cid: v for cid, values in pooled.items() if (v := values["composite_score"]) is not None}
        out.extend(_pairings(POOLED_HUMAN_LABEL, scores, compared))
    return out


# ---------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------


def analyze(
    report: ScoringReport,
    conversations: Sequence[ConversationFile] | Mapping[str, ConversationFile] | None = None,
    *,
    seed: int = DEFAULT_SEED,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    alpha: float = ALPHA,
    reference: Sequence[str] | None = None,
    pool: Sequence[str] | None = None,
) -> Analysis:
    """All SPEC 6 analyses over the comparable rows of a scoring report.

    The report is first split (:func:`attunebench.metrics.comparison.split_comparable`):
    every analysis runs over the rows scored on one conversation set
    (``reference``, or the set most model rows share); rows on another set and
    human rows are listed in ``comparability`` with their n, and each human row
    is compared with each model row on the conversations it rated.

    ``conversations`` supplies topic category, original model, participant
    group and turn counts for the breakdowns; without it, a report made with
    ``include_details=True`` is used, and otherwise those breakdowns are empty
    with a note. ``pool`` chooses the rows the breakdowns' pooled lines
    average (:func:`pooled_rows`; by default the model rows, baselines apart);
    an unknown name raises ValueError. Deterministic for a given seed.
    """
    split = split_comparable(report, reference)
    full = report
    report = split.compared
    info = _conversation_info(full, conversations)
    pool_labels, pool_note = pooled_rows(report, pool)
    table = RecordTable(report)  # every record's values read once, for every analysis below
    prepared = RowValues(report, pool_labels, table)  # shared by the breakdowns
    profile = capability_profile(report, table)
    notes = []
    if len(profile) < 2:
        notes.append("fewer than 2 compared (model, mode) rows: comparisons between models are empty")
    if split.apart_rows:
        notes.append(
            f"{len(split.apart_rows)} row(s) scored on another conversation set are shown apart, not ranked: "
            + ", ".join(f"{row.label} (n = {row.n_conversations})" for row in split.apart_rows)
        )
    if not info and full.conversations:
        notes.append(
            "no conversation metadata given: category, participant-group and original-model breakdowns are empty"
        )
    humans = [row.label for row in split.apart_rows if row.human_baseline]
    return Analysis(
        rows=[row.label for row in profile],
        capability_profile=profile,
        independence=rank_independence(profile),
        discrimination=discrimination(report, alpha=alpha, table=table),
        bootstrap=bootstrap(report, n_resamples=n_bootstrap, seed=seed, table=table),
        breakdowns=Breakdowns(
            by_category=breakdown_by(report, info, "category", pool_labels, prepared),
            by_participant_group=participant_groups(report, info, pool_labels, prepared),
            by_turn_position=turn_position(report, info, table),
            by_original_model=breakdown_by(report, info, "original_model", pool_labels, prepared),
            pooled_rows=pool_labels,
            pool_note=pool_note,
        ),
        human_baseline=HumanBaseline(
            rows=humans,
            note="human rows (em_model 'human:...') are scored exactly like models and compared with each model "
            "on exactly the conversations they rated (comparability.human_pairings)"
            if humans
            else "no human baseline rows",
            pooled=pooled_human(split),
        ),
        notes=notes,
        comparability=Comparability(
            compared_set=split.fingerprint,
            n_compared_conversations=len(split.reference),
            min_conversations_for_ci=MIN_CONVERSATIONS_FOR_CI,
            collapsed=split.collapsed,
            apart=split.apart_rows,
            human_pairings=human_pairings(split),
            test="wilcoxon signed-rank (two-sided) on composite over shared conversations, Holm per human row",
        ),
    )
