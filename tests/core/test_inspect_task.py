"""AttuneBench as an inspect_ai task: the same answers give the same scores as `attune eval` + `attune score`.

One local fake OpenAI-compatible server answers both routes; its answer to a request depends only on the
request's messages (a digest seeds it), so the two routes see the same answers exactly when they send the
same prompts. No database: `attune eval --no-record` writes run files, `attune score` reads files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import EvalLog  # noqa: E402
from inspect_ai.model import get_model  # noqa: E402

from attune.inspect_registry import attunebench  # noqa: E402
from attunebench import catalogue as cat  # noqa: E402
from attunebench.inspect_task import RECORD_KEY  # noqa: E402
from attunebench.metrics.comparison import PRIOR_BASELINE, skill  # noqa: E402
from attunebench.metrics.composite import CAPABILITIES  # noqa: E402
from attunebench.metrics.report import leaderboard_rows  # noqa: E402
from attunebench.metrics.results import ScoringReport  # noqa: E402
from devtools.fake_llm_server import FakeLLMServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DATA = ROOT / "sample_data"
FAKE_MODEL = "fake-em"


def attune_env(data: Path) -> dict[str, str]:
    """An `attune` subprocess: embedded settings in a data directory of its own, no database or Redis."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return env | {"ATTUNE_DATA_DIR": str(data), "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def attune(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "attune_site.cli", *args]
    return subprocess.run(command, cwd=ROOT, env=attune_env(data), capture_output=True, text=True, timeout=600)


def attune_score(out: Path, data: Path, *runs: Path) -> ScoringReport:
    folders = [str(r) for r in runs]
    scored = attune("score", "--conversations", str(SAMPLE_DATA), "--runs", *folders, "--json", str(out), data=data)
    assert scored.returncode == 0, scored.stderr
    return ScoringReport.model_validate_json(out.read_text(encoding="utf-8"))


def run_inspect(server: FakeLLMServer, runs: Path, logs: Path) -> EvalLog:
    model = get_model(f"openai-api/fake/{FAKE_MODEL}", base_url=server.url, api_key="none")
    task = attunebench(conversations=str(SAMPLE_DATA), mode="default", runs_dir=str(runs))
    [log] = inspect_eval(task, model=model, log_dir=str(logs), display="none", max_connections=8)
    assert log.status == "success", log.error
    return log


def without_identity(record: dict[str, object]) -> dict[str, object]:
    """A per-conversation record without the model's name (the two routes name the same model differently)."""
    return {k: v for k, v in record.items() if k != "em_model"}


@pytest.mark.slow
def test_inspect_task_scores_equal_attune_eval_and_score_on_the_same_answers(tmp_path):
    with FakeLLMServer() as server:
        evaluated = attune(
            "eval",
            "--no-preflight",
            "--no-record",
            "--no-cache",
            "--in-process",
            "--model",
            f"openai/{FAKE_MODEL}",
            "--api-base",
            server.url,
            "--conversations",
            str(SAMPLE_DATA),
            "--mode",
            "default",
            "--out",
            str(tmp_path / "attune-runs"),
            data=tmp_path / "data",
        )
        assert evaluated.returncode == 0, evaluated.stderr
        prior = attune(
            "eval",
            "--no-record",
            "--model",
            PRIOR_BASELINE,
            "--conversations",
            str(SAMPLE_DATA),
            "--out",
            str(tmp_path / "prior-runs"),
            data=tmp_path / "data",
        )
        assert prior.returncode == 0, prior.stderr
        requests_by_attune = server.stats()["requests"]
        digests_by_attune = dict(server.digests())
        server.reset()
        log = run_inspect(server, tmp_path / "inspect-runs", tmp_path / "logs")
        requests_by_inspect = server.stats()["requests"]
        digests_by_inspect = dict(server.digests())

    # The same prompts went out, as many times each: the replay protocol is the same on both routes.
    assert requests_by_inspect == requests_by_attune > 0
    assert digests_by_inspect == digests_by_attune

    with_prior = attune_score(
        tmp_path / "both.json", tmp_path / "data", tmp_path / "attune-runs", tmp_path / "prior-runs"
    )
    rows = {row.em_model: row for row in leaderboard_rows(with_prior)}
    reference = attune_score(tmp_path / "attune.json", tmp_path / "data", tmp_path / "attune-runs")
    assert len(reference.conversations) == len(list(SAMPLE_DATA.glob("conv-*.json"))) == 15

    # Per conversation: the record in each sample's score metadata is `attune score`'s, value for value.
    assert log.samples is not None and len(log.samples) == 15
    by_inspect = {}
    for sample in log.samples:
        score = sample.scores["attunebench_scorer"]
        assert score.metadata is not None
        record = score.metadata[RECORD_KEY]
        assert score.value == record["composite_score"]
        by_inspect[record["conversationId"]] = without_identity(record)
    by_attune = {r.conversationId: without_identity(r.model_dump(mode="json")) for r in reference.conversations}
    assert by_inspect == by_attune

    # The eval's metrics are `attune score`'s leaderboard row: composite 0-100, capabilities 0-1, coverage.
    [row] = leaderboard_rows(reference)
    assert log.results is not None
    metrics = {name: m.value for s in log.results.scores for name, m in s.metrics.items()}
    assert metrics["composite"] == row.composite_score
    assert 0 < metrics["composite"] < 100
    for name in CAPABILITIES:
        assert metrics[name] == row.capabilities.capability(name)
    assert metrics["coverage"] == row.coverage == 1.0
    # Skill over the prior baseline, from `attune eval --model baseline:prior` scored beside it.
    assert rows[f"openai/{FAKE_MODEL}"].composite_score == row.composite_score
    expected_skill = skill(row.composite_score, rows[PRIOR_BASELINE].composite_score, 100.0)
    assert expected_skill is not None
    assert metrics["composite_skill"] == expected_skill

    # The run files the task wrote are read by `attune score` like any other run, with the same figures.
    from_inspect_files = attune_score(tmp_path / "inspect.json", tmp_path / "data", tmp_path / "inspect-runs")
    [inspect_row] = leaderboard_rows(from_inspect_files)
    assert inspect_row.em_model == f"openai-api/fake/{FAKE_MODEL}"
    assert inspect_row.composite_score == row.composite_score

    # Every call the replay made is a model call in the inspect log, with its answer.
    for sample in log.samples:
        run = json.loads(next((tmp_path / "inspect-runs").glob(f"{sample.id}*.json")).read_text(encoding="utf-8"))
        model_events = [e for e in sample.events if e.event == "model"]
        assert len(model_events) == run["usage"]["calls_made"] > 0
        assert all(e.output.completion.startswith("{") for e in model_events)

    # The research-only statement travels with the task and with every score.
    assert cat.RESEARCH_ONLY_STATEMENT in str(log.eval.metadata)
    assert all(s.scores["attunebench_scorer"].explanation == cat.RESEARCH_ONLY_STATEMENT for s in log.samples)


def test_the_inspect_command_finds_the_task_by_its_package_name(tmp_path):
    """`inspect eval attune/attunebench` from a folder outside the checkout, through the entry point."""
    conversation = SAMPLE_DATA / "conv-family-01.json"
    with FakeLLMServer() as server:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PYTHONPATH"}}
        env |= {"FAKE_BASE_URL": server.url, "FAKE_API_KEY": "none", "INSPECT_LOG_DIR": str(tmp_path / "logs")}
        command = [sys.executable, "-m", "inspect_ai", "eval", "attune/attunebench"]
        command += ["--model", f"openai-api/fake/{FAKE_MODEL}", "-T", f"conversations={conversation}"]
        command += ["-T", "mode=verbose", "-T", f"runs_dir={tmp_path / 'runs'}", "--display", "none"]
        command += ["-T", "judge=openai-api/fake/fake-judge"]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    [run_file] = (tmp_path / "runs").glob("*.json")
    run = json.loads(run_file.read_text(encoding="utf-8"))
    assert run["conversationId"] == "conv-family-01"
    assert run["mode"] == "verbose" and run["em_reasoning"]
    assert run["em_model"] == f"openai-api/fake/{FAKE_MODEL}"
    assert run["judge_model"] == "openai-api/fake/fake-judge"
    assert run["turns"] and all(turn["em_draft_judge_scores"] for turn in run["turns"])
    assert list((tmp_path / "logs").glob("*.eval"))


def test_a_bad_task_parameter_is_named():
    with pytest.raises(ValueError, match="mode must be one of"):
        attunebench(conversations=str(SAMPLE_DATA), mode="fastest")
    with pytest.raises(FileNotFoundError, match=r"conversations: .* does not exist"):
        attunebench(conversations=str(SAMPLE_DATA / "missing"))


def test_the_core_imports_without_inspect_ai():
    """Only the inspect module needs the extra: with inspect_ai unimportable the core still loads."""
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"
        "import attunebench, attunebench.replay.run, attunebench.metrics, attunebench.metrics.report\n"
        "try:\n    import attunebench.inspect_task\nexcept ImportError:\n    print('inspect module needs inspect_ai')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "inspect module needs inspect_ai"
