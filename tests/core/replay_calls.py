"""What the tests that call a provider share: the smallest real request the replay sends (a one-turn draft
call), and the three routes an OpenAI-compatible server's calls can take."""

from __future__ import annotations

import pytest

from attunebench.replay import direct_call
from attunebench.replay import prompts as P
from attunebench.replay.aio import run_sync
from attunebench.replay.llm import Completion, EMSpec, LiteLLMBackend
from attunebench.replay.scheduler import Scheduler

#: Each route's model parameters: none (the direct route, the default for ``openai/...`` at an api_base of its
#: own: our own HTTP connection, or the OpenAI SDK for a server it does not suit), or litellm asked for by name.
ROUTES: dict[str, dict[str, str]] = {"direct": {}, "openai-sdk": {}, "litellm": {"client": "litellm"}}


def take_route(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The model parameters of route ``name``. The OpenAI SDK's is the direct route's for a server its own
    connections do not suit (one behind a proxy: ``direct_call.suits``), which ``monkeypatch`` makes every
    server for the test."""
    if name == "openai-sdk":
        monkeypatch.setattr(direct_call, "suits", lambda api_base: False)
    return ROUTES[name]


def draft_context() -> P.CallContext:
    """Turn 1 of a work conversation, asking for the EM's draft reply."""
    return P.CallContext(
        call_type=P.DRAFT,
        conversation_id="c1",
        category="Work",
        subtopic="Stress and burnout",
        mode="default",
        turns=(P.VisibleTurn(1, "I had a rough day at work.", None),),
        turn_number=1,
    )


def draft_call(spec: EMSpec, scheduler: Scheduler) -> Completion:
    """One draft call to ``spec`` through ``scheduler`` (its retries and limits), as the replay makes it."""
    ctx = draft_context()
    backend = LiteLLMBackend()
    return run_sync(scheduler.submit(spec.provider, lambda: backend.complete(spec, P.build_messages(ctx), ctx)))
