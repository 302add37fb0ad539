"""``attune score`` and ``attune analyze``: tables, JSON shape, exit codes; no database."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from attunebench.canonical import dumps_canonical, parse_conversation, parse_run
from attunebench.metrics import analyze, to_json
from attunebench.metrics.keys import AGGREGATE_KEYS, CONVERSATION_KEYS, TURN_KEYS
from attunebench.metrics.report import aggregates_csv, format_leaderboard, leaderboard_rows, load_inputs, score_inputs
from attunebench.metrics.results import (
    AggregateRow,
    Analysis,
    ConversationRecord,
    LeaderboardRow,
    ScoringReport,
    TurnScores,
)
from attunebench.synth import synth_conversations, synth_runs, write_documents
from tests.core.test_scoring_composite import hand_conversation, hand_run

ROOT = Path(__file__).resolve().parents[2]
ATTUNE = ROOT / ".venv" / "bin" / "attune"

# The scoring report's keys, spelled and ordered exactly (kept independent of attunebench.metrics.keys on purpose).
REPORT_CONVERSATION_KEYS = [
    "conversationId",
    "em_model",
    "mode",
    "coverage",
    "post_coverage",
    "holistic_imputed",
    "composite_score",
    "equal_weight_composite",
    "turn_level_average",
    "conversation_wide_average",
    "avg_emotion_hit_rate",
    "avg_emotion_intensity_mae",
    "avg_emotion_f1",
    "avg_emotion_f1_intensity",
    "avg_emotion_va_score",
    "avg_emotion_va_intensity_score",
    "avg_binary_om_accuracy",
    "avg_binary_human_accuracy",
    "avg_binary_om_accuracy_hp",
    "avg_binary_human_accuracy_hp",
    "avg_pairwise_accuracy",
    "avg_pairwise_kendall_tau",
    "avg_response_similarity",
    "avg_response_preference_alignment",
    "avg_draft_judge_score",
    "avg_draft_binary_alignment",
    "panas_mae",
    "panas_normalized",
    "panas_baseline_adjusted",
    "panas_item_mae",
    "q1_looking_for_score",
    "q2_emotion_clarity_match",
    "q3_model_fit_match",
    "q3_model_fit_ordinal_distance",
    "q3_follow_up_score",
    "four_branch_mae",
    "four_branch_normalized",
    "turns",
]
AVERAGED = [k for k in REPORT_CONVERSATION_KEYS[6:] if k != "turns"]
REPORT_AGGREGATE_KEYS = [
    "em_model",
    "mode",
    "n_conversations",
    "coverage",
    "post_coverage",
    *AVERAGED,
    "se_composite",
    "z_score",
    "pooled_binary_om_metrics",
    "pooled_binary_human_metrics",
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("scoring-cli")
    conversations = synth_conversations(8, seed=21, min_turns=2, max_turns=4)
    write_documents(conversations, root / "conversations" / "nested" / "deeper")
    write_documents(synth_runs(conversations, "em/strong", "default", seed=21, skill=0.9), root / "runs" / "a")
    write_documents(synth_runs(conversations, "em/weak", "verbose", seed=21, skill=0.1), root / "runs" / "b")
    write_documents(synth_runs(conversations[:4], "human:rater1", "default", seed=21, skill=0.7), root / "runs" / "c")
    return root / "conversations", root / "runs"


def run_command(name: str, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_score_prints_a_leaderboard_and_writes_json_and_csv(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    conversations, runs = dataset
    out, err = run_command(
        "score",
        "--conversations",
        str(conversations),
        "--runs",
        str(runs),
        "--json",
        str(tmp_path / "r.json"),
        "--csv",
        str(tmp_path / "r.csv"),
    )
    assert err == ""
    lines = out.splitlines()
    assert lines[0].split() == [
        "model",
        "mode",
        "n",
        "composite",
        "±",
        "SE",
        "emotion",
        "behaviour",
        "preference",
        "response",
        "holistic",
        "turn",
        "cov.",
        "post",
        "cov.",
    ]
    # strongest first among the rows on the full set; the human baseline, rated on 4 of the 8
    # conversations, comes after them, starred and marked as on another set (†), with no SE below the minimum n
    body = [line.split() for line in lines[2:5]]
    assert [row[0] for row in body] == ["em/strong", "em/weak", "human:rater1"]  # skills 0.9, 0.1; human apart
    assert body[2][1:3] == ["*", "†"] and body[2][4] == "4" and body[2][5:8] == [body[2][5], "±", "–"]
    assert "† scored on another conversation set" in out
    assert body[0][:3] == ["em/strong", "default", "8"] and body[0][-2:] == ["100%", "100%"]
    assert "Scored 20 runs against 8 conversations; 0 input(s) skipped." in out

    report = json.loads((tmp_path / "r.json").read_text())
    assert list(report) == ["conversations", "aggregates"]
    assert len(report["conversations"]) == 20
    for record in report["conversations"]:
        assert list(record) == REPORT_CONVERSATION_KEYS
        assert record["turns"] and "emotion_f1" in record["turns"][0]
    for row in report["aggregates"]:
        assert list(row) == REPORT_AGGREGATE_KEYS
        assert set(row["pooled_binary_om_metrics"]) == {
            "tp",
            "fp",
            "tn",
            "fn",
            "accuracy",
            "precision",
            "recall",
            "f1",
            "mcc",
        }
    assert [r["em_model"] for r in report["aggregates"]] == ["em/strong", "human:rater1", "em/weak"]

    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert [r["em_model"] for r in rows] == ["em/strong", "human:rater1", "em/weak"]
    assert rows[1]["human_baseline"] == "True"
    assert float(rows[1]["composite_score"]) == pytest.approx(report["aggregates"][1]["composite_score"])


@pytest.mark.parametrize("details", [False, True])
def test_score_json_reads_back_into_the_report_model(dataset: tuple[Path, Path], tmp_path: Path, details: bool) -> None:
    conversations, runs = dataset
    run_command(
        "score",
        "--conversations",
        str(conversations),
        "--runs",
        str(runs),
        "--json",
        str(tmp_path / "r.json"),
        *(["--details"] if details else []),
    )
    text = (tmp_path / "r.json").read_text()
    written = ScoringReport.model_validate_json(text)
    in_memory = score_inputs(load_inputs([conversations], [runs])).report(include_details=details)
    assert written == in_memory
    # the file is exactly the one serialiser's output: no key added, dropped or renamed on the way
    assert text == json.dumps(to_json(in_memory), ensure_ascii=False, indent=2) + "\n"
    # details appear only when asked for, as the last key of each record
    assert all(("details" in record) == details for record in json.loads(text)["conversations"])
    if details:
        assert list(json.loads(text)["conversations"][0])[-1] == "details"


def test_the_report_models_spell_the_keys_as_the_score_report_writes_them() -> None:
    assert list(ConversationRecord.model_fields) == [*REPORT_CONVERSATION_KEYS, "details"]
    assert list(AggregateRow.model_fields) == REPORT_AGGREGATE_KEYS
    assert list(ConversationRecord.model_fields)[:-1] == list(CONVERSATION_KEYS)
    assert tuple(AggregateRow.model_fields) == AGGREGATE_KEYS
    assert tuple(TurnScores.__annotations__) == TURN_KEYS


def test_cli_table_and_csv_read_the_leaderboard_row_model(dataset: tuple[Path, Path]) -> None:
    conversations, runs = dataset
    report = score_inputs(load_inputs([conversations], [runs])).report()
    rows = leaderboard_rows(report)
    assert all(type(row) is LeaderboardRow for row in rows)
    strong = rows[0]
    assert (strong.label, strong.human_baseline, strong.n_conversations) == ("em/strong [default]", False, 8)
    assert rows[1].human_baseline and rows[1].n_conversations == 4
    # the table, the CSV and the model all show capabilities 0–1 (one scale everywhere, as on the dashboard)
    table_row = format_leaderboard(report).splitlines()[2].split()
    assert table_row[6] == f"{strong.capabilities.emotion_tracking:.3f}"
    [csv_row] = [r for r in csv.DictReader(io.StringIO(aggregates_csv(report))) if r["em_model"] == "em/strong"]
    assert float(csv_row["capability_emotion_tracking"]) == strong.capabilities.emotion_tracking


def test_score_skips_and_names_bad_inputs_with_exit_code_2(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    conversations, runs = dataset
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "broken.json").write_text("{not json")
    orphan = hand_run()
    orphan["conversationId"] = "nobody-has-this"
    (extra / "orphan.json").write_text(dumps_canonical(parse_run(orphan)))
    bad_run = hand_run()
    bad_run["mode"] = "sideways"
    (extra / "bad_mode.json").write_text(json.dumps(bad_run))
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(
            "score",
            "--conversations",
            str(conversations),
            "--runs",
            str(runs),
            str(extra),
            "--json",
            str(tmp_path / "r.json"),
            stdout=out,
            stderr=err,
        )
    assert caught.value.returncode == 2
    assert f"skipped {extra / 'broken.json'}" in err.getvalue()
    assert "not valid JSON" in err.getvalue()
    assert f"skipped {extra / 'orphan.json'}" in err.getvalue()
    assert "no conversation 'nobody-has-this'" in err.getvalue()
    assert "mode: expected one of" in err.getvalue()
    # everything valid is still scored and written
    assert "Scored 20 runs against 8 conversations; 3 input(s) skipped." in out.getvalue()
    assert len(json.loads((tmp_path / "r.json").read_text())["conversations"]) == 20


def test_score_accepts_one_mixed_folder_for_both_sides(tmp_path: Path) -> None:
    (tmp_path / "conv.json").write_text(dumps_canonical(parse_conversation(hand_conversation())))
    (tmp_path / "run.json").write_text(dumps_canonical(parse_run(hand_run())))
    out, _ = run_command(
        "score",
        "--conversations",
        str(tmp_path),
        "--runs",
        str(tmp_path),
        "--details",
        "--json",
        str(tmp_path / "r.out"),
    )
    assert "em/hand" in out and "83.87 ± –" in out  # the hand-computed composite, one conversation: no SE
    record = json.loads((tmp_path / "r.out").read_text())["conversations"][0]
    assert record["details"]["n_gt_turns"] == 3


def test_analyze_prints_every_section_and_writes_json(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    conversations, runs = dataset
    out, err = run_command(
        "analyze",
        "--conversations",
        str(conversations),
        "--runs",
        str(runs),
        "--bootstrap",
        "200",
        "--seed",
        "4",
        "--json",
        str(tmp_path / "a.json"),
    )
    assert err == ""
    for title in (
        "Capability profile",
        "Rank independence",
        "Discrimination",
        "Bootstrap 95% intervals",
        "By topic category",
        "By participant group",
        "By turn position",
        "By original model",
        "Human baseline",
    ):
        assert f"== {title}" in out
    assert "human:rater1 [default] *" in out
    analysis = json.loads((tmp_path / "a.json").read_text())
    assert set(analysis) == {
        "rows",
        "capability_profile",
        "independence",
        "discrimination",
        "bootstrap",
        "breakdowns",
        "human_baseline",
        "notes",
        "comparability",
    }
    # The human rated 4 of the 8 conversations: shown apart and paired with each model on those 4.
    assert analysis["rows"] == ["em/strong [default]", "em/weak [verbose]"]
    assert [(a["label"], a["n_conversations"]) for a in analysis["comparability"]["apart"]] == [
        ("human:rater1 [default]", 4)
    ]
    assert {p["n_shared"] for p in analysis["comparability"]["human_pairings"]} == {4}
    assert "== Compared rows" in out and "Paired on the conversations each human rated" in out
    assert analysis["bootstrap"]["seed"] == 4 and analysis["bootstrap"]["n_resamples"] == 200
    assert analysis["human_baseline"]["rows"] == ["human:rater1 [default]"]
    # the file reads back into the typed model, equal to the analysis computed in memory
    written = Analysis.model_validate_json((tmp_path / "a.json").read_text())
    loaded = load_inputs([conversations], [runs])
    in_memory = analyze(score_inputs(loaded).report(), [c for _, c in loaded.conversations], seed=4, n_bootstrap=200)
    assert written == in_memory
    assert (tmp_path / "a.json").read_text() == json.dumps(to_json(in_memory), ensure_ascii=False, indent=2) + "\n"


def test_analyze_rejects_bad_options(dataset: tuple[Path, Path]) -> None:
    conversations, runs = dataset
    with pytest.raises(CommandError, match="--bootstrap must be at least 1"):
        run_command("analyze", "--conversations", str(conversations), "--runs", str(runs), "--bootstrap", "0")
    with pytest.raises(CommandError, match="--pool: cannot pool 'em/nobody': not a compared row"):
        run_command("analyze", "--conversations", str(conversations), "--runs", str(runs), "--pool", "em/nobody")


def test_analyze_pools_the_rows_asked_for(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    conversations, runs = dataset
    args = ("--conversations", str(conversations), "--runs", str(runs), "--bootstrap", "20")
    out, _ = run_command("analyze", *args, "--pool", "em/weak", "--json", str(tmp_path / "a.json"))
    assert "Pooled rows: em/weak [verbose] (pooled rows chosen: em/weak [verbose])" in out
    breakdowns = json.loads((tmp_path / "a.json").read_text())["breakdowns"]
    assert breakdowns["pooled_rows"] == ["em/weak [verbose]"]
    # 8 conversations, each counted once however many rows replayed it
    assert sum(c["n_conversations"] for c in breakdowns["by_category"]["overall"]) == 8


@pytest.mark.skipif(not ATTUNE.exists(), reason="the attune entry point is not installed in .venv")
def test_attune_executable_help_and_exit_code(tmp_path: Path) -> None:
    help_text = subprocess.run([str(ATTUNE), "score", "--help"], capture_output=True, text=True, check=True).stdout
    for option in ("--conversations", "--runs", "--json", "--csv", "--details"):
        assert option in help_text
    assert "exits with status 2" in " ".join(help_text.split())
    analyze_help = subprocess.run([str(ATTUNE), "analyze", "--help"], capture_output=True, text=True, check=True).stdout
    for option in ("--conversations", "--runs", "--json", "--seed", "--bootstrap", "--alpha"):
        assert option in analyze_help

    (tmp_path / "c").mkdir()
    (tmp_path / "r").mkdir()
    (tmp_path / "c" / "conv.json").write_text(dumps_canonical(parse_conversation(hand_conversation())))
    (tmp_path / "r" / "run.json").write_text(dumps_canonical(parse_run(hand_run())))
    ok = subprocess.run(
        [str(ATTUNE), "score", "--conversations", str(tmp_path / "c"), "--runs", str(tmp_path / "r")],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    (tmp_path / "r" / "junk.json").write_text("[]")
    skipped = subprocess.run(
        [str(ATTUNE), "score", "--conversations", str(tmp_path / "c"), "--runs", str(tmp_path / "r")],
        capture_output=True,
        text=True,
    )
    assert skipped.returncode == 2
    assert f"skipped {tmp_path / 'r' / 'junk.json'}" in skipped.stderr
    assert sys.executable  # the subprocess used the project's own interpreter via the entry point
