"""The line every benchmark ends with: its name and its figures, for people and for the smoke runner.

``name: key=value key=value ...``, every value a finite number. ``bench/smoke.py`` reads it back and fails a
benchmark whose last line is not of this form, so a benchmark that stops producing a figure is noticed.
"""

from __future__ import annotations

import math
import re

LINE = re.compile(r"^(?P<name>[a-z_]+): (?P<figures>(?:[a-z0-9_]+=\S+)(?: [a-z0-9_]+=\S+)*)$")


def figures_line(name: str, **figures: float) -> str:
    """Format the line; a figure that is not a finite number is a bug in the benchmark, raised here."""
    for key, value in figures.items():
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{name}: figure {key} is {value!r}, not a finite number")
    return f"{name}: " + " ".join(f"{key}={_format(value)}" for key, value in figures.items())


def parse_figures_line(line: str) -> tuple[str, dict[str, float]]:
    """(name, figures) of a figures line; ValueError naming what is wrong otherwise."""
    match = LINE.match(line.strip())
    if match is None:
        raise ValueError(f"not a figures line (name: key=value ...): {line.strip()[:200]!r}")
    figures = {}
    for pair in match.group("figures").split():
        key, value = pair.split("=", 1)
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"figure {key}={value} is not a finite number")
        figures[key] = number
    return match.group("name"), figures


def _format(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"
