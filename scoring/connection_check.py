"""The registry's "test connection": one small real call to a model, through the replay's own path.

A researcher who adds a model wants to know before launching a run whether the
provider answers. ``do_test_connection`` builds the spec exactly as a replay
would (``replay_service.em_spec``: live-mode switch, api_base host allow-list,
key variable allow-list) and calls ``LiteLLMBackend.complete`` once with a
tiny prompt and a small token limit. Whatever happens is reported as a result,
never raised: a refusal or a provider's error is something to read, not a 500.

Secrets: the key is read from the environment by the spec at call time and is
never returned, stored or logged; should a provider echo it in an error
message, it is replaced by ``[hidden]`` before the message leaves this module.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from attunebench.replay.aio import run_sync
from attunebench.replay.llm import HIDDEN, LiteLLMBackend
from attunebench.replay.prompts import CallContext
from attunebench.replay.scheduler import PermanentCallError, TransientCallError
from scoring.models import EvaluatedModel
from scoring.replay_service import ReplayRefused, em_spec

PROMPT = "This is a connection test. Reply with the single word: ok"
MAX_TOKENS = 8
TIMEOUT_S = 30.0
REPLY_SHOWN = 200


@dataclass(frozen=True)
class ConnectionResult:
    """What a connection test found. ``latency_ms`` is set only when the provider answered."""

    ok: bool
    summary: str
    reply: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _hide_key(message: str, key: str | None) -> str:
    """A provider's error text with the key, should it be echoed back, replaced by ``[hidden]``."""
    if key and len(key) >= 4 and key in message:
        return message.replace(key, HIDDEN)
    return message


def do_test_connection(model: EvaluatedModel) -> ConnectionResult:
    """Call ``model`` once with a tiny prompt and say how it went (see the module docstring)."""
    if model.kind == EvaluatedModel.Kind.HUMAN:
        return ConnectionResult(False, "A human rater has no connection to test: humans rate through assignments.")
    if model.kind == EvaluatedModel.Kind.OFFLINE:
        return ConnectionResult(True, "An offline baseline runs inside Attune: no provider to connect to.")
    try:
        spec = em_spec(model)
    except ReplayRefused as exc:
        return ConnectionResult(False, f"Not called: {exc}")
    # Small and bounded: a few output tokens, a short timeout (the registry's other parameters stay).
    spec = dataclasses.replace(spec, params={**spec.params, "max_tokens": MAX_TOKENS, "timeout": TIMEOUT_S})
    context = CallContext(
        call_type="connection_test", conversation_id="", category="", subtopic="", mode="default", turns=()
    )
    key: str | None = None
    started = time.monotonic()
    try:
        key = spec.api_key()
        completion = run_sync(
            LiteLLMBackend().complete(spec, [{"role": "user", "content": PROMPT}], context), TIMEOUT_S + 5
        )
    except (TransientCallError, PermanentCallError) as exc:
        kind = "may pass on a later try" if isinstance(exc, TransientCallError) else "will not pass by retrying"
        return ConnectionResult(False, f"The provider did not answer ({kind}): {_hide_key(str(exc), key)}")
    except TimeoutError:
        return ConnectionResult(False, f"No answer within {TIMEOUT_S:.0f} s.")
    latency_ms = round((time.monotonic() - started) * 1000)
    text = (completion.text or "").strip()
    return ConnectionResult(
        True,
        "The model answered." if text else "The model answered with an empty reply.",
        reply=_hide_key(text[:REPLY_SHOWN], key),
        latency_ms=latency_ms,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
    )
