"""CPU per model call through the public litellm path (issue 16 items 5 and 6).

The fake OpenAI-compatible server runs in its own process (no latency), so
only this process's CPU is measured (``time.process_time``: user + system of
this process, the server excluded). Calls are made one after another, so the
figure is CPU per call, not contention. Three figures, each after a warm-up:

- litellm_unlisted_ms  ``litellm.acompletion`` alone for a model litellm does not
                       know (what an ad-hoc ``--model`` cost before registration)
- litellm_ms           ``litellm.acompletion`` alone for a model described to it
                       with ``litellm.register_model`` (what the replay now does)
- replay_ms            the replay's path: ``Scheduler.submit`` + ``LiteLLMBackend.complete``
                       (registration, error mapping, cost) + parsing the reply
- ours_ms              replay_ms - litellm_ms: the part of a call that is our code

Target (issue 16 item 5): replay_ms <= 10 on this machine. The machine is
shared: the load average is printed with the figures.
Usage: python bench/replay_call_cpu.py [--calls 300]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from proc_cpu import reference_loop_s

from attunebench.replay import prompts as P
from attunebench.replay.llm import EMSpec, LiteLLMBackend, load_litellm, register_unlisted
from attunebench.replay.parsing import parse_reply
from attunebench.replay.scheduler import Scheduler
from devtools.fake_llm_server import start_subprocess
from tests.core.replay_calls import draft_context


async def cpu_per_call(call: Callable[[], Awaitable[object]], calls: int, warmup: int = 20) -> float:
    """Milliseconds of this process's CPU per awaited ``call()``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        await call()
    started = time.process_time()
    for _ in range(calls):
        await call()
    return 1000 * (time.process_time() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU per call through litellm's public path")
    parser.add_argument("--calls", type=int, default=300)
    options = parser.parse_args()
    process, api_base = start_subprocess()
    try:
        litellm = load_litellm()
        ctx = draft_context()
        messages = P.build_messages(ctx)
        spec = EMSpec(name="fake/em", litellm_model="openai/fake-em", api_base=api_base, params={"timeout": 30.0})
        common = {"messages": messages, "api_base": api_base, "api_key": "NO_KEY", "timeout": 30.0}
        common |= {"num_retries": 0, "max_retries": 0, "temperature": 0}
        backend = LiteLLMBackend()
        scheduler = Scheduler(max_concurrency=8)

        async def unlisted() -> object:
            return await litellm.acompletion(model="openai/fake-unlisted-model", **common)

        async def listed() -> object:
            return await litellm.acompletion(model="openai/fake-em", **common)

        async def replay() -> object:
            completion = await scheduler.submit(spec.provider, lambda: backend.complete(spec, messages, ctx))
            return parse_reply(ctx, completion.text)

        async def measure() -> tuple[float, float, float]:
            before = await cpu_per_call(unlisted, options.calls)
            register_unlisted(litellm, spec.litellm_model)
            return before, await cpu_per_call(listed, options.calls), await cpu_per_call(replay, options.calls)

        unlisted_ms, litellm_ms, replay_ms = asyncio.run(measure())
    finally:
        process.kill()
        process.wait()
    load = os.getloadavg()
    reference = reference_loop_s()
    ours = replay_ms - litellm_ms
    print(
        f"CPU per call, {options.calls} sequential calls each, litellm {version('litellm')}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
        f"machine speed: a fixed mix of Python work (bench/proc_cpu.py) took {reference:.2f} s of CPU"
    )
    print(f"  litellm.acompletion, model unknown to litellm:     {unlisted_ms:.2f} ms/call")
    print(f"  litellm.acompletion, model registered (public API): {litellm_ms:.2f} ms/call")
    print(f"  replay path (scheduler + backend + parsing):        {replay_ms:.2f} ms/call (target <= 10)")
    print(f"  our share (replay - litellm):                       {ours:.2f} ms/call")
    print(
        f"litellm_unlisted_ms={unlisted_ms:.3f} litellm_ms={litellm_ms:.3f} replay_ms={replay_ms:.3f} "
        f"ours_ms={ours:.3f} load1={load[0]:.2f} reference_loop_s={reference:.3f}"
    )


if __name__ == "__main__":
    main()
