"""A model's call route is litellm's answer, kept per litellm installation: a process that knows it sends an
OpenAI SDK model its calls without importing litellm (seconds of start-up), and a changed litellm is asked again.
A name the rule without litellm decides (``route_without_litellm``) never needs asking.

Each step runs in a fresh Python process, so what it imports is its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from devtools.fake_llm_server import FakeConfig, FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]

CALL = """
import json, sys
from pathlib import Path
from attunebench.replay import prompts as P
from attunebench.replay.aio import run_sync
from attunebench.replay.llm import EMSpec, LiteLLMBackend, needs_litellm, remember_routes_in
from tests.core.replay_calls import draft_context

remember_routes_in(Path(sys.argv[1]))
spec = EMSpec(name=sys.argv[3], litellm_model=sys.argv[3], api_base=sys.argv[2])
route_needs_litellm = needs_litellm(spec)
ctx = draft_context()
answer = run_sync(LiteLLMBackend().complete(spec, P.build_messages(ctx), ctx))
print(json.dumps({"needs_litellm": route_needs_litellm, "litellm_imported": "litellm" in sys.modules,
                  "answered": bool(answer.text), "cost": answer.cost_usd}))
"""


# A name the rule without litellm leaves to litellm (``route_without_litellm``: "gpt" may name a family).
ASKED = "openai/local-gpt-em"


def _call(routes: Path, api_base: str, model: str = ASKED) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CALL, str(routes), api_base, model],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_kept_route_calls_the_model_without_litellm_and_another_litellm_is_asked_again(tmp_path):
    routes = tmp_path / "litellm-routes.json"
    with FakeLLMServer(FakeConfig()) as server:
        first = _call(routes, server.url)
        kept = json.loads(routes.read_text())
        again = _call(routes, server.url)
        # As if litellm had been upgraded: the kept answers are for another installation.
        routes.write_text(json.dumps({**kept, "litellm": "another installation"}))
        upgraded = _call(routes, server.url)
        requests = server.stats()["requests"]
    assert first == {"needs_litellm": False, "litellm_imported": True, "answered": True, "cost": None}
    assert kept["routes"] == {ASKED: True}
    # The same answer and the same unknown price, from a process that never imported litellm.
    assert again == {"needs_litellm": False, "litellm_imported": False, "answered": True, "cost": None}
    assert upgraded["litellm_imported"] is True and upgraded["answered"] is True
    assert json.loads(routes.read_text())["litellm"] == kept["litellm"]  # the answer kept for the litellm here
    assert requests == 3


def test_a_damaged_routes_file_is_asked_again_and_rewritten(tmp_path):
    routes = tmp_path / "litellm-routes.json"
    routes.write_text("{not json")
    with FakeLLMServer(FakeConfig()) as server:
        result = _call(routes, server.url)
    assert result["answered"] is True and result["litellm_imported"] is True
    assert json.loads(routes.read_text())["routes"] == {ASKED: True}


def test_a_model_the_rule_decides_is_called_without_litellm_from_its_first_run(tmp_path):
    routes = tmp_path / "litellm-routes.json"
    with FakeLLMServer(FakeConfig()) as server:
        first = _call(routes, server.url, "openai/local-em")
    assert first == {"needs_litellm": False, "litellm_imported": False, "answered": True, "cost": None}
    assert not routes.exists()  # nothing to keep: the rule answers again at once
