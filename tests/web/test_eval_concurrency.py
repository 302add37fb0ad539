"""`attune eval --concurrency N` against a model outside the registry really has N calls in flight.

The provider is the fake OpenAI-compatible server on 127.0.0.1 (a loopback
api_base needs no permission for live calls); it counts the most chat
requests it was answering at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attunebench.canonical import dumps_canonical
from attunebench.synth import document_filename, synth_conversations
from devtools.fake_llm_server import FakeConfig, FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    # 300 ms per answer: calls admitted together are still in flight together at the server.
    with FakeLLMServer(FakeConfig(latency_ms=300.0)) as running:
        yield running


def eval_command(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "ATTUNE_ALLOW_LIVE_MODELS"}}
    env |= {"ATTUNE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        # No preflight: its one probe call would be counted (and held) with the run's own calls.
        [sys.executable, "-m", "attune_site.cli", "eval", "--no-preflight", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("route", [[], ["--via-litellm"]], ids=["openai-sdk", "litellm"])
def test_an_unregistered_model_reaches_the_requested_concurrency(server, tmp_path, route):
    # The first 32 requests are held until all 32 are at the server: a loaded machine cannot spread them out.
    server.configure(hold_until_in_flight=32)
    folder = tmp_path / "conversations"
    folder.mkdir()
    # 40 conversations open their first turn's draft call together: more than 32 calls want to start.
    for conversation in synth_conversations(40, seed=11, min_turns=2, max_turns=2):
        (folder / document_filename(conversation)).write_text(dumps_canonical(conversation), encoding="utf-8")

    done = eval_command(
        "--model",
        "openai/fake",
        "--api-base",
        server.url,
        "--conversations",
        str(folder),
        "--concurrency",
        "32",
        "--no-cache",
        *route,
        data_dir=tmp_path / "data",
    )

    assert done.returncode == 0, done.stderr
    assert server.stats()["peak_in_flight"] == 32  # not the 8 a hidden per-provider default allowed
    assert f"Calls to openai@{server.url}: at most 32 in flight (--concurrency 32; not in the registry)" in done.stdout
    assert "limit 32/32" in done.stdout  # no overload, so the adaptive level stayed at the ceiling


def test_via_litellm_without_an_api_base_is_refused_with_where_to_set_it(tmp_path):
    done = eval_command(
        "--model", "openai/fake", "--via-litellm", "--conversations", str(tmp_path), data_dir=tmp_path / "data"
    )
    assert done.returncode != 0
    assert '--via-litellm applies to a model at --api-base; a registered model takes "client": "litellm"' in (
        done.stderr
    )


def test_fresh_calls_and_repeats_ask_the_model_again_and_are_cached_under_their_own_name(tmp_path):
    """A re-run is answered from the cache; --fresh asks again (a model updated behind its name); each
    --repeat K has answers of its own, so a second run of the same repeat is answered from the cache."""
    folder = tmp_path / "conversations"
    folder.mkdir()
    for conversation in synth_conversations(3, seed=5, min_turns=2, max_turns=2):
        (folder / document_filename(conversation)).write_text(dumps_canonical(conversation), encoding="utf-8")
    with FakeLLMServer(FakeConfig()) as fake:

        def run(*extra: str) -> int:
            fake.reset()
            base = ("--model", "openai/fake", "--api-base", fake.url, "--conversations", str(folder))
            out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
            done = eval_command(*base, "--out", str(out), *extra, data_dir=tmp_path / "data")
            assert done.returncode == 0, done.stderr
            return int(fake.stats()["requests"])

        first = run()
        assert first > 0
        assert run() == 0  # the same model at the same endpoint: answered from the cache
        assert run("--fresh") == first  # asked again
        assert run("--repeat", "1") == first  # a repeat has answers of its own
        assert run("--repeat", "1") == 0  # and they are cached under its number
