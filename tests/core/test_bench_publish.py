"""``bench/publish.py`` writes the benchmarks' figures into the docs page, and reads them back to keep them.

The benchmarks' full sizes are never run here: a real smoke run of one quick benchmark, into a copy of the page,
checks the whole path; the rest works on made-up results.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _publish():
    spec = importlib.util.spec_from_file_location("bench_publish", ROOT / "bench" / "publish.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_publish"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


publish = _publish()


def _result(entry: str, line: str, **changes: object):
    fields = {
        "entry": entry,
        "command": f"python bench/{entry}.py --repeat 3",
        "figures_line": line,
        "date": "2026-12-07 11:00 UTC",
        "machine": "2 cores, 23.4 GiB memory, Some CPU @ 2.20GHz",
        "load": "1.00 1.00 1.00",
        "commit": "abc1234",
    }
    return publish.Result(**{**fields, **changes})


def test_the_page_gets_each_entrys_figures_command_machine_and_date_and_how_to_regenerate_it():
    page = "# Benchmarks\n\nWhat each script measures.\n"
    fresh = {"score_speed": _result("score_speed", "score_speed: runs_per_s=1234.5 conversations=40")}
    written = publish.update_page(page, fresh)
    assert written.startswith(page)  # the hand-written part is kept as it is
    assert "Regenerate this section with `python bench/publish.py`" in written
    assert "### score_speed" in written
    assert "`python bench/score_speed.py --repeat 3` on 2026-12-07 11:00 UTC, commit `abc1234`" in written
    assert "2 cores, 23.4 GiB memory, Some CPU @ 2.20GHz; load average 1.00 1.00 1.00" in written
    assert "| `runs_per_s` | 1234.5 |" in written and "| `conversations` | 40 |" in written
    assert "--" not in written.split("<!-- bench-entry ", 1)[1].split(" -->", 1)[0]  # a valid HTML comment
    assert publish.read_results(written) == fresh  # the page holds what it needs to be rewritten


def test_rerunning_some_entries_keeps_the_others_and_replaces_only_the_generated_part():
    first = publish.update_page(
        "# Benchmarks\n",
        {
            "score_speed": _result("score_speed", "score_speed: runs_per_s=1000"),
            "risk_screen": _result("risk_screen", "risk_screen: recall=0.97"),
        },
    )
    page = first + "\n## Written by hand after it\n"
    second = publish.update_page(page, {"score_speed": _result("score_speed", "score_speed: runs_per_s=2000")})
    results = publish.read_results(second)
    assert results["score_speed"].figures_line == "score_speed: runs_per_s=2000"
    assert results["risk_screen"].figures_line == "risk_screen: recall=0.97"  # not run again: kept
    assert second.count(publish.START) == 1 and second.count(publish.END) == 1
    assert second.endswith("## Written by hand after it\n")


def test_every_benchmark_has_an_entry_and_the_docs_page_reads_back():
    entries = publish.entries()
    scripts = {script for script, _ in entries.values()}
    smoke = importlib.import_module("smoke")  # bench/ is on the path once publish is loaded
    assert scripts == set(smoke.benchmarks())
    assert "replay_throughput_500ms" in entries and "--latency-ms" in entries["replay_throughput_500ms"][1]
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "python bench/publish.py" in page
    for name, result in publish.read_results(page).items():
        assert name in entries, f"the docs show {name}, which bench/publish.py no longer runs"
        assert publish.parse_figures_line(result.figures_line)[0] == entries[name][0]


def test_a_smoke_run_through_the_command_writes_its_figures_and_never_to_the_docs(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n", encoding="utf-8")
    command = [sys.executable, str(ROOT / "bench" / "publish.py"), "--smoke", "--page", str(page)]
    done = subprocess.run([*command, "bench_paired_test"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    written = page.read_text(encoding="utf-8")
    assert "### bench_paired_test" in written and "Smoke sizes: not a measurement." in written
    assert publish.read_results(written)["bench_paired_test"].command == "python bench/bench_paired_test.py --smoke"
    refused = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "publish.py"), "--smoke", "bench_paired_test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "--smoke figures are no measurement" in refused.stderr
    unknown = subprocess.run([*command, "no_such_bench"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and "no such entry: no_such_bench" in unknown.stderr


@pytest.mark.parametrize(
    ("returncode", "stdout"),
    [(0, "some output\nnot a figures line\n"), (0, "other_bench: x=1\n"), (0, ""), (1, "fake: x=1\n")],
)
def test_a_benchmark_that_fails_or_ends_without_its_figures_line_is_reported_not_written(returncode, stdout):
    with pytest.raises((RuntimeError, ValueError)):
        publish.check_output("fake", returncode, stdout, "")
    assert publish.check_output("fake", 0, "progress\nfake: x=1 y=2.5\n", "") == "fake: x=1 y=2.5"
