"""`attune validate` and `attune synth`: output lines, summary and exit codes, no database."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command

from attunebench.canonical import dumps_canonical
from attunebench.synth import synth_conversations, synth_run

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DIR = ROOT / "sample_data"


def run_validate(*paths: Path | str) -> tuple[int, list[str]]:
    """(exit code, output lines) of `validate`, as a shell would see them."""
    from io import StringIO

    out = StringIO()
    try:
        call_command("validate", *[str(p) for p in paths], stdout=out)
        code = 0
    except SystemExit as exc:
        code = int(exc.code)
    return code, out.getvalue().splitlines()


def test_sample_data_is_valid() -> None:
    code, lines = run_validate(SAMPLE_DIR)
    n = len(list(SAMPLE_DIR.glob("*.json")))
    assert (code, lines) == (0, [f"{n} files checked, {n} valid, 0 problems"])


def test_every_problem_is_listed_with_file_and_path(tmp_path: Path) -> None:
    good = json.loads((SAMPLE_DIR / "conv-work-01.json").read_text())
    bad = json.loads(json.dumps(good))
    bad["conversationId"] = "other"
    bad["turns"][3]["annotations"]["binaryJudgements"][2]["observedBehavior"] = "maybe"
    bad["metadata"]["timestamp"] = "last week"
    (tmp_path / "a_good.json").write_text(json.dumps(good))
    (tmp_path / "b_bad.json").write_text(json.dumps(bad))
    (tmp_path / "c_broken.json").write_text('{"conversationId": ')
    (tmp_path / "d_list.json").write_text("[]")
    code, lines = run_validate(tmp_path)
    assert code == 1
    assert lines == [
        f"{tmp_path}/b_bad.json: metadata.timestamp: expected an ISO 8601 timestamp, got 'last week'",
        f"{tmp_path}/b_bad.json: turns[3].annotations.binaryJudgements[2].observedBehavior: expected yes/no/na, got 'maybe'",
        f"{tmp_path}/c_broken.json: not valid JSON: Expecting value at line 1 column 20",
        f"{tmp_path}/d_list.json: expected a JSON object at the top level, got list",
        "4 files checked, 1 valid, 4 problems",
    ]


def test_runs_and_conversations_are_told_apart_and_zips_are_opened(tmp_path: Path) -> None:
    conv = synth_conversations(1, seed=1)[0]
    run = json.loads(dumps_canonical(synth_run(conv, "em/a", "default", seed=1)))
    archive = tmp_path / "batch.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("conv.json", dumps_canonical(conv))
        zf.writestr("run.json", json.dumps(run))
        run["mode"] = "fast"
        zf.writestr("run_bad.json", json.dumps(run))
    code, lines = run_validate(archive)
    assert code == 1
    assert lines == [
        f"{archive}!run_bad.json: mode: expected one of default, verbose, omniscient, verbose_omniscient, got 'fast'",
        "3 files checked, 2 valid, 1 problem",
    ]


def test_duplicate_conversation_ids_across_files_are_a_problem(tmp_path: Path) -> None:
    text = (SAMPLE_DIR / "conv-grief-01.json").read_text()
    (tmp_path / "one.json").write_text(text)
    (tmp_path / "two.json").write_text(text)
    code, lines = run_validate(tmp_path)
    assert code == 1
    assert lines[0] == f"{tmp_path}/two.json: conversationId: 'conv-grief-01' is also used by {tmp_path}/one.json"


def test_missing_path_is_a_problem(tmp_path: Path) -> None:
    code, lines = run_validate(tmp_path / "nope.json")
    assert code == 1 and lines[0] == f"{tmp_path}/nope.json: no such file or folder"


def test_synth_command_writes_files_that_validate(tmp_path: Path) -> None:
    call_command(
        "synth",
        "--conversations",
        "12",
        "--seed",
        "4",
        "--min-turns",
        "2",
        "--max-turns",
        "4",
        "--out",
        str(tmp_path),
        "--runs-for",
        "em/low",
        "em/high",
        stdout=io.StringIO(),
    )
    assert len(list((tmp_path / "conversations").glob("*.json"))) == 12
    assert len(list((tmp_path / "runs" / "em_high").glob("*.json"))) == 12
    first = (tmp_path / "conversations" / "synth-4-0.json").read_text()
    assert first == dumps_canonical(synth_conversations(1, seed=4, min_turns=2, max_turns=4)[0])
    assert run_validate(tmp_path) == (0, ["36 files checked, 36 valid, 0 problems"])


def test_synth_command_refuses_bad_turn_range(tmp_path: Path) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command(
            "synth",
            "--conversations",
            "1",
            "--seed",
            "1",
            "--min-turns",
            "5",
            "--max-turns",
            "2",
            "--out",
            str(tmp_path),
        )


def test_the_real_command_line_exits_non_zero_on_problems(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{}")
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 1
    assert f"{tmp_path}/bad.json: conversationId: required field is missing" in result.stdout
    assert result.stdout.strip().endswith("1 files checked, 0 valid, 2 problems")


def test_a_jsonl_file_is_one_conversation_per_line_and_problems_name_the_line(tmp_path: Path) -> None:
    """The platform's own JSONL export (one compact conversation a line) validates, alone or in its bundle."""
    conversations = synth_conversations(3, seed=5)
    lines = [json.dumps(json.loads(dumps_canonical(c)), sort_keys=True, separators=(",", ":")) for c in conversations]
    good = tmp_path / "good" / "conversations.jsonl"
    good.parent.mkdir()
    good.write_text("\n".join(lines) + "\n\n", encoding="utf-8")  # a blank line is no document
    assert run_validate(good) == (0, ["3 files checked, 3 valid, 0 problems"])
    assert run_validate(good.parent) == (0, ["3 files checked, 3 valid, 0 problems"])  # found in a folder too
    bundle = tmp_path / "export.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.write(good, "conversations.jsonl")
    assert run_validate(bundle)[0] == 0

    wrong = json.loads(lines[1])
    wrong["metadata"]["timestamp"] = "last week"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(wrong), '{"conversationId": ', lines[0]]) + "\n", encoding="utf-8")
    code, output = run_validate(bad)
    assert code == 1
    assert output == [
        f"{bad} line 2: metadata.timestamp: expected an ISO 8601 timestamp, got 'last week'",
        f"{bad} line 3: not valid JSON: Expecting value at line 1 column 20",
        f"{bad} line 4: conversationId: {conversations[0].conversationId!r} is also used by {bad} line 1",
        "4 files checked, 1 valid, 3 problems",
    ]
