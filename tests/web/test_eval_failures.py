"""`attune eval` when things go wrong, as a new user meets it: each failure says what and where, and exits non-zero.

Against local servers (the fake OpenAI-compatible provider: a good one, one that wants a key, one that ignores
the answer format, one that fails only the post-conversation call), a closed port and a model name typo. A run
with gaps exits non-zero below --min-coverage, and --retry-failed on the same folder replays only what failed:
the fake provider counts the requests it receives.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from attunebench.canonical import load_run
from devtools.fake_llm_server import FakeConfig, FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"


def attune(*args: str, data_dir: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "ATTUNE_ALLOW_LIVE_MODELS"}}
    env |= {"ATTUNE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), **env_extra}
    for key in [k for k in env if k.endswith("_API_KEY") and k not in env_extra]:
        del env[key]
    return subprocess.run(
        [sys.executable, "-m", "attune_site.cli", "eval", "--conversations", str(SAMPLE), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def run_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "runs").rglob("*.json")) if (data_dir / "runs").exists() else []


def test_a_closed_port_fails_in_preflight_with_connection_refused(tmp_path):
    url = closed_port_url()
    done = attune("--model", "openai/fake-em", "--api-base", url, data_dir=tmp_path)
    assert done.returncode == 1
    assert f"preflight FAILED: openai/fake-em: connection refused at {url}" in done.stderr
    assert "nothing was replayed" in done.stderr and not run_files(tmp_path)


def test_a_wrong_key_and_a_wrong_format_fail_in_preflight_saying_why(tmp_path):
    with (
        FakeLLMServer(FakeConfig(api_key="sk-right")) as keyed,
        FakeLLMServer(FakeConfig(answer_text="Happy to help! What would you like to talk about?")) as prose,
    ):
        refused = attune("--model", "openai/fake-em", "--api-base", keyed.url, data_dir=tmp_path / "a")
        unusable = attune("--model", "openai/fake-em", "--api-base", prose.url, data_dir=tmp_path / "b")
        assert keyed.stats()["requests"] == 1 and prose.stats()["requests"] == 1  # one probe each, no run
    host = keyed.url.split("//")[1].split("/")[0]
    assert refused.returncode == 1 and f"openai/fake-em: 401 from {host}: the server wants a key" in refused.stderr
    assert unusable.returncode == 1
    assert "the answer to a draft call is not usable (the reply contains no JSON object)" in unusable.stderr
    assert "Happy to help! What would you like to talk about?" in unusable.stderr


def test_a_model_name_typo_is_named_before_the_live_model_switch(tmp_path):
    typo = attune("--model", "gpt-4o-minii", data_dir=tmp_path)
    assert typo.returncode == 1
    assert 'model "gpt-4o-minii" is not known to litellm; did you mean gpt-4o-mini' in typo.stderr
    live = attune("--model", "gpt-4o-mini", data_dir=tmp_path)
    assert live.returncode == 1
    assert "gpt-4o-mini is a live model (it has no --api-base, so litellm sends its calls to api.openai.com" in (
        live.stderr
    )
    assert "ATTUNE_ALLOW_LIVE_MODELS=1" in live.stderr


def test_without_preflight_a_model_that_never_answers_in_json_stops_early(tmp_path):
    with FakeLLMServer(FakeConfig(answer_text="I prefer prose.")) as prose:
        done = attune(
            "--model",
            "openai/fake-em",
            "--api-base",
            prose.url,
            "--no-preflight",
            "--processes",
            "1",
            data_dir=tmp_path,
        )
        received = prose.stats()["requests"]
    assert done.returncode == 1
    assert "stopped early: the first 20 attempts all failed the same way (unusable answer)" in done.stderr
    assert "the reply contains no JSON object" in done.stderr and not run_files(tmp_path)
    assert received < 40  # stopped after its first attempts, not after 5 tries of every one of 275 calls


def test_a_run_with_gaps_exits_non_zero_and_retry_failed_makes_only_the_failed_calls(tmp_path):
    conversations = len(list(SAMPLE.glob("*.json")))
    with FakeLLMServer(FakeConfig(broken_call_types=["post"])) as server:
        gapped = attune("--model", "openai/fake-em", "--api-base", server.url, data_dir=tmp_path)
        assert gapped.returncode == 1, gapped.stderr
        assert "coverage 0." in gapped.stderr and "below --min-coverage 0.95" in gapped.stderr
        assert "--retry-failed" in gapped.stderr
        assert f"Failed calls by kind ({conversations} in all):" in gapped.stdout
        assert f"  unusable answer: {conversations}, e.g. " in gapped.stdout
        assert "openai/fake-em ‡" in gapped.stdout and "rests partly on defaults" in gapped.stdout
        files = run_files(tmp_path)
        assert len(files) == conversations
        assert all(load_run(f.read_bytes(), str(f)).post_conversation is None for f in files)

        server.configure(broken_call_types=[])
        server.reset()
        retried = attune("--model", "openai/fake-em", "--api-base", server.url, "--retry-failed", data_dir=tmp_path)
        stats = server.stats()
    assert retried.returncode == 0, retried.stderr
    assert f"Retrying {conversations} conversation(s) with failed or missing calls" in retried.stdout
    # The preflight's one draft call, then exactly the failed post-conversation calls: nothing answered before.
    assert stats["by_call_type"] == {"draft": 1, "post": conversations}
    assert stats["requests"] == conversations + 1
    assert "‡" not in retried.stdout and "100%       100%" in retried.stdout
    assert all(load_run(f.read_bytes(), str(f)).post_conversation is not None for f in run_files(tmp_path))

    again = attune("--model", "openai/fake-em", "--api-base", closed_port_url(), "--retry-failed", data_dir=tmp_path)
    assert "Retrying 0 conversation(s)" in again.stdout  # nothing left to retry: no call, the preflight too
