"""A Celery worker loads litellm when it starts, before its first task (attune_site/celery.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter, so nothing imported litellm before: the worker's own start-up signal must load it.
CHECK = """
import sys
import django
django.setup()
from celery.signals import worker_init
from attune_site.celery import app
assert "litellm" not in sys.modules, "litellm was loaded before the worker started"
worker_init.send(sender=None)
import litellm
print("loaded", "litellm" in sys.modules, litellm.num_retries, litellm.telemetry)
"""


def test_the_worker_start_signal_loads_and_configures_litellm(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "attune_site.settings",
        "ATTUNE_DATA_DIR": str(tmp_path),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    # configured as the replay configures it: the scheduler owns retries, no telemetry
    assert result.stdout.strip().splitlines()[-1] == "loaded True 0 False"
