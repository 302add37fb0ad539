"""Server-side SVG charts drawn from analysis data, each with the CSV of exactly what it draws.

Charts are plain SVG strings so they render without JavaScript, print, and can
be saved from the browser. Every number a reader needs is written on the
chart (bar values, cell values, line end values) so nothing depends on hover.
Colours are the Okabe–Ito palette, distinguishable with common colour-vision
deficiencies; diverging heatmaps run blue (negative) – white – orange (positive).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from django.utils.safestring import SafeString, mark_safe

from attunebench.spreadsheet import csv_row

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
# Past eight models: Paul Tol's muted and dark qualitative colours, so colours repeat only after 20 models
# (line charts also vary the dash pattern, so even then two lines stay apart).
EXTENDED_PALETTE = (
    *PALETTE,
    "#332288",
    "#88CCEE",
    "#44AA99",
    "#117733",
    "#999933",
    "#DDCC77",
    "#CC6677",
    "#882255",
    "#AA4499",
    "#6E6E6E",
    "#A6761D",
    "#1B9E77",
)


def model_colours(names: Iterable[str]) -> dict[str, str]:
    """One colour per evaluated model, the same in every chart and table of a page (sorted names, in order)."""
    return {name: EXTENDED_PALETTE[i % len(EXTENDED_PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _colour(colours: Mapping[str, str] | None, label: str, index: int) -> str:
    """The colour of a row label "model [mode]" from the model's colour; by position when no map is given."""
    if colours:
        model = label.rsplit(" [", 1)[0]
        if model in colours:
            return colours[model]
    return EXTENDED_PALETTE[index % len(EXTENDED_PALETTE)]


# Lines also differ in dash pattern, so series with identical values (a baseline in two modes)
# stay visible where they overlap instead of the last one hiding the others.
DASHES = ("", "7 5", "2 4", "10 4 2 4", "4 2", "1 3")
FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif"
MUTED = "#5b6170"
GRID = "#e3e6ec"


@dataclass
class Chart:
    """An SVG and the table it was drawn from (header row first).

    ``show_table`` asks the page to print the table under the figure, for
    charts whose exact values cannot all be written on the drawing.
    """

    name: str
    title: str
    svg: SafeString
    table: list[list[Any]]
    show_table: bool = False

    @property
    def header(self) -> list[Any]:
        return self.table[0] if self.table else []

    @property
    def body(self) -> list[list[Any]]:
        return self.table[1:]

    def csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        for row in self.table:
            writer.writerow(csv_row(row, float_format=".6g"))
        return buffer.getvalue()


def _text(
    x: float,
    y: float,
    content: Any,
    size: int = 12,
    anchor: str = "start",
    fill: str = "#1d2230",
    weight: str = "normal",
    extra: str = "",
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
        f'font-weight="{weight}" {extra}>{escape(str(content))}</text>'
    )


def _svg(width: float, height: float, body: list[str], title: str) -> SafeString:
    # Only numbers and escaped text are interpolated above, so marking the result safe is sound.
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" width="100%" '
        f'style="max-width:{width:.0f}px;{FONT}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _truncate(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


# ---------------------------------------------------------------------------
# Horizontal bars (optionally with intervals), one panel or small multiples
# ---------------------------------------------------------------------------


def bar_panels(
    name: str,
    title: str,
    labels: Sequence[str],
    panels: Sequence[tuple[str, Sequence[float | None]]],
    intervals: Sequence[Sequence[tuple[float | None, float | None]]] | None = None,
    x_max: float = 1.0,
    digits: int = 2,
    columns: int = 3,
    colours: Mapping[str, str] | None = None,
    axis_label: str | None = None,
    bar_area: int = 170,
) -> Chart:
    """Small multiples: one panel per series, one horizontal bar per label, value written at the bar end."""
    label_w = min(300, 12 + 6.6 * max((len(_truncate(lab, 44)) for lab in labels), default=4))
    panel_w = label_w + bar_area + 56
    bar_h, gap = 16, 6
    panel_h = 34 + len(labels) * (bar_h + gap) + 8
    axis_h = 26  # tick values and the axis title under each panel
    columns = max(1, min(columns, len(panels)))
    rows = (len(panels) + columns - 1) // columns
    width, height = columns * panel_w + 10, rows * (panel_h + axis_h) + 10
    body: list[str] = []
    for index, (panel_title, values) in enumerate(panels):
        ox = 5 + (index % columns) * panel_w
        oy = 5 + (index // columns) * (panel_h + axis_h)
        body.append(_text(ox + 4, oy + 16, panel_title, 13, weight="600"))
        for tick in (0.0, 0.5, 1.0):
            x = ox + label_w + bar_area * tick
            body.append(f'<line x1="{x:.1f}" y1="{oy + 24}" x2="{x:.1f}" y2="{oy + panel_h - 8}" stroke="{GRID}"/>')
            tick_text = fmt(tick * x_max, 0 if x_max >= 10 else 1)
            body.append(_text(x, oy + panel_h + 4, tick_text, 10, anchor="middle", fill=MUTED))
        if axis_label:
            body.append(_text(ox + label_w + bar_area / 2, oy + panel_h + 18, axis_label, 11, "middle", MUTED))
        for i, (label, value) in enumerate(zip(labels, values, strict=True)):
            y = oy + 28 + i * (bar_h + gap)
            body.append(_text(ox + label_w - 6, y + 12, _truncate(label, 44), 11, anchor="end", fill=MUTED))
            colour = _colour(colours, label, i)
            if value is not None:
                w = bar_area * max(0.0, min(value, x_max)) / x_max
                body.append(
                    f'<rect x="{ox + label_w:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}" rx="2"/>'
                )
                end = ox + label_w + w
                if intervals is not None:
                    low, high = intervals[index][i]
                    if low is not None and high is not None:
                        x1 = ox + label_w + bar_area * max(0.0, low) / x_max
                        x2 = ox + label_w + bar_area * min(high, x_max) / x_max
                        mid = y + bar_h / 2
                        body.append(
                            f'<path d="M{x1:.1f} {mid}H{x2:.1f}M{x1:.1f} {mid - 5}V{mid + 5}'
                            f'M{x2:.1f} {mid - 5}V{mid + 5}" stroke="#1d2230" stroke-width="1.4"/>'
                        )
                        end = max(end, x2)
                body.append(_text(end + 4, y + 12, fmt(value, digits), 11))
            else:
                body.append(_text(ox + label_w + 4, y + 12, "no data", 11, fill=MUTED))
    table: list[list[Any]] = [["label", *[p[0] for p in panels]]]
    for i, label in enumerate(labels):
        table.append([label, *[p[1][i] for p in panels]])
    if intervals is not None:
        table[0] += [f"{p[0]} ci_low" for p in panels] + [f"{p[0]} ci_high" for p in panels]
        for i in range(len(labels)):
            table[i + 1] += [intervals[k][i][0] for k in range(len(panels))] + [
                intervals[k][i][1] for k in range(len(panels))
            ]
    return Chart(name, title, _svg(width, height, body, title), table)


# ---------------------------------------------------------------------------
# Heatmaps
# ---------------------------------------------------------------------------


def _diverging(value: float | None) -> str:
    """-1 → blue, 0 → white, +1 → orange."""
    if value is None:
        return "#f1f2f5"
    v = max(-1.0, min(1.0, value))
    target = (0, 114, 178) if v < 0 else (230, 159, 0)
    t = abs(v)
    r, g, b = (round(255 + (c - 255) * t) for c in target)
    return f"rgb({r},{g},{b})"


def _sequential(value: float | None, low: float, high: float) -> str:
    """low → pale, high → deep blue."""
    if value is None:
        return "#f1f2f5"
    t = 0.0 if high <= low else max(0.0, min(1.0, (value - low) / (high - low)))
    r, g, b = (round(a + (c - a) * t) for a, c in zip((236, 243, 250), (8, 81, 156), strict=True))
    return f"rgb({r},{g},{b})"


def heatmap(
    name: str,
    title: str,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    values: Sequence[Sequence[float | None]],
    diverging: bool = True,
    digits: int = 2,
    note: str | None = None,
    annotations: Sequence[Sequence[str]] | None = None,
    scale: tuple[float, float] | None = None,
) -> Chart:
    """A grid with each cell's value written in it; diverging (−1…1) or sequential (min…max) colours.

    ``annotations`` adds a small second line per cell (n and interval, a test's p) and its own
    columns in the CSV; ``scale`` fixes the sequential colour range (e.g. 0–1 for probabilities).
    """
    cell_w, cell_h = (118, 46) if annotations else (92, 34)
    label_w = min(240, 14 + 6.8 * max((len(_truncate(r, 34)) for r in row_labels), default=4))
    head_h = 64
    width = label_w + cell_w * len(col_labels) + 16
    height = head_h + cell_h * len(row_labels) + (30 if note else 12)
    present = [v for row in values for v in row if v is not None]
    low, high = scale or ((min(present), max(present)) if present else (0.0, 1.0))
    body: list[str] = []
    for j, col in enumerate(col_labels):
        x = label_w + j * cell_w + cell_w / 2
        words = _truncate(col, 26).split(" ")
        lines = (
            [" ".join(words[: (len(words) + 1) // 2]), " ".join(words[(len(words) + 1) // 2 :])]
            if len(col) > 13
            else [col]
        )
        for k, line in enumerate(lines):
            body.append(_text(x, head_h - 10 - (len(lines) - 1 - k) * 14, line, 11, anchor="middle", weight="600"))
    for i, row in enumerate(row_labels):
        y = head_h + i * cell_h
        body.append(_text(label_w - 8, y + cell_h / 2 + 4, _truncate(row, 34), 11, anchor="end"))
        for j in range(len(col_labels)):
            value = values[i][j]
            colour = _diverging(value) if diverging else _sequential(value, low, high)
            x = label_w + j * cell_w
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{cell_w - 2}" height="{cell_h - 2}" fill="{colour}" rx="3"/>'
            )
            dark = value is not None and (
                abs(value) > 0.6 if diverging else (high > low and (value - low) / (high - low) > 0.55)
            )
            if annotations and annotations[i][j]:
                body.append(
                    _text(
                        x + cell_w / 2 - 1,
                        y + cell_h - 8,
                        annotations[i][j],
                        9,
                        anchor="middle",
                        fill="#ffffff" if dark else MUTED,
                    )
                )
            body.append(
                _text(
                    x + cell_w / 2 - 1,
                    y + (cell_h / 2 - 2 if annotations else cell_h / 2 + 4),
                    fmt(value, digits),
                    12,
                    anchor="middle",
                    fill="#ffffff" if dark else "#1d2230",
                    weight="600",
                )
            )
    if note:
        body.append(_text(8, height - 10, note, 11, fill=MUTED))
    table: list[list[Any]] = [["row", *col_labels]]
    table += [[r, *values[i]] for i, r in enumerate(row_labels)]
    if annotations:
        table[0] += [f"{c} (detail)" for c in col_labels]
        for i in range(len(row_labels)):
            table[i + 1] += list(annotations[i])
    return Chart(name, title, _svg(width, height, body, title), table)


# ---------------------------------------------------------------------------
# Line chart
# ---------------------------------------------------------------------------


def line_chart(
    name: str,
    title: str,
    x_values: Sequence[int],
    series: Sequence[tuple[str, Sequence[float | None]]],
    y_label: str,
    x_label: str = "turn",
    y_min: float = 0.0,
    y_max: float = 1.0,
    colours: Mapping[str, str] | None = None,
) -> Chart:
    """Lines over integer x; each point's value is written when there are few series, end values always."""
    width, height = 920, 330
    left, right, top, bottom = 52, 330, 20, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = list(x_values)
    span = max(1, (max(xs) - min(xs)) if xs else 1)

    def px(x: float) -> float:
        return left + plot_w * ((x - min(xs)) / span if xs else 0)

    def py(y: float) -> float:
        return top + plot_h * (1 - (y - y_min) / (y_max - y_min))

    body: list[str] = []
    for k in range(6):
        value = y_min + (y_max - y_min) * k / 5
        y = py(value)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="{GRID}"/>')
        body.append(_text(left - 6, y + 4, fmt(value, 1), 11, anchor="end", fill=MUTED))
    for x in xs:
        body.append(_text(px(x), top + plot_h + 16, x, 11, anchor="middle", fill=MUTED))
    body.append(_text(left + plot_w / 2, height - 6, x_label, 12, anchor="middle", fill=MUTED))
    body.append(
        _text(
            14,
            top + plot_h / 2,
            y_label,
            12,
            anchor="middle",
            fill=MUTED,
            extra=f'transform="rotate(-90 14 {top + plot_h / 2:.1f})"',
        )
    )
    # Point values are written only for a single line: with several, labels collide, and the
    # figure's value table (shown under every line chart) carries the exact numbers instead.
    label_points = len(series) == 1 and len(xs) <= 16
    legend_y = top + 6
    for index, (label, values) in enumerate(series):
        colour = _colour(colours, label, index)
        points = [(px(x), py(v), v) for x, v in zip(xs, values, strict=True) if v is not None]
        if points:
            path = "M" + "L".join(f"{x:.1f} {y:.1f}" for x, y, _ in points)
            dash = DASHES[index % len(DASHES)]
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            body.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2.2"{dash_attr}/>')
            for cx, cy, v in points:
                body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.2" fill="{colour}"/>')
                if label_points:
                    body.append(_text(cx, cy - 7, fmt(v), 10, anchor="middle", fill=colour, weight="600"))
        dash = DASHES[index % len(DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        body.append(
            f'<path d="M{left + plot_w + 10} {legend_y - 3}h24" stroke="{colour}" stroke-width="2.6"{dash_attr}/>'
        )
        last = points[-1][2] if points else None
        body.append(_text(left + plot_w + 40, legend_y + 1, f"{_truncate(label, 36)}  (last {fmt(last)})", 11))
        legend_y += 18
    table: list[list[Any]] = [[x_label, *[s[0] for s in series]]]
    for i, x in enumerate(xs):
        table.append([x, *[s[1][i] for s in series]])
    return Chart(name, title, _svg(width, height, body, title), table, show_table=not label_points)


def table_chart(name: str, title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Chart:
    """A table-only 'chart': no SVG, but the same CSV download as every figure."""
    return Chart(name, title, mark_safe(""), [list(header), *[list(r) for r in rows]])
