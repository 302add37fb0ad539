"""`attune eval` as a user runs it: a fresh data folder, no keys, no database, no servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from attunebench.canonical import load_run

ROOT = Path(__file__).resolve().parents[2]


def attune(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "ATTUNE_ALLOW_LIVE_MODELS"}}
    env |= {"ATTUNE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    for key in [k for k in env if k.endswith("_API_KEY")]:
        del env[key]
    return subprocess.run(
        [sys.executable, "-m", "attune_site.cli", "eval", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_lexicon_baseline_on_sample_data_works_on_a_fresh_install(tmp_path):
    done = attune("--model", "baseline:lexicon", "--conversations", "sample_data", data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stderr
    files = sorted((tmp_path / "data" / "runs" / "baseline_lexicon__default").glob("*.json"))
    assert len(files) == len(list((ROOT / "sample_data").glob("*.json")))
    run = load_run(files[0].read_bytes(), str(files[0]))
    assert run.em_model == "baseline:lexicon" and run.turns and run.post_conversation is not None
    assert "baseline:lexicon" in done.stdout and "composite" in done.stdout
    assert "0 failed" in done.stdout


def test_live_models_are_refused_without_permission(tmp_path):
    done = attune("--model", "openai/gpt-4o-mini", "--conversations", "sample_data", data_dir=tmp_path / "data")
    assert done.returncode != 0
    assert "ATTUNE_ALLOW_LIVE_MODELS" in done.stderr
    assert not (tmp_path / "data" / "runs").exists() or not any((tmp_path / "data" / "runs").rglob("*.json"))


def test_dry_run_prints_calls_and_cost_and_writes_nothing(tmp_path):
    done = attune(
        "--model",
        "baseline:random",
        "--conversations",
        "sample_data",
        "--judge",
        "baseline:prior",
        "--dry-run",
        data_dir=tmp_path / "data",
    )
    assert done.returncode == 0, done.stderr
    assert "calls (" in done.stdout and "judge" in done.stdout and "$0.0000" in done.stdout
    assert not (tmp_path / "data" / "runs").exists()
    assert "\r" not in done.stdout  # the live progress line goes to stderr, never into output
