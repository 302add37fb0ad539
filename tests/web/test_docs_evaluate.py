"""docs/evaluate.md ("Evaluate your model") does what it says: every command block on it runs.

Each ``sh`` block must be marked ``<!-- test: run -->`` (the convention of
tests/doc_blocks.py; any other marker fails this test, so no command escapes
it); the blocks run in order, in one scratch
folder holding a copy of sample_data/, on a fresh data directory (the embedded
default), with the local fake OpenAI-compatible server standing in for the
reader's server (``API_BASE``) and for the cloud provider (litellm's
``OPENAI_API_BASE``, a dummy key). The prompt excerpts on the page (``text``
blocks) must be the words the model was really sent in that run, and the
example answers must be JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.fake_llm_server import FakeLLMServer
from tests.doc_blocks import RUN, blocks

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "evaluate.md"
ELIDED = "…"


def test_every_command_block_is_marked_run():
    commands = blocks(PAGE, "sh")
    assert len(commands) >= 5
    assert [block.where() for block in commands if block.marker != RUN] == []


def test_the_pages_commands_run_and_its_prompts_are_the_real_ones(tmp_path):
    shutil.copytree(ROOT / "sample_data", tmp_path / "sample_data")
    with FakeLLMServer() as server:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "REDIS_URL", "ATTUNE_ALLOW_LIVE_MODELS", "OPENAI_API_KEY"}
        }
        env |= {
            "ATTUNE_DATA_DIR": str(tmp_path / "data"),
            "API_BASE": server.url,
            "OPENAI_API_BASE": server.url,  # the cloud example's provider, here
            "OPENAI_API_KEY": "sk-docs-test",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        outputs = []
        for body in (block.body for block in blocks(PAGE, "sh")):
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", body],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert done.returncode == 0, f"{body}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            outputs.append(done.stdout)
        models_called = server.stats()["requests"]

    local, dry_run, cloud, researcher, analysis = outputs
    assert "Recorded as run 1 " in local and "openai/my-model" in local
    assert "calls (" in dry_run and "Recorded" not in dry_run
    assert "Recorded as run 2 " in cloud and "openai/gpt-4o-mini" in cloud
    assert "Created researcher 'rita'" in researcher
    assert "baseline:prior" in analysis and "openai/my-model" in analysis
    assert models_called > 0
    assert len(list((tmp_path / "runs" / "my-model").glob("*.json"))) == 15

    with sqlite3.connect(tmp_path / "data" / "attune.sqlite3") as database:
        sent = [json.loads(row[0]) for row in database.execute("SELECT messages FROM scoring_calltranscript")]
        origins = {row[0] for row in database.execute("SELECT origin FROM scoring_evaluationrun")}
    assert origins == {"cli"}
    contents = "\n".join(message["content"] for messages in sent for message in messages)
    excerpts = blocks(PAGE, "text")
    assert len(excerpts) >= 5
    for body in (block.body for block in excerpts):
        for line in body.splitlines():
            if line.strip() and line.strip() != ELIDED:
                assert line in contents, f"the page quotes a prompt line the model was never sent: {line!r}"
    for body in (block.body for block in blocks(PAGE, "json")):
        assert isinstance(json.loads(body), dict)
