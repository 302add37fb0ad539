"""CSV downloads are safe to open in a spreadsheet: formula-like text is escaped, numbers stay numbers."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from attunebench.metrics.report import aggregates_csv, load_inputs, score_inputs
from attunebench.spreadsheet import csv_row, text_cell
from attunebench.synth import synth_conversations, synth_runs, write_documents

HOSTILE = '=HYPERLINK("http://evil.example","click")'


@pytest.mark.parametrize(
    ("text", "written"),
    [
        (HOSTILE, "'" + HOSTILE),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("em/strong", "em/strong"),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_text_cells_that_look_like_formulas_get_an_apostrophe(text: str, written: str) -> None:
    assert text_cell(text) == written


def test_numbers_stay_numbers_and_none_is_empty() -> None:
    assert csv_row([-0.25, -3, True, None, "-x"]) == [-0.25, -3, True, "", "'-x"]
    # float_format applies to floats only: -0.1234567 with .6g is -0.123457, still unescaped.
    assert csv_row([-0.1234567, 7, "=1"], float_format=".6g") == ["-0.123457", 7, "'=1"]


def test_aggregates_csv_escapes_a_hostile_model_name(tmp_path: Path) -> None:
    conversations = synth_conversations(4, seed=3, min_turns=2, max_turns=3)
    write_documents(conversations, tmp_path / "conversations")
    write_documents(synth_runs(conversations, HOSTILE, "default", seed=3, skill=0.5), tmp_path / "runs")
    report = score_inputs(load_inputs([tmp_path / "conversations"], [tmp_path / "runs"])).report()
    [row] = list(csv.DictReader(io.StringIO(aggregates_csv(report))))
    assert row["em_model"] == "'" + HOSTILE
    # Every other cell is a number (or empty) a spreadsheet reads as such: no apostrophes there.
    numeric = {k: v for k, v in row.items() if k not in ("em_model", "mode") and v not in ("", "True", "False")}
    assert numeric and all(isinstance(float(v), float) for v in numeric.values())  # float("'-0.2") would raise
