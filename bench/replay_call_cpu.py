"""CPU per model call through each public path.

The fake OpenAI-compatible server runs in its own process (no latency), so
only this process's CPU is measured (``time.process_time``: user + system of
this process, the server excluded). Calls are made one after another, so the
figure is CPU per call, not contention. The paths are measured in turn for
``--rounds`` rounds and the best round of each is kept. The figures, each
after a warm-up:

- litellm_unlisted_ms  ``litellm.acompletion`` alone for a model litellm does not
                       know (what an ad-hoc ``--model`` cost before registration)
- litellm_ms           ``litellm.acompletion`` alone for a model described to it
                       with ``litellm.register_model``
- sdk_ms               the OpenAI SDK's ``chat.completions.create`` alone, as
                       ``attunebench.replay.openai_compatible`` makes it
- direct_ms            ``attunebench.replay.direct_call.chat_completion`` alone: the same
                       request on a kept-alive connection of our own, the answer read as JSON
- replay_ms            the replay's path for an ``openai/...`` model at its own
                       api_base (the direct route): ``Scheduler.submit`` +
                       ``LiteLLMBackend.complete`` (error mapping, cost) + parsing the reply
- replay_sdk_ms        the same path through the OpenAI SDK, as for a server behind a
                       proxy (and, before ``direct_call``, for every such server)
- replay_litellm_ms    the same path with ``"client": "litellm"`` (the route of
                       every other provider)
- ours_ms              replay_ms - direct_ms: the part of a call that is the replay's own code

Target: replay_ms and replay_litellm_ms <= 10 on this machine.
The machine is shared: the load average is printed with the figures.
Usage: python bench/replay_call_cpu.py [--calls 300 --rounds 3]
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from figures import figures_line
from proc_cpu import reference_loop_s

from attunebench.replay import direct_call
from attunebench.replay import prompts as P
from attunebench.replay.llm import EMSpec, LiteLLMBackend, load_litellm, register_unlisted
from attunebench.replay.openai_compatible import chat_completion
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
    parser = argparse.ArgumentParser(description="CPU per call through each public path")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the paths in turn; the best of each kept")
    parser.add_argument("--smoke", action="store_true", help="one round of 5 calls: the path, not the timing")
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.rounds = 5, 1
    process, api_base = start_subprocess()
    try:
        litellm = load_litellm()
        ctx = draft_context()
        messages = P.build_messages(ctx)
        params = {"timeout": 30.0, "temperature": 0}
        spec = EMSpec(name="fake/em", litellm_model="openai/fake-em", api_base=api_base, params=params)
        via_litellm = EMSpec(
            name="fake/em", litellm_model="openai/fake-em", api_base=api_base, params={**params, "client": "litellm"}
        )
        common = {"messages": messages, "api_base": api_base, "api_key": "NO_KEY", "timeout": 30.0}
        common |= {"num_retries": 0, "max_retries": 0, "temperature": 0}
        backend = LiteLLMBackend()
        scheduler = Scheduler(max_concurrency=8)

        async def unlisted() -> object:
            return await litellm.acompletion(model="openai/fake-unlisted-model", **common)

        async def listed() -> object:
            return await litellm.acompletion(model="openai/fake-em", **common)

        # one request, sent by the SDK route and by the direct route
        request: dict[str, Any] = {
            "api_base": api_base,
            "api_key": "NO_KEY",
            "litellm_model": "openai/fake-em",
            "messages": messages,
            "params": {"temperature": 0},
            "timeout": 30.0,
        }

        async def sdk() -> object:
            return await chat_completion(**request)

        async def direct() -> object:
            return await direct_call.chat_completion(**request)

        def replay_of(model: EMSpec, sdk_route: bool = False) -> Callable[[], Awaitable[object]]:
            direct_suits = direct_call.suits

            async def replay() -> object:
                completion = await scheduler.submit(model.provider, lambda: backend.complete(model, messages, ctx))
                return parse_reply(ctx, completion.text)

            async def through_the_sdk() -> object:
                # As for a server behind a proxy, which the direct route leaves to the OpenAI SDK.
                direct_call.suits = lambda api_base: False  # type: ignore[assignment]
                try:
                    return await replay()
                finally:
                    direct_call.suits = direct_suits  # type: ignore[assignment]

            return through_the_sdk if sdk_route else replay

        async def measure() -> list[float]:
            before = await cpu_per_call(unlisted, options.calls)
            register_unlisted(litellm, spec.litellm_model)
            paths = (listed, sdk, direct, replay_of(spec), replay_of(spec, sdk_route=True), replay_of(via_litellm))
            # Rounds of every path in turn, the best of each kept: a path measured once, first or last,
            # would take the machine's slow or fast minute for its own.
            best = [float("inf")] * len(paths)
            for _ in range(options.rounds):
                for index, call in enumerate(paths):
                    best[index] = min(best[index], await cpu_per_call(call, options.calls))
            return [before, *best]

        unlisted_ms, litellm_ms, sdk_ms, direct_ms, replay_ms, replay_sdk_ms, replay_litellm_ms = asyncio.run(measure())
    finally:
        process.kill()
        process.wait()
    load = os.getloadavg()
    reference = reference_loop_s()
    ours = replay_ms - direct_ms
    print(
        f"CPU per call, best of {options.rounds} rounds of {options.calls} sequential calls, "
        f"litellm {version('litellm')}, openai {version('openai')}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
        f"machine speed: a fixed mix of Python work (bench/proc_cpu.py) took {reference:.2f} s of CPU"
    )
    print(f"  litellm.acompletion, model unknown to litellm:       {unlisted_ms:.2f} ms/call")
    print(f"  litellm.acompletion, model registered (public API):  {litellm_ms:.2f} ms/call")
    print(f"  OpenAI SDK chat.completions.create:                  {sdk_ms:.2f} ms/call")
    print(f"  direct_call.chat_completion (our own connection):    {direct_ms:.2f} ms/call")
    print(f"  replay path, OpenAI-compatible server (direct):      {replay_ms:.2f} ms/call (target <= 10)")
    print(f"  replay path, the same server behind a proxy (SDK):   {replay_sdk_ms:.2f} ms/call")
    print(f"  replay path through litellm (client: litellm):       {replay_litellm_ms:.2f} ms/call (target <= 10)")
    print(f"  the replay's own share (direct route - call alone):  {ours:.2f} ms/call")
    print(
        figures_line(
            "replay_call_cpu",
            litellm_unlisted_ms=unlisted_ms,
            litellm_ms=litellm_ms,
            sdk_ms=sdk_ms,
            direct_ms=direct_ms,
            replay_ms=replay_ms,
            replay_sdk_ms=replay_sdk_ms,
            replay_litellm_ms=replay_litellm_ms,
            ours_ms=ours,
            load1=load[0],
            reference_loop_s=reference,
        )
    )


if __name__ == "__main__":
    main()
