"""Preflight: one probe per model (and judge) before any paid work, failing in seconds with what and where.

A probe checks, in order and stopping at the first problem:

1. the model name, where litellm can tell: a model without an ``api_base`` of its own must be one whose
   provider litellm can infer (``model "nosuchmodel" is not known to litellm; did you mean …?``);
2. the key, where litellm can tell: the variable the provider needs is set (``OPENAI_API_KEY is not set``);
3. one real AttuneBench call, the first turn's draft (the judge's call for a judge), sent once with a short
   timeout and no retries: its transport error in one line (``connection refused at http://…/v1``,
   ``401 from api.openai.com: check OPENAI_API_KEY``), or, when it answers, whether the answer has the shape
   the replay parses (``the answer to a draft call has no "response" field (first 200 characters: …)``).

The CLI, the run launcher, the API and the registry's "test connection" all call ``probe``. Pure: no Django.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from attunebench.canonical import ConversationFile
from attunebench.replay import prompts as P
from attunebench.replay.failures import CLIENT_ERROR, UNUSABLE, never_connected, reason_of
from attunebench.replay.llm import EMSpec, LiteLLMBackend, ModelBackend, load_litellm
from attunebench.replay.parsing import ReplyParseError, extract_json, parse_reply
from attunebench.replay.protocol import ConversationView, ReplayConfig
from attunebench.replay.scheduler import PermanentCallError, TransientCallError

#: Seconds a probe waits for its one answer: a provider slower than this is reported, not waited on.
PROBE_TIMEOUT_S: Final = 30.0
#: Characters of an unusable answer shown in the message.
SHOWN_CHARS: Final = 200
#: The draft the judge's probe rates (the judge's call needs one).
PROBE_DRAFT: Final = "That sounds hard. What part of it weighs on you most right now?"

# Where litellm sends a provider's calls when the model has no api_base: named in messages.
_PROVIDER_HOSTS: Final = {
    "openai": "api.openai.com",
    "anthropic": "api.anthropic.com",
    "gemini": "generativelanguage.googleapis.com",
    "mistral": "api.mistral.ai",
    "groq": "api.groq.com",
    "openrouter": "openrouter.ai",
    "deepseek": "api.deepseek.com",
    "together_ai": "api.together.xyz",
    "xai": "api.x.ai",
    "fireworks_ai": "api.fireworks.ai",
    "cohere": "api.cohere.ai",
}


@dataclass(frozen=True)
class ProbeResult:
    """What a probe found. ``message`` is the one line to show; ``reason`` the failure's kind when it failed."""

    model: str
    role: str
    ok: bool
    message: str
    reason: str | None = None
    reply: str | None = None
    latency_ms: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def line(self) -> str:
        """The probe in one line, as the CLI prints it."""
        who = f"judge {self.model}" if self.role == "judge" else self.model
        return f"{who}: {self.message}"


def provider_of(spec: EMSpec) -> str:
    """litellm's provider name for ``spec`` (its prefix, else what litellm infers), "" when it cannot tell."""
    if "/" in spec.litellm_model:
        return spec.litellm_model.split("/", 1)[0]
    try:
        return str(load_litellm().get_llm_provider(spec.litellm_model)[1])
    except Exception:  # litellm raises its BadRequestError for a name it cannot place
        return ""


def where(spec: EMSpec) -> str:
    """The host a model's calls go to, as messages name it."""
    if spec.api_base:
        return urlsplit(spec.api_base).netloc or spec.api_base
    provider = provider_of(spec)
    return _PROVIDER_HOSTS.get(provider, provider or spec.litellm_model)


def live_reason(spec: EMSpec) -> str:
    """Why ``spec`` counts as live (its calls may be paid), for the ATTUNE_ALLOW_LIVE_MODELS message."""
    if spec.api_base:
        return f"its --api-base {spec.api_base} is not on this machine"
    return f"it has no --api-base, so litellm sends its calls to {where(spec)}, a provider that may charge for them"


def unknown_model_problem(spec: EMSpec) -> str | None:
    """Why litellm cannot call ``spec``'s model by name, with the closest names it knows; None when it can.

    Only for a model without an api_base: a server of one's own may serve any name, and says so itself.
    """
    if spec.is_offline or spec.api_base:
        return None
    litellm = load_litellm()
    name = spec.litellm_model
    if name in litellm.model_cost or provider_of(spec):
        return None
    close = difflib.get_close_matches(name, list(litellm.model_cost), n=3, cutoff=0.6)
    hint = (
        f"did you mean {', '.join(close)}?"
        if close
        else "give it a provider prefix (openai/NAME, anthropic/NAME, ...) or --api-base for a server of your own"
    )
    return f'model "{name}" is not known to litellm; {hint}'


def key_variable(spec: EMSpec) -> str | None:
    """The environment variable holding ``spec``'s key: the one it names, else the one litellm reads for it."""
    if spec.params.get("api_key_env"):
        return str(spec.params["api_key_env"])
    if spec.api_base or spec.is_offline:
        return None
    try:
        wanted = load_litellm().validate_environment(model=spec.litellm_model)
    except Exception:  # litellm cannot tell for this provider
        return None
    missing = wanted.get("missing_keys") or []
    return str(missing[0]) if missing else None


def missing_key_problem(spec: EMSpec) -> str | None:
    """The key litellm needs for a provider's own endpoint, when it is not set."""
    if spec.is_offline or spec.api_base or spec.params.get("api_key_env"):
        return None
    try:
        wanted = load_litellm().validate_environment(model=spec.litellm_model)
    except Exception:
        return None
    missing = [str(k) for k in wanted.get("missing_keys") or []]
    if wanted.get("keys_in_environment") or not missing:
        return None
    return f"{' and '.join(missing)} is not set: litellm needs it to call {spec.litellm_model} at {where(spec)}"


def describe_call_error(exc: BaseException, spec: EMSpec, timeout: float) -> str:
    """A transport error of the probe's call in one line: what happened and where."""
    host = where(spec)
    address = spec.api_base or host
    if isinstance(exc, TransientCallError) and exc.kind == "connection":
        text = str(exc).lower()
        if never_connected(exc) and ("refused" in text or _caused_by(exc, ConnectionRefusedError)):
            return f"connection refused at {address}"
        if never_connected(exc):
            return f"could not connect to {address}: {_first_line(str(exc))}"
        return f"the connection to {address} broke: {_first_line(str(exc))}"
    status = getattr(exc, "status", None)
    if isinstance(exc, TransientCallError) and exc.kind == "timeout":
        return f"no answer from {host} within {timeout:.0f} s"
    if status in (401, 403):
        variable = key_variable(spec)
        advice = (
            f"check {variable}"
            if variable
            else "the server wants a key, and a model at its own api_base is sent one only when its registry "
            'params name the variable ("api_key_env")'
        )
        return f"{status} from {host}: {advice}"
    if status is not None:
        return f"{status} from {host}: {_first_line(str(exc))}"
    return f"{host}: {_first_line(str(exc))}"


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return True
        stack.extend((current.__cause__, current.__context__))
    return False


def _first_line(text: str) -> str:
    return " ".join(text.split())[:SHOWN_CHARS]


def describe_unusable(call_type: str, error: ReplyParseError, text: str | None) -> str:
    """An answer the replay could not use, with what was wrong and the first characters of it."""
    message = str(error)
    field = re.search(r'"(\w+)"', message)
    try:
        answer = extract_json(text)
    except ReplyParseError:
        answer = None
    if field and answer is not None and field.group(1) not in answer:
        what = f'has no "{field.group(1)}" field'
    else:
        what = f"is not usable ({message})"
    shown = (text or "")[:SHOWN_CHARS]
    return f"the answer to a {call_type} call {what} (first {SHOWN_CHARS} characters: {shown!r})"


async def probe(
    spec: EMSpec,
    conversation: ConversationFile,
    *,
    role: str = "model",
    mode: str = "default",
    backend: ModelBackend | None = None,
    timeout: float = PROBE_TIMEOUT_S,
) -> ProbeResult:
    """One probe of ``spec`` (see the module docstring) with the first turn of ``conversation``."""
    if spec.is_offline:
        return ProbeResult(spec.name, role, True, "an offline baseline runs inside Attune: nothing to connect to")
    for problem in (unknown_model_problem(spec), missing_key_problem(spec)):
        if problem:
            return ProbeResult(spec.name, role, False, problem, CLIENT_ERROR)
    view = ConversationView(conversation, ReplayConfig(mode=mode))
    ctx = view.judge(0, PROBE_DRAFT) if role == "judge" else view.draft(0)
    messages = P.build_messages(ctx)
    bounded = dataclasses.replace(spec, params={**spec.params, "timeout": min(spec.timeout, timeout)})
    started = time.monotonic()
    try:
        completion = await (backend or LiteLLMBackend()).complete(bounded, messages, ctx)
    except (TransientCallError, PermanentCallError) as exc:
        return ProbeResult(spec.name, role, False, describe_call_error(exc, spec, timeout), reason_of(exc))
    latency_ms = round((time.monotonic() - started) * 1000)
    answered = ProbeResult(
        spec.name,
        role,
        True,
        f"answered a {ctx.call_type} call in the expected format ({latency_ms} ms)",
        reply=(completion.text or "")[:SHOWN_CHARS],
        latency_ms=latency_ms,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
    )
    try:
        parse_reply(ctx, completion.text)
    except ReplyParseError as exc:
        return dataclasses.replace(
            answered, ok=False, message=describe_unusable(ctx.call_type, exc, completion.text), reason=UNUSABLE
        )
    return answered


async def preflight(
    em: EMSpec, judge: EMSpec | None, conversation: ConversationFile, mode: str = "default"
) -> list[ProbeResult]:
    """A probe of the model and of its judge (if any), side by side."""
    import asyncio

    jobs = [probe(em, conversation, mode=mode)]
    if judge is not None:
        jobs.append(probe(judge, conversation, role="judge"))
    return list(await asyncio.gather(*jobs))
