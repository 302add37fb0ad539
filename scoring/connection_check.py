"""The registry's "test connection" and the launcher's preflight: one real AttuneBench call per model.

A researcher who adds a model, or launches a run, wants to know before any paid work whether the provider
answers, and answers in the shape the replay reads. Both go through the replay core's probe
(``attunebench.replay.preflight.probe``) with the spec built exactly as a replay would (``replay_service.em_spec``:
live-mode switch, api_base host allow-list, key variable allow-list): connection, authentication, the model name
where litellm can tell, and one draft call (the judge's call for a judge) parsed as the replay parses it.
Whatever happens is reported as a result, never raised: a refusal or a provider's error is something to read,
not a 500.

Secrets: the key is read from the environment by the spec at call time and is never returned, stored or logged;
should a provider echo it in an error message or an answer, it is replaced by ``[hidden]`` before the text
leaves this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from attunebench.canonical import ConversationFile
from attunebench.replay.aio import run_sync
from attunebench.replay.llm import HIDDEN, EMSpec, load_litellm
from attunebench.replay.preflight import PROBE_TIMEOUT_S, ProbeResult, probe
from attunebench.replay.scheduler import PermanentCallError
from scoring.models import EvaluatedModel
from scoring.replay_service import ReplayRefused, em_spec, load_canonical


@dataclass(frozen=True)
class ConnectionResult:
    """What a connection test found. ``latency_ms`` is set only when the provider answered."""

    ok: bool
    summary: str
    reply: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _hide_key(message: str | None, key: str | None) -> str | None:
    """A provider's text with the key, should it be echoed back, replaced by ``[hidden]``."""
    if message and key and len(key) >= 4 and key in message:
        return message.replace(key, HIDDEN)
    return message


def _key(spec: EMSpec) -> str | None:
    try:
        return spec.api_key()
    except PermanentCallError:
        return None  # the probe reports the missing variable itself


@cache
def _synthetic_conversation() -> ConversationFile:
    """A conversation to probe with when the database holds none yet (a registry set up before any study)."""
    from attunebench.synth import synth_conversations

    return synth_conversations(1, seed=0)[0]


def probe_conversation() -> ConversationFile:
    """The first complete conversation in the database, else a synthetic one: what a probe's call is about."""
    from datasets.selection import complete_conversations

    first = complete_conversations().order_by("pk").values_list("pk", flat=True).first()
    return _synthetic_conversation() if first is None else load_canonical([first])[first]


def _probe(spec: EMSpec, conversation: ConversationFile, role: str, mode: str) -> ProbeResult:
    key = _key(spec)
    load_litellm()  # its first import takes seconds: not part of the wait on the provider
    try:
        # The provider's answer is bounded by the probe's own timeout; this bound only catches a hung loop.
        result = run_sync(probe(spec, conversation, role=role, mode=mode), 2 * PROBE_TIMEOUT_S + 30)
    except TimeoutError:
        return ProbeResult(spec.name, role, False, f"no answer within {2 * PROBE_TIMEOUT_S + 30:.0f} s")
    return dataclasses.replace(result, message=_hide_key(result.message, key) or "", reply=_hide_key(result.reply, key))


def do_test_connection(model: EvaluatedModel) -> ConnectionResult:
    """Probe ``model`` once and say how it went (see the module docstring)."""
    if model.kind == EvaluatedModel.Kind.HUMAN:
        return ConnectionResult(False, "A human rater has no connection to test: humans rate through assignments.")
    if model.kind == EvaluatedModel.Kind.OFFLINE:
        return ConnectionResult(True, "An offline baseline runs inside Attune: no provider to connect to.")
    try:
        spec = em_spec(model)
    except ReplayRefused as exc:
        return ConnectionResult(False, f"Not called: {exc}")
    result = _probe(spec, probe_conversation(), "model", "default")
    message = result.message[:1].upper() + result.message[1:]
    return ConnectionResult(
        result.ok,
        f"{message}." if not message.endswith((".", ")")) else message,
        reply=result.reply,
        latency_ms=result.latency_ms,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )


def do_preflight(
    models: Sequence[EvaluatedModel], judge: EvaluatedModel | None, conversation: ConversationFile, mode: str
) -> list[ProbeResult]:
    """A probe of every model of a launch (human raters and offline baselines need none) and of its judge."""
    results = []
    for model, role in [*((m, "model") for m in models), *([(judge, "judge")] if judge is not None else [])]:
        if model.kind != EvaluatedModel.Kind.LLM:
            continue
        try:
            spec = em_spec(model)
        except ReplayRefused as exc:
            results.append(ProbeResult(model.name, role, False, f"not called: {exc}"))
            continue
        results.append(_probe(spec, conversation, role, mode))
    return results
