"""The evaluation dashboard's figures: analysis results (SPEC 6) turned into named charts.

Each figure function takes the dashboard's EvaluationData and returns a
research.charts.Chart; the same function serves the page and its CSV download,
so the download is always exactly the data drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attunebench.metrics.composite import CAPABILITIES, CAPABILITY_TITLES
from attunebench.metrics.results import (
    CategoryOverall,
    CategoryRow,
    GroupComparison,
    GroupRow,
    Interval,
    PairTest,
    row_label,
)
from research.results.charts import Chart, bar_panels, heatmap, line_chart, model_colours, table_chart
from research.results.evaluation import EvaluationData, apart_rows, leaderboard_rows

TURN_METRIC_TITLES = {
    "behaviour_accuracy": "Behaviour accuracy (mean of OM and participant)",
    "emotion_f1": "Emotion F1",
    "emotion_va_score": "Emotion VA (valence-arousal match)",
    "pairwise_accuracy": "Pairwise accuracy",
}
# What the topic breakdown can colour its cells by: the composite or one capability (SPEC 6).
BREAKDOWN_METRIC_TITLES = {
    "composite_score": "Composite (0–100)",
    **{c: f"{CAPABILITY_TITLES[c]} (0–1)" for c in CAPABILITIES},
}


def colours(data: EvaluationData) -> dict[str, str]:
    """The page's one palette: a colour per evaluated model, shared by every chart and table."""
    return model_colours(data.models)


def _n_label(label: str, n: int) -> str:
    return f"{label} (n={n})"


def leaderboard_chart(data: EvaluationData, weighting: str = "spec") -> Chart:
    rows = leaderboard_rows(data, weighting=weighting)
    name = "Composite" if weighting == "spec" else "Equal-weight composite"
    return bar_panels(
        "leaderboard",
        f"{name} (0–100) with 95% CI, rows compared on the same conversations",
        [_n_label(r.label, r.n_conversations) for r in rows],
        [(name.lower(), [r.composite for r in rows])],
        intervals=[[(r.ci_low, r.ci_high) for r in rows]],
        x_max=100.0,
        digits=1,
        columns=1,
        colours=colours(data),
        axis_label=f"{name.lower()}, 0–100",
        bar_area=520,
    )


def comparison_matrix_chart(data: EvaluationData) -> Chart:
    """P(row beats column) on the composite from the paired bootstrap, with the paired test's Holm p per cell."""
    analysis = data.analysis
    outrank = analysis.bootstrap.outrank_probability if analysis else {}
    profile = analysis.capability_profile if analysis else []
    order = [p.label for p in sorted(profile, key=lambda p: (-(p.composite_score or 0.0), p.label))]
    tests: dict[tuple[str, str], PairTest] = {}
    if analysis and "composite_score" in analysis.discrimination.metrics:
        for pair in analysis.discrimination.metrics["composite_score"].pairs:
            tests[(pair.a, pair.b)] = tests[(pair.b, pair.a)] = pair
    values = [[outrank.get(a, {}).get(b) for b in order] for a in order]
    annotations = []
    for a in order:
        line = []
        for b in order:
            found = tests.get((a, b))
            if a == b or found is None:
                line.append("")
            elif found.p_holm is None:
                line.append(f"n={found.n_shared}, untested")
            else:
                mark = "different" if found.different else "n.s."
                line.append(f"p={found.p_holm:.3f} {mark}")
        annotations.append(line)
    n = analysis.comparability.n_compared_conversations if analysis and analysis.comparability else 0
    return heatmap(
        "comparison_matrix",
        f"P(row beats column) on the composite (paired bootstrap over the same {n} conversations) "
        "and Holm-corrected paired Wilcoxon p",
        order,
        order,
        values,
        diverging=False,
        digits=2,
        annotations=annotations,
        scale=(0.0, 1.0),
        note="Each cell: share of bootstrap resamples where the row's composite beats the column's (ties half); "
        "below it the paired test over shared conversations.",
    )


def capability_profile_chart(data: EvaluationData) -> Chart:
    profile = data.analysis.capability_profile if data.analysis else []
    boot = {r.label: r for r in (data.analysis.bootstrap.rows if data.analysis else [])}
    labels = [p.label for p in profile]
    panels = [(CAPABILITY_TITLES[c], [p.capabilities.capability(c) for p in profile]) for c in CAPABILITIES]
    no_interval = Interval(estimate=None, low=None, high=None)
    intervals = [
        [(ci.low, ci.high) for ci in (boot[lab].capability(c) if lab in boot else no_interval for lab in labels)]
        for c in CAPABILITIES
    ]
    n = {p.label: p.n_conversations for p in profile}
    return bar_panels(
        "capability_profile",
        "Capability profile (0–1, 95% bootstrap CI)",
        [_n_label(lab, n[lab]) for lab in labels],
        panels,
        intervals,
        columns=3,
        colours=colours(data),
        axis_label="score, 0–1",
    )


def independence_chart(data: EvaluationData) -> Chart:
    ind = data.analysis.independence if data.analysis else None
    metrics = ind.metrics if ind else list(CAPABILITIES)
    rho = ind.spearman.rho if ind else {}
    p_values = ind.spearman.p if ind else {}
    values = [[rho.get(a, {}).get(b) for b in metrics] for a in metrics]
    titles = [CAPABILITY_TITLES.get(m, m) for m in metrics]

    def p_text(a: str, b: str) -> str:
        p = p_values.get(a, {}).get(b)
        return "" if a == b or p is None else ("p<0.001" if p < 0.001 else f"p={p:.3f}")

    return heatmap(
        "independence",
        "Rank independence: Spearman ρ (and its p) between capability rankings of (model, mode) rows",
        titles,
        titles,
        values,
        diverging=True,
        note=ind.note if ind else None,
        annotations=[[p_text(a, b) for b in metrics] for a in metrics],
    )


def discrimination_chart(data: EvaluationData) -> Chart:
    metrics = data.analysis.discrimination.metrics if data.analysis else {}
    rows = [
        [name, m.n_tested, m.n_different, m.share_different, m.variance_ratio, m.note or ""]
        for name, m in metrics.items()
    ]
    return table_chart(
        "discrimination",
        "Discrimination: share of (model, mode) pairs significantly different "
        "(paired Wilcoxon over shared conversations, Holm-corrected, α = 0.05)",
        ["metric", "pairs tested", "pairs different", "share different", "between/within F (ANOVA)", "note"],
        rows,
    )


def by_topic_chart(data: EvaluationData, metric: str = "composite_score") -> Chart:
    """Rows x topic categories (hardest first by composite), coloured by the composite or one capability.

    The last line pools the chosen rows (Breakdowns.pooled_rows), one value per conversation.
    """
    metric = metric if metric in BREAKDOWN_METRIC_TITLES else "composite_score"
    breakdown = data.analysis.breakdowns.by_category if data.analysis else None
    rows = breakdown.rows if breakdown else []
    categories = [r.category for r in breakdown.overall] if breakdown else []  # hardest first
    labels = sorted({row_label(r.em_model, r.mode) for r in rows})
    cell = {(row_label(r.em_model, r.mode), r.category): r for r in rows}
    overall = {r.category: r for r in breakdown.overall} if breakdown else {}

    def detail(summary: CategoryRow | CategoryOverall | None) -> str:
        if summary is None:
            return ""
        low, high = summary.composite_ci_low, summary.composite_ci_high
        if metric != "composite_score" or low is None or high is None:
            return f"n={summary.n_conversations}"
        return f"n={summary.n_conversations} [{low:.0f}, {high:.0f}]"

    def value(summary: CategoryRow | CategoryOverall | None) -> float | None:
        if summary is None:
            return None
        return summary.composite_score if metric == "composite_score" else summary.capability(metric)

    grid = [[cell.get((lab, c)) for c in categories] for lab in labels] + [[overall.get(c) for c in categories]]
    n_pooled = len(data.analysis.breakdowns.pooled_rows) if data.analysis else 0
    return heatmap(
        "by_topic",
        f"{BREAKDOWN_METRIC_TITLES[metric]} by topic category, columns hardest first (composite); n conversations"
        + (" and 95% CI" if metric == "composite_score" else "")
        + " in each cell",
        [*labels, f"pooled ({n_pooled} rows, per conversation)"],
        categories,
        [[value(s) for s in line] for line in grid],
        diverging=False,
        digits=1 if metric == "composite_score" else 2,
        note=breakdown.note if breakdown else None,
        annotations=[[detail(s) for s in line] for line in grid],
    )


def _title(metric: str) -> str:
    return BREAKDOWN_METRIC_TITLES.get(metric, metric).split(" (")[0]


def topic_tests_chart(data: EvaluationData) -> Chart:
    """Kruskal–Wallis across topic categories and across original models, per metric, over the pooled rows."""
    brk = data.analysis.breakdowns if data.analysis else None
    rows = []
    for across, tests in (
        ("topic category", brk.by_category.tests if brk else []),
        ("original model", brk.by_original_model.tests if brk else []),
    ):
        rows += [
            [_title(t.metric), across, t.n_groups, t.n_conversations, t.statistic, t.p, t.note or ""] for t in tests
        ]
    return table_chart(
        "topic_tests",
        "Do scores differ across topics and original models? Kruskal–Wallis H over the pooled rows, one value per "
        "conversation",
        ["metric", "across", "groups", "conversations", "H", "p", "note"],
        rows,
    )


def group_capabilities_chart(data: EvaluationData) -> Chart:
    """Anxiety/depression vs none on the composite and each capability: pooled rows first, then each row."""
    groups = data.analysis.breakdowns.by_participant_group if data.analysis else None
    lines: list[tuple[str, GroupRow | GroupComparison]] = []
    if groups:
        lines.append(("pooled (one value per conversation)", groups.pooled))
        lines += [(row_label(r.em_model, r.mode), r) for r in groups.rows]
    return table_chart(
        "group_capabilities",
        "Participant groups on every capability: diagnosed anxiety / depression vs none, Mann–Whitney U",
        [
            "rows",
            "metric",
            "n_anxiety_depression",
            "anxiety_depression",
            "n_none",
            "none",
            "mann_whitney_u",
            "p",
            "note",
        ],
        [
            [
                label,
                _title(m.metric),
                g.n_anxiety_depression,
                m.anxiety_depression,
                g.n_none,
                m.none,
                m.mann_whitney_u,
                m.p,
                m.note or "",
            ]
            for label, g in lines
            for m in g.metrics
        ],
    )


def turn_halves_chart(data: EvaluationData, metric: str = "behaviour_accuracy") -> Chart:
    """Early vs late half of the conversations per row for one per-turn metric, paired Wilcoxon (SPEC 6)."""
    rows = data.analysis.breakdowns.by_turn_position.rows if data.analysis else []
    metric = metric if metric in TURN_METRIC_TITLES else "behaviour_accuracy"
    body = []
    for r in rows:
        half = getattr(r.halves, metric)
        body.append(
            [
                row_label(r.em_model, r.mode),
                half.early,
                half.late,
                half.late_minus_early,
                half.n_paired_conversations,
                half.p,
                half.note or "",
            ]
        )
    return table_chart(
        "turn_halves",
        f"{TURN_METRIC_TITLES[metric]}: early vs late half of each conversation (paired Wilcoxon over conversations)",
        ["row", "early", "late", "late_minus_early", "n_paired_conversations", "p", "note"],
        body,
    )


def discrimination_pairs_chart(data: EvaluationData) -> Chart:
    """Every paired test behind the discrimination table: each metric, each pair of rows, p and Holm p."""
    metrics = data.analysis.discrimination.metrics if data.analysis else {}
    return table_chart(
        "discrimination_pairs",
        "Paired Wilcoxon test of every pair of rows on every metric, Holm-corrected per metric",
        ["metric", "a", "b", "n_shared", "mean_difference", "p", "p_holm", "different", "note"],
        [
            [
                name,
                pair.a,
                pair.b,
                pair.n_shared,
                pair.mean_difference,
                pair.p,
                pair.p_holm,
                pair.different,
                pair.note or "",
            ]
            for name, m in metrics.items()
            for pair in m.pairs
        ],
    )


def by_group_chart(data: EvaluationData) -> Chart:
    groups = data.analysis.breakdowns.by_participant_group if data.analysis else None
    rows = groups.rows if groups else []
    labels = [row_label(r.em_model, r.mode) for r in rows]
    chart = bar_panels(
        "by_group",
        "Composite by participant group (0–100)",
        labels,
        [
            ("diagnosed anxiety / depression", [r.composite_anxiety_depression for r in rows]),
            ("no diagnosis", [r.composite_none for r in rows]),
        ],
        x_max=100.0,
        digits=1,
        columns=2,
        colours=colours(data),
        axis_label="composite, 0–100",
    )
    chart.table = [
        [
            "row",
            "n_anxiety_depression",
            "composite_anxiety_depression",
            "n_none",
            "composite_none",
            "mann_whitney_u",
            "p",
            "note",
        ]
    ]
    compared: list[tuple[str, GroupRow | GroupComparison]] = list(zip(labels, rows, strict=True))
    if groups:
        compared.append(("pooled (one value per conversation)", groups.pooled))
    for label, r in compared:
        chart.table.append(
            [
                label,
                r.n_anxiety_depression,
                r.composite_anxiety_depression,
                r.n_none,
                r.composite_none,
                r.mann_whitney_u,
                r.p,
                r.note or "",
            ]
        )
    return chart


def turn_position_chart(data: EvaluationData, metric: str = "behaviour_accuracy") -> Chart:
    rows = data.analysis.breakdowns.by_turn_position.rows if data.analysis else []
    metric = metric if metric in TURN_METRIC_TITLES else "behaviour_accuracy"
    turns = sorted({p.turn for r in rows for p in r.curve})
    series = []
    for r in rows:
        points = {p.turn: p.metric(metric) for p in r.curve}
        series.append((row_label(r.em_model, r.mode), [points.get(t) for t in turns]))
    n_at = {t: max((p.n for r in rows for p in r.curve if p.turn == t), default=0) for t in turns}
    thin = [t for t in turns if n_at[t] < 3]
    return line_chart(
        "turn_position",
        f"{TURN_METRIC_TITLES[metric]} by turn position"
        + (f" (turns {', '.join(map(str, thin))} rest on fewer than 3 conversations)" if thin else ""),
        turns,
        series,
        y_label=TURN_METRIC_TITLES[metric].split(" (")[0],
        colours=colours(data),
    )


def leaderboard_table(data: EvaluationData, weighting: str = "spec") -> Chart:
    """Every leaderboard column as CSV: ranked rows, then the rows apart (rank empty), with set, skill and CIs."""
    capabilities = list(CAPABILITIES)
    header = [
        "rank",
        "em_model",
        "mode",
        "label",
        "human_baseline",
        "compared",
        "n_conversations",
        "weighting",
        "composite",
        "ci_low",
        "ci_high",
        "skill",
        "skill_ci_low",
        "skill_ci_high",
        *capabilities,
        *[f"{c}_skill" for c in capabilities],
        *[f"{c}_skill_ci_low" for c in capabilities],
        *[f"{c}_skill_ci_high" for c in capabilities],
        "se_composite",
        "coverage",
        "post_coverage",
        "holistic_imputed",
        "run",
        "run_choice",
        "cost_usd",
        "cost_paid_usd",
        "cost_reused_usd",
        "conversation_set",
        "compared_set",
        "n_compared_conversations",
        "min_conversations_for_ci",
        "n_bootstrap",
        "seed",
        "prior_baseline",
    ]
    comparability = data.analysis.comparability if data.analysis else None
    boot = data.analysis.bootstrap if data.analysis else None
    context = [
        data.current_set.key if data.current_set else None,
        comparability.compared_set if comparability else None,
        comparability.n_compared_conversations if comparability else 0,
        comparability.min_conversations_for_ci if comparability else None,
        boot.n_resamples if boot else None,
        boot.seed if boot else None,
        boot.prior_baseline if boot else None,
    ]
    body = []
    ranked = leaderboard_rows(data, weighting=weighting)
    for compared, rows in ((True, ranked), (False, apart_rows(data, weighting=weighting))):
        for r in rows:
            sk = r.skill
            body.append(
                [
                    r.rank if compared else None,
                    r.em_model,
                    r.mode,
                    r.label,
                    r.human_baseline,
                    compared,
                    r.n_conversations,
                    r.weighting,
                    r.composite,
                    r.ci_low,
                    r.ci_high,
                    sk.composite_score.estimate if sk else None,
                    sk.composite_score.low if sk else None,
                    sk.composite_score.high if sk else None,
                    *[r.capabilities.capability(c) for c in capabilities],
                    *[sk.capability(c).estimate if sk else None for c in capabilities],
                    *[sk.capability(c).low if sk else None for c in capabilities],
                    *[sk.capability(c).high if sk else None for c in capabilities],
                    r.se_composite,
                    r.coverage,
                    r.post_coverage,
                    r.holistic_imputed,
                    r.run,
                    r.run_choice,
                    r.cost,
                    r.cost_paid,
                    r.cost_reused,
                    *context,
                ]
            )
    return table_chart("leaderboard_table", "Leaderboard, every column", header, body)


FIGURES: dict[str, Callable[..., Chart]] = {
    "leaderboard": leaderboard_chart,
    "capability_profile": capability_profile_chart,
    "independence": independence_chart,
    "discrimination": discrimination_chart,
    "by_topic": by_topic_chart,
    "by_group": by_group_chart,
    "turn_position": turn_position_chart,
    "comparison_matrix": comparison_matrix_chart,
    "leaderboard_table": leaderboard_table,
    "topic_tests": topic_tests_chart,
    "group_capabilities": group_capabilities_chart,
    "turn_halves": turn_halves_chart,
    "discrimination_pairs": discrimination_pairs_chart,
}


def figure(name: str, data: EvaluationData, **options: Any) -> Chart:
    """A named figure; raises KeyError for unknown names (the view turns that into 404)."""
    builder = FIGURES[name]
    if name in ("leaderboard", "leaderboard_table"):
        return builder(data, weighting=options.get("weighting", "spec"))
    if name in ("turn_position", "turn_halves"):
        return builder(data, metric=options.get("metric", "behaviour_accuracy"))
    if name == "by_topic":
        return builder(data, metric=options.get("topic_metric", "composite_score"))
    return builder(data)
