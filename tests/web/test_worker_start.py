"""A replay process loads litellm before its first call and freezes that start-up heap: a Celery worker
when it starts (attune_site/celery.py), ``attune eval`` before it replays or forks (attunebench/replay/heap.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter, so nothing imported litellm before: the worker's own start-up signal must load it.
CHECK = """
import gc
import sys
import django
django.setup()
from celery.signals import worker_init
from attune_site.celery import app
assert "litellm" not in sys.modules, "litellm was loaded before the worker started"
assert gc.get_freeze_count() == 0
worker_init.send(sender=None)
import litellm
frozen = gc.get_freeze_count()
print("frozen", frozen > 300_000, len(gc.get_objects(generation=2)) < frozen // 10)
print("loaded", "litellm" in sys.modules, litellm.num_retries, litellm.telemetry)
"""


# ``attune eval``'s preparation: nothing for offline baselines; a frozen heap without litellm for a model on the
# direct route (a served name litellm has no rules for); litellm and a frozen heap for a model litellm calls.
EVAL_CHECK = """
import gc
import sys
import django
django.setup()
from attunebench.replay.llm import EMSpec, spec_from_name
from attunebench.replay.protocol import ReplayConfig
from scoring.management.commands.eval import load_for_replay
offline = load_for_replay(spec_from_name("baseline:random"), ReplayConfig(judge=spec_from_name("baseline:lexicon")))
print("offline", offline, gc.get_freeze_count(), "litellm" in sys.modules)
direct = load_for_replay(EMSpec(name="openai/fake", api_base="http://127.0.0.1:9/v1"), ReplayConfig())
print("direct", direct, gc.get_freeze_count() > 0, "litellm" in sys.modules)
live = load_for_replay(EMSpec(name="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1"), ReplayConfig())
print("live", live, gc.get_freeze_count() > 300_000, "litellm" in sys.modules)
"""


def run_fresh(code: str, data_dir: Path) -> list[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "attune_site.settings",
        "ATTUNE_DATA_DIR": str(data_dir),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()


def test_the_worker_start_signal_loads_and_configures_litellm_and_freezes_the_heap(tmp_path):
    lines = run_fresh(CHECK, tmp_path)
    # configured as the replay configures it: the scheduler owns retries, no telemetry
    assert lines[-1] == "loaded True 0 False"
    # litellm's 375,000 objects and Django's are out of the full passes, which walk a tenth as many at most
    assert lines[-2] == "frozen True True"


def test_eval_freezes_the_start_up_heap_before_a_live_replay_loads_litellm_only_for_its_route_and_leaves_an_offline_one_alone(
    tmp_path,
):
    assert run_fresh(EVAL_CHECK, tmp_path)[-3:] == [
        "offline False 0 False",
        "direct True True False",
        "live True True True",
    ]
