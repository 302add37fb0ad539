"""CSV cells that a spreadsheet shows as text, never runs as a formula.

Every CSV Attune offers for download goes through :func:`csv_row`. A text cell a spreadsheet would
read as a formula (one starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, as
OWASP's CSV-injection guidance lists) gets a leading apostrophe, so an evaluated model named
``=HYPERLINK(...)`` is shown, not followed. Numbers are written as numbers: ``-0.25`` stays a
value a spreadsheet can sum.
"""

from __future__ import annotations

from collections.abc import Iterable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(text: str) -> str:
    """``text`` with an apostrophe in front when a spreadsheet would read it as a formula."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_row(values: Iterable[object], *, float_format: str | None = None) -> list[object]:
    """One CSV row: None as an empty cell, numbers as numbers (floats through ``float_format``
    when given), everything else as escaped text."""
    row: list[object] = []
    for value in values:
        if value is None:
            row.append("")
        elif isinstance(value, bool | int):
            row.append(value)
        elif isinstance(value, float):
            row.append(format(value, float_format) if float_format else value)
        else:
            row.append(text_cell(str(value)))
    return row
