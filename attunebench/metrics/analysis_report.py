"""Plain-text rendering of :func:`attunebench.metrics.analysis.analyze` output."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from attunebench.metrics.composite import CAPABILITIES, CAPABILITY_LABELS
from attunebench.metrics.report import fmt, render_table
from attunebench.metrics.results import Analysis, Interval, SpreadTest

MAX_MATRIX_ROWS = 8  # beyond this the outrank matrix is too wide to read; adjacent pairs are shown


def _cap(value: float | None) -> str:
    """A capability score on its own 0–1 scale, as the dashboard and the API show it."""
    return fmt(value, 3)


def _interval(ci: Interval, digits: int) -> str:
    """estimate [low, high]; only the estimate when the row is below the minimum n for an interval."""
    if ci.low is None or ci.high is None:
        return fmt(ci.estimate, digits)
    return f"{fmt(ci.estimate, digits)} [{fmt(ci.low, digits)}, {fmt(ci.high, digits)}]"


def _section(title: str) -> str:
    return f"\n== {title} ==\n"


def _pooled_rows(analysis: Analysis) -> str:
    """Which rows the pooled lines average, and why."""
    brk = analysis.breakdowns
    text = "Pooled rows: " + (", ".join(brk.pooled_rows) or "none")
    return text + (f" ({brk.pool_note})" if brk.pool_note else "")


def _spread_tests(tests: Sequence[SpreadTest], across: str) -> str:
    """Kruskal-Wallis across the breakdown's values, one line per metric."""
    if not tests:
        return ""
    return f"Kruskal-Wallis across {across} (pooled rows):\n" + render_table(
        ["metric", "groups", "n", "H", "p", "note"],
        [
            [t.metric, str(t.n_groups), str(t.n_conversations), fmt(t.statistic, 2), fmt(t.p, 3), t.note or ""]
            for t in tests
        ],
    )


def format_analysis(analysis: Analysis) -> str:
    """Readable tables for every analysis, with the notes that explain missing values."""
    out: list[str] = []
    profile = analysis.capability_profile

    comp = analysis.comparability
    if comp is not None:
        out.append(_section("Compared rows"))
        out.append(
            f"Every table below compares rows scored on the same {comp.n_compared_conversations} conversations "
            f"(set {comp.compared_set}); rows on another set are listed here, not ranked. Rows with fewer than "
            f"{comp.min_conversations_for_ci} conversations get no confidence interval."
        )
        for note in comp.collapsed:
            out.append(f"note: {note}")
        if comp.apart:
            out.append("Shown apart (own conversation set; their means are not comparable to the rows below):")
            out.append(
                render_table(
                    ["model [mode]", "n", "in compared set", "set", "own composite", "why"],
                    [
                        [
                            a.label + (" *" if a.human_baseline else ""),
                            str(a.n_conversations),
                            str(a.n_in_compared_set),
                            a.conversation_set,
                            fmt(a.composite_score, 2),
                            a.reason,
                        ]
                        for a in comp.apart
                    ],
                )
            )

    out.append(_section("Capability profile (composite 0-100, capabilities 0-1; * = human baseline)"))
    if profile:
        headers = ["model [mode]", "n", "composite"] + [CAPABILITY_LABELS[c] for c in CAPABILITIES] + ["HP gap"]
        rows = []
        for row in profile:
            gap = row.components.behaviour_judgement.hp_perspective_gap
            rows.append(
                [
                    row.label + (" *" if row.human_baseline else ""),
                    str(row.n_conversations),
                    fmt(row.composite_score, 2),
                ]
                + [_cap(row.capabilities.capability(c)) for c in CAPABILITIES]
                + [fmt(gap, 3)]
            )
        out.append(render_table(headers, rows))
    else:
        out.append("No scored runs.")

    ind = analysis.independence
    out.append(_section("Rank independence of capabilities (Spearman rho, p in brackets)"))
    short = [CAPABILITY_LABELS[m] for m in ind.metrics]
    matrix_rows = []
    for m in ind.metrics:
        cells = [CAPABILITY_LABELS[m]]
        for n in ind.metrics:
            rho, p = ind.spearman.rho[m][n], ind.spearman.p[m][n]
            cells.append("–" if rho is None else f"{rho:+.2f} ({fmt(p, 2)})")
        matrix_rows.append(cells)
    out.append(render_table(["", *short], matrix_rows))
    out.append("Kendall tau:")
    kendall_rows = [[CAPABILITY_LABELS[m]] + [fmt(ind.kendall.tau[m][n], 2) for n in ind.metrics] for m in ind.metrics]
    out.append(render_table(["", *short], kendall_rows))
    if ind.mean_abs_spearman is not None:
        out.append(f"Mean |rho| between different capabilities: {ind.mean_abs_spearman:.2f} over {ind.n_rows} rows")
    if ind.note:
        out.append(f"note: {ind.note}")

    disc = analysis.discrimination
    out.append(_section(f"Discrimination (paired Wilcoxon over shared conversations, Holm, alpha {disc.alpha})"))
    rows = []
    for metric, entry in disc.metrics.items():
        share = entry.share_different
        rows.append(
            [
                metric,
                f"{entry.n_different}/{entry.n_tested}",
                "–" if share is None else f"{100 * share:.0f}%",
                fmt(entry.variance_ratio, 2),
                entry.note or entry.variance_ratio_note or "",
            ]
        )
    out.append(render_table(["metric", "pairs differing", "share", "between/within F", "note"], rows))
    out.append(
        "between/within F = one-way ANOVA F over the rows' per-conversation values: how far the rows' means "
        "spread apart relative to conversation-to-conversation noise (larger separates better)."
    )

    boot = analysis.bootstrap
    out.append(
        _section(f"Bootstrap {int(100 * boot.confidence)}% intervals ({boot.n_resamples} resamples, seed {boot.seed})")
    )
    rows = []
    for boot_row in boot.rows:
        rows.append(
            [boot_row.label, _interval(boot_row.composite_score, 2)]
            + [_interval(boot_row.capability(c), 3) for c in CAPABILITIES]
        )
    if rows:
        out.append(
            render_table(["model [mode]", "composite [CI]"] + [CAPABILITY_LABELS[c] for c in CAPABILITIES], rows)
        )
    if boot.prior_baseline:
        out.append(
            f"Skill over the prior baseline {boot.prior_baseline}: (score - prior) / (scale - prior); "
            "0 = the prior, 1 = perfect, below 0 = worse than the prior. Read this first."
        )
        skill_rows = [
            [boot_row.label, _interval(boot_row.skill.composite_score, 3)]
            + [_interval(boot_row.skill.capability(c), 3) for c in CAPABILITIES]
            for boot_row in boot.rows
            if boot_row.skill is not None
        ]
        out.append(
            render_table(
                ["model [mode]", "composite skill [CI]"] + [CAPABILITY_LABELS[c] for c in CAPABILITIES], skill_rows
            )
        )
    else:
        out.append("Skill over the prior baseline: no baseline:prior row among the compared rows.")
    outrank = boot.outrank_probability
    order = [row.label for row in sorted(profile, key=lambda r: -(r.composite_score or 0))]
    if 1 < len(order) <= MAX_MATRIX_ROWS:
        out.append("P(row outranks column) on composite:")
        out.append(render_table(["", *order], [[a] + [fmt(outrank[a][b], 2) for b in order] for a in order]))
    elif len(order) > MAX_MATRIX_ROWS:
        out.append("P(each row outranks the next one down) on composite:")
        out.append(
            render_table(["row", "next", "P"], [[a, b, fmt(outrank[a][b], 2)] for a, b in itertools.pairwise(order)])
        )
    if boot.note:
        out.append(f"note: {boot.note}")

    brk = analysis.breakdowns
    cat_ = brk.by_category
    out.append(_section("By topic category (pooled rows, one value per conversation, hardest first)"))
    out.append(_pooled_rows(analysis))
    out.append(
        render_table(
            ["category", "n", "composite"] + [CAPABILITY_LABELS[c] for c in CAPABILITIES],
            [
                [c_row.category, str(c_row.n_conversations), fmt(c_row.composite_score, 2)]
                + [_cap(c_row.capability(c)) for c in CAPABILITIES]
                for c_row in cat_.overall
            ],
        )
    )
    out.append(_spread_tests(cat_.tests, "categories"))
    if cat_.note:
        out.append(f"note: {cat_.note}")

    grp = brk.by_participant_group
    pooled = grp.pooled
    out.append(_section("By participant group: anxiety/depression vs none (Mann-Whitney U)"))
    rows = [
        [
            "pooled rows (per conversation)",
            str(pooled.n_anxiety_depression),
            str(pooled.n_none),
            fmt(pooled.composite_anxiety_depression, 2),
            fmt(pooled.composite_none, 2),
            fmt(pooled.p, 3),
            pooled.note or "",
        ]
    ]
    for g_row in grp.rows:
        rows.append(
            [
                f"{g_row.em_model} [{g_row.mode}]",
                str(g_row.n_anxiety_depression),
                str(g_row.n_none),
                fmt(g_row.composite_anxiety_depression, 2),
                fmt(g_row.composite_none, 2),
                fmt(g_row.p, 3),
                g_row.note or "",
            ]
        )
    out.append(render_table(["rows", "n anx/dep", "n none", "composite anx/dep", "composite none", "p", "note"], rows))
    out.append("Each capability, pooled rows (per conversation):")
    out.append(
        render_table(
            ["metric", "anx/dep", "none", "U", "p", "note"],
            [
                [
                    m.metric,
                    fmt(m.anxiety_depression, 3),
                    fmt(m.none, 3),
                    fmt(m.mann_whitney_u, 1),
                    fmt(m.p, 3),
                    m.note or "",
                ]
                for m in pooled.metrics
            ],
        )
    )

    pos = brk.by_turn_position
    out.append(_section("By turn position: early vs late half (behaviour accuracy, emotion F1)"))
    rows = []
    for t_row in pos.rows:
        b, e = t_row.halves.behaviour_accuracy, t_row.halves.emotion_f1
        rows.append(
            [
                f"{t_row.em_model} [{t_row.mode}]",
                fmt(b.early),
                fmt(b.late),
                fmt(b.late_minus_early),
                fmt(b.p, 3),
                fmt(e.early),
                fmt(e.late),
                fmt(e.p, 3),
            ]
        )
    out.append(
        render_table(["model [mode]", "behav early", "behav late", "late-early", "p", "F1 early", "F1 late", "p"], rows)
    )
    if pos.rows:
        out.append("Behaviour accuracy by turn (all rows, mean of row means):")
        by_turn: dict[int, list[float]] = {}
        for t_row in pos.rows:
            for point in t_row.curve:
                if point.behaviour_accuracy is not None:
                    by_turn.setdefault(point.turn, []).append(point.behaviour_accuracy)
        out.append("  ".join(f"t{t}:{sum(v) / len(v):.3f}" for t, v in sorted(by_turn.items())))
    if pos.note:
        out.append(f"note: {pos.note}")

    om = brk.by_original_model
    out.append(_section("By original model (pooled rows, one value per conversation)"))
    out.append(
        render_table(
            ["original model", "n", "composite"] + [CAPABILITY_LABELS[c] for c in CAPABILITIES],
            [
                [o_row.original_model, str(o_row.n_conversations), fmt(o_row.composite_score, 2)]
                + [_cap(o_row.capability(c)) for c in CAPABILITIES]
                for o_row in om.overall
            ],
        )
    )
    out.append(_spread_tests(om.tests, "original models"))
    if om.note:
        out.append(f"note: {om.note}")

    out.append(_section("Human baseline"))
    humans = analysis.human_baseline.rows
    out.append(", ".join(humans) if humans else "none")
    out.append(analysis.human_baseline.note)
    together = analysis.human_baseline.pooled
    if together is not None:
        ci = Interval(estimate=together.composite_score, low=together.composite_ci_low, high=together.composite_ci_high)
        out.append(
            f"{together.label}: {together.n_raters} rater(s), {together.n_conversations} conversations, "
            f"composite {_interval(ci, 2)}; "
            + ", ".join(f"{CAPABILITY_LABELS[c]} {_cap(getattr(together, c))}" for c in CAPABILITIES)
        )
    if comp is not None and comp.human_pairings:
        out.append(f"Paired on the conversations each human rated ({comp.test}):")
        out.append(
            render_table(
                ["human", "model", "n", "human", "model", "human - model", "human skill", "model skill", "p", "p Holm"],
                [
                    [
                        h.human,
                        h.model,
                        str(h.n_shared),
                        fmt(h.human_composite, 2),
                        fmt(h.model_composite, 2),
                        fmt(h.mean_difference, 2),
                        fmt(h.human_skill, 3),
                        fmt(h.model_skill, 3),
                        fmt(h.p, 3),
                        fmt(h.p_holm, 3),
                    ]
                    for h in comp.human_pairings
                ],
            )
        )
    for note in analysis.notes:
        out.append(f"note: {note}")
    return "\n".join(out).lstrip("\n") + "\n"
