"""A one-turn draft call, the smallest real request the replay sends: shared by the tests that call a provider."""

from __future__ import annotations

from attunebench.replay import prompts as P


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
