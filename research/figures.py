"""The evaluation dashboard's figures: analysis results (SPEC 6) turned into named charts.

Each figure function takes the dashboard's EvaluationData and returns a
research.charts.Chart; the same function serves the page and its CSV download,
so the download is always exactly the data drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attunebench.metrics.composite import CAPABILITIES, CAPABILITY_TITLES
from attunebench.metrics.results import GroupComparison, GroupRow, Interval, row_label
from research.charts import Chart, bar_panels, heatmap, line_chart, table_chart
from research.evaluation import EvaluationData, leaderboard_rows

TURN_METRIC_TITLES = {
    "behaviour_accuracy": "Behaviour accuracy (mean of OM and participant)",
    "emotion_f1": "Emotion F1",
    "pairwise_accuracy": "Pairwise accuracy",
}


def leaderboard_chart(data: EvaluationData, weighting: str = "spec") -> Chart:
    rows = leaderboard_rows(data, weighting=weighting)
    title = "Composite (0–100) with 95% CI" if weighting == "spec" else "Equal-weight composite (0–100) with 95% CI"
    return bar_panels(
        "leaderboard",
        title,
        [r.label for r in rows],
        [("composite" if weighting == "spec" else "equal-weight composite", [r.composite for r in rows])],
        intervals=[[(r.ci_low, r.ci_high) for r in rows]],
        x_max=100.0,
        digits=1,
        columns=1,
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
    return bar_panels(
        "capability_profile", "Capability profile (0–1, 95% bootstrap CI)", labels, panels, intervals, columns=3
    )


def independence_chart(data: EvaluationData) -> Chart:
    ind = data.analysis.independence if data.analysis else None
    metrics = ind.metrics if ind else list(CAPABILITIES)
    rho = ind.spearman.rho if ind else {}
    values = [[rho.get(a, {}).get(b) for b in metrics] for a in metrics]
    titles = [CAPABILITY_TITLES.get(m, m) for m in metrics]
    return heatmap(
        "independence",
        "Rank independence: Spearman ρ between capability rankings of (model, mode) rows",
        titles,
        titles,
        values,
        diverging=True,
        note=ind.note if ind else None,
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
        ["metric", "pairs tested", "pairs different", "share different", "variance ratio F", "note"],
        rows,
    )


def by_topic_chart(data: EvaluationData) -> Chart:
    breakdown = data.analysis.breakdowns.by_category if data.analysis else None
    rows = breakdown.rows if breakdown else []
    categories = [r.category for r in breakdown.overall] if breakdown else []  # hardest first
    labels = sorted({row_label(r.em_model, r.mode) for r in rows})
    cell = {(row_label(r.em_model, r.mode), r.category): r.composite_score for r in rows}
    values = [[cell.get((lab, c)) for c in categories] for lab in labels]
    overall = {r.category: r.composite_score for r in breakdown.overall} if breakdown else {}
    values.append([overall.get(c) for c in categories])
    return heatmap(
        "by_topic",
        "Composite by topic category (columns hardest first)",
        [*labels, "all rows"],
        categories,
        values,
        diverging=False,
        digits=1,
        note=breakdown.note if breakdown else None,
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
    return line_chart(
        "turn_position",
        f"{TURN_METRIC_TITLES[metric]} by turn position",
        turns,
        series,
        y_label=TURN_METRIC_TITLES[metric].split(" (")[0],
    )


FIGURES: dict[str, Callable[..., Chart]] = {
    "leaderboard": leaderboard_chart,
    "capability_profile": capability_profile_chart,
    "independence": independence_chart,
    "discrimination": discrimination_chart,
    "by_topic": by_topic_chart,
    "by_group": by_group_chart,
    "turn_position": turn_position_chart,
}


def figure(name: str, data: EvaluationData, **options: Any) -> Chart:
    """A named figure; raises KeyError for unknown names (the view turns that into 404)."""
    builder = FIGURES[name]
    if name == "leaderboard":
        return builder(data, weighting=options.get("weighting", "spec"))
    if name == "turn_position":
        return builder(data, metric=options.get("metric", "behaviour_accuracy"))
    return builder(data)
