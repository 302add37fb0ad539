"""CPU of a process's first model calls, with and without the litellm warm-up (``attunebench.replay.llm.warm_up``).

litellm sets up much of a call's machinery on the first call in a process. Each
mode runs in a fresh process: import litellm (not measured), then, with
``warm``, the warm-up (measured apart), then the first calls to the fake
provider one after another, each one's CPU (``time.process_time``) printed.
``cold`` and ``warm`` call through litellm (``"client": "litellm"``);
``sdk-cold`` and ``sdk-warm`` take the default route of an ``openai/...`` model
at its own api_base, the OpenAI SDK, whose warm-up answers in-process.
The replay sends a wave of calls at once, and every answer of that wave waits
behind the first call's set-up, so this is the cost the warm-up moves out of
the replay and into start-up.

Usage: python bench/replay_first_call.py [--calls 3]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from figures import figures_line  # noqa: E402

from devtools.fake_llm_server import start_subprocess  # noqa: E402

CHILD = """
import json, sys, time
from attunebench.replay import prompts as P
from attunebench.replay.aio import run_sync
from attunebench.replay.llm import EMSpec, LiteLLMBackend, load_litellm, warm_up
from tests.core.replay_calls import draft_context

api_base, calls, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3].endswith("warm")
load_litellm()
route = {} if sys.argv[3].startswith("sdk") else {"client": "litellm"}
spec = EMSpec(name="fake/em", litellm_model="openai/fake-em", api_base=api_base, params={"timeout": 30.0, **route})
ctx = draft_context()
messages = P.build_messages(ctx)
backend = LiteLLMBackend()
warm_ms = None
if warm:
    started = time.process_time()
    run_sync(warm_up([spec]))
    warm_ms = 1000 * (time.process_time() - started)
each = []
for _ in range(calls):
    started = time.process_time()
    run_sync(backend.complete(spec, messages, ctx))
    each.append(1000 * (time.process_time() - started))
print(json.dumps({"warm_up_ms": warm_ms, "calls_ms": each}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU of the first model calls, with and without the warm-up")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="two calls per process: the path, not the timing")
    options = parser.parse_args()
    if options.smoke:
        options.calls = 2
    server, api_base = start_subprocess()
    results = {}
    try:
        for mode in ("cold", "warm", "sdk-cold", "sdk-warm"):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, api_base, str(options.calls), mode],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            )
            if done.returncode:
                raise SystemExit(f"{mode} run failed:\n{done.stderr[-3000:]}")
            results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.wait()
    cold, warm, sdk, sdk_warm = (results[mode]["calls_ms"] for mode in ("cold", "warm", "sdk-cold", "sdk-warm"))
    print("CPU of a fresh process's first calls to the fake provider, one after another (ms each)")
    print(f"  litellm, without warm-up: {' '.join(f'{ms:.1f}' for ms in cold)}")
    print(
        f"  litellm, after warm-up:   {' '.join(f'{ms:.1f}' for ms in warm)} "
        f"(the warm-up: {results['warm']['warm_up_ms']:.1f})"
    )
    print(f"  OpenAI SDK, without warm-up: {' '.join(f'{ms:.1f}' for ms in sdk)}")
    print(
        f"  OpenAI SDK, after warm-up:   {' '.join(f'{ms:.1f}' for ms in sdk_warm)} "
        f"(the warm-up: {results['sdk-warm']['warm_up_ms']:.1f})"
    )
    print(
        figures_line(
            "replay_first_call",
            cold_first_ms=cold[0],
            warm_first_ms=warm[0],
            warm_up_ms=results["warm"]["warm_up_ms"],
            cold_later_ms=cold[-1],
            warm_later_ms=warm[-1],
            sdk_first_ms=sdk[0],
            sdk_later_ms=sdk[-1],
            sdk_warm_first_ms=sdk_warm[0],
            sdk_warm_up_ms=results["sdk-warm"]["warm_up_ms"],
        )
    )


if __name__ == "__main__":
    main()
