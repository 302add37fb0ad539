"""Model specs and model access through litellm (issue 4 item 2).

``EMSpec`` is the pure description of an evaluated model or judge (what the
Django ``EvaluatedModel`` registry row holds). ``LiteLLMBackend`` calls
``litellm.acompletion`` with the spec's parameters and turns provider errors
into the scheduler's transient/permanent errors.

Choices made for speed and safety:
- ``import litellm`` happens on first use (it takes seconds), and its cost map
  is forced local (``LITELLM_LOCAL_MODEL_COST_MAP``): there is no network here.
- litellm's own retries are off (``num_retries=0``, ``max_retries=0``): the
  scheduler owns retries, so Retry-After and the global caps are respected.
- Callbacks and token counting are off (the provider returns usage), and
  litellm's own per-response pricing and logging are skipped for our calls
  (``_trim_per_call_overhead``): both showed up in our CPU profile.
- OpenAI-compatible providers go through litellm's own HTTP handler rather
  than the OpenAI SDK; one aiohttp session per event loop without litellm's
  pool tracing; litellm's request set-up runs inline for key-based providers;
  the garbage collector is tuned once litellm is imported. Each is measured
  where it is made (bench/replay_throughput.py).
- API keys are read from the environment only: a spec may name the variable
  (``params.api_key_env``) but never carry a key.
- Cost uses the spec's price override when given, else litellm's cost map; a
  model missing from the map has a null cost rather than failing the call.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import itertools
import os
import sys
import uuid
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, Final, Protocol

from attunebench.replay.prompts import CallContext
from attunebench.replay.scheduler import PermanentCallError, ProviderLimits, TransientCallError, provider_answered

BASELINE_PREFIX: Final = "baseline:"
KIND_LLM: Final = "llm"
KIND_OFFLINE: Final = "offline"

# Parameters that change the answer (part of the cache key) and are passed on.
ANSWER_PARAMS: Final = frozenset(
    {
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "top_p",
        "top_k",
        "frequency_penalty",
        "presence_penalty",
        "stop",
        "response_format",
        "reasoning_effort",
    }
)
# Parameters that only change how the call is made.
TRANSPORT_PARAMS: Final = frozenset({"timeout", "api_key_env", "api_version"})
DEFAULT_TIMEOUT_S: Final = 120.0


@dataclass(frozen=True)
class EMSpec:
    """An evaluated model (or judge) as the replay engine needs it."""

    name: str
    litellm_model: str = ""
    kind: str = KIND_LLM
    api_base: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    max_in_flight: int = 8
    rpm: int | None = None
    input_cost_per_million: float | None = None
    output_cost_per_million: float | None = None

    def __post_init__(self) -> None:
        params = dict(self.params)
        if "api_key" in params:
            raise ValueError(f"{self.name}: API keys come from the environment only; use params.api_key_env")
        unknown = set(params) - ANSWER_PARAMS - TRANSPORT_PARAMS
        if unknown:
            raise ValueError(f"{self.name}: unknown model parameters {sorted(unknown)}")
        object.__setattr__(self, "params", MappingProxyType(params))
        if self.kind == KIND_LLM and not self.litellm_model:
            object.__setattr__(self, "litellm_model", self.name)
        if self.kind not in (KIND_LLM, KIND_OFFLINE):
            raise ValueError(f"{self.name}: kind must be {KIND_LLM!r} or {KIND_OFFLINE!r}")

    @property
    def is_offline(self) -> bool:
        return self.kind == KIND_OFFLINE

    @property
    def provider(self) -> str:
        """Scheduler key: litellm's provider prefix, qualified by api_base when set.

        Two local servers both spoken to as ``openai/...`` are different
        providers with different limits.
        """
        if self.is_offline:
            return "offline"
        prefix = self.litellm_model.split("/", 1)[0] if "/" in self.litellm_model else "openai"
        return f"{prefix}@{self.api_base}" if self.api_base else prefix

    @property
    def limits(self) -> ProviderLimits:
        return ProviderLimits(max_in_flight=self.max_in_flight, rpm=self.rpm)

    def answer_params(self) -> dict[str, Any]:
        """What goes into the cache key: parameters that can change the answer."""
        return {k: v for k, v in sorted(self.params.items()) if k in ANSWER_PARAMS}

    @property
    def timeout(self) -> float:
        return float(self.params.get("timeout", DEFAULT_TIMEOUT_S))

    def api_key(self) -> str | None:
        """The key from the environment, if the spec names a variable for it.

        Without ``api_key_env`` litellm finds the provider's usual variable
        (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) itself. A local server reached
        through api_base often needs no key, but the OpenAI client insists on
        one, so a dummy key is sent there.
        """
        env = self.params.get("api_key_env")
        if env:
            value = os.environ.get(str(env))
            if not value:
                raise PermanentCallError(f"{self.name}: environment variable {env} is not set")
            return value
        if self.api_base and self.litellm_model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            return "sk-local-no-key"
        return None


def spec_from_name(name: str, **overrides: Any) -> EMSpec:
    """A spec for a bare name: ``baseline:*`` is offline, anything else a litellm model."""
    if name.startswith(BASELINE_PREFIX):
        return EMSpec(name=name, kind=KIND_OFFLINE, litellm_model=name, **overrides)
    return EMSpec(name=name, litellm_model=overrides.pop("litellm_model", name), **overrides)


@dataclass
class Completion:
    """One raw model answer and its accounting."""

    text: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class ModelBackend(Protocol):
    """Anything that answers a call: litellm, an offline baseline, a test double.

    ``ctx`` is the structured view the messages were built from; real models
    ignore it, offline baselines read it instead of parsing prompts.
    ``cacheable`` is False for backends whose answers cost nothing.
    """

    cacheable: bool

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: CallContext) -> Completion: ...


_configured = False
_lean = False  # litellm's own per-response pricing and logging are skipped for our calls
OPENAI_HTTP_HANDLER_ENV: Final = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


def _litellm() -> Any:
    """Import and configure litellm on first use (slow import; no network)."""
    global _configured, _lean
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # OpenAI and OpenAI-compatible providers through litellm's own HTTP handler
    # (the one every other provider uses) rather than the OpenAI SDK: the SDK
    # costs ~1 ms of CPU per call in request building and response parsing. An
    # explicit EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=false keeps the SDK path.
    os.environ.setdefault(OPENAI_HTTP_HANDLER_ENV, "true")
    import litellm

    if not _configured:
        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True  # e.g. seed on providers without it: dropped, not an error
        # Not turn_off_message_logging: with no callbacks nothing logs messages,
        # and that flag makes litellm deep-copy every request to redact it
        # (about 1 ms of CPU per call in our profile).
        litellm.turn_off_message_logging = False
        litellm.disable_streaming_logging = True
        litellm.disable_token_counter = True
        litellm.disable_end_user_cost_tracking = True
        litellm.logging = False
        litellm.success_callback = []
        litellm.failure_callback = []
        litellm.callbacks = []
        litellm.num_retries = 0
        if os.environ.get("ATTUNE_LITELLM_LEAN", "1") != "0":
            _lean = _trim_per_call_overhead()
        if os.environ.get("ATTUNE_GC_TUNING", "1") != "0":
            _tune_gc()
        _configured = True
    return litellm


GC_THRESHOLD0: Final = 50_000


def _tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a process that replays.

    litellm's import leaves ~400,000 long-lived objects, and each call
    allocates thousands of short-lived ones (refcounting frees nearly all of
    them). With the default threshold (700 allocations) the collector runs
    every few calls and now and then walks the whole heap: ~0.35 ms of CPU
    per call on the fake server (bench/replay_throughput.py, 15% of a call).
    Freezing what exists after the import takes it out of every later
    collection, and a higher first-generation threshold makes collections
    rare; objects in reference cycles are still collected, a little later.
    ``ATTUNE_GC_TUNING=0`` leaves the collector alone.
    """
    gc.collect()
    gc.freeze()
    threshold0, threshold1, threshold2 = gc.get_threshold()
    if 0 < threshold0 < GC_THRESHOLD0:
        gc.set_threshold(GC_THRESHOLD0, threshold1, threshold2)


# Every replay call carries a litellm_call_id with this prefix, so the trimming
# below applies to our calls only and leaves any other litellm use untouched.
# Ids are a random base plus a counter: cheap, without a uuid4
# (an os.urandom call) per request; litellm only needs them unique within a process.
CALL_ID_PREFIX: Final = "attune-replay-"
_CALL_ID_BASE: Final = uuid.uuid4().hex[:12]
_call_numbers = itertools.count(1)


def _trim_per_call_overhead() -> bool:
    """Skip two per-response steps of litellm that replay calls do not use; True if they are skipped.

    Measured on the fake server (bench/replay_throughput.py): of ~3.5 ms CPU
    per call, litellm's own response pricing and its async success-logging
    pipeline (which only feeds callbacks; we register none) take ~1 ms. We
    price calls ourselves from the provider's token usage, so for calls whose
    id carries ``CALL_ID_PREFIX`` both steps are skipped; every other call
    runs litellm's original code. If a litellm upgrade renames these methods,
    nothing is patched and calls simply cost their usual CPU.
    ``ATTUNE_LITELLM_LEAN=0`` turns this off.
    """
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:
        return False
    original_cost = getattr(Logging, "response_cost_calculator", None)
    original_success = getattr(Logging, "async_success_handler", None)
    original_claim = getattr(Logging, "claim_async_success_log", None)
    if getattr(Logging, "_attune_trimmed", False):
        return True
    if original_cost is None or original_success is None:
        return False

    def ours(logging_obj: Any) -> bool:
        return str(getattr(logging_obj, "litellm_call_id", "") or "").startswith(CALL_ID_PREFIX)

    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ours(self):
            return None
        return original_cost(self, *args, **kwargs)

    async def async_success_handler(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ours(self):
            return None
        return await original_success(self, *args, **kwargs)

    Logging.response_cost_calculator = response_cost_calculator
    Logging.async_success_handler = async_success_handler
    if original_claim is not None:

        def claim_async_success_log(self: Any, *args: Any, **kwargs: Any) -> Any:
            # "Already claimed": litellm then spawns no logging task at all for our calls.
            if ours(self):
                return False
            return original_claim(self, *args, **kwargs)

        Logging.claim_async_success_log = claim_async_success_log
    Logging._attune_trimmed = True
    return True


# Per event loop, two things that make a replay call cheaper (measured with
# bench/replay_throughput.py; each is ~10% of a call's CPU):
# - one aiohttp session, handed to litellm as ``shared_session``. litellm's own
#   session carries a connection-pool tracing hook (it warns when a request
#   waits over a second for a pooled connection); our scheduler already caps
#   requests in flight, so the pool never queues and the hook never fires.
# - a default executor that runs litellm's synchronous request set-up inline.
#   ``acompletion`` hands ``completion()`` to a worker thread only to build the
#   request; with the GIL that thread gains nothing and costs two thread
#   switches and a loop wake-up per call. Only calls whose id carries
#   INLINE_CALL_ID_PREFIX run inline, and only providers whose set-up does no
#   blocking I/O get that id; everything else still runs on threads.
# Loops are long-lived here (aio.py: one per process), like litellm's own
# loop-bound client cache.
INLINE_CALL_ID_PREFIX: Final = f"{CALL_ID_PREFIX}inline-"
# API-key HTTP providers: litellm's set-up for them only transforms the request.
# Providers that mint or refresh credentials during set-up (azure AD, vertex_ai,
# bedrock, sagemaker, watsonx, ...) are left out and keep their worker thread.
INLINE_SETUP_PROVIDERS: Final = frozenset(
    {
        "openai",
        "hosted_vllm",
        "anthropic",
        "ollama",
        "ollama_chat",
        "groq",
        "mistral",
        "deepseek",
        "together_ai",
        "fireworks_ai",
        "openrouter",
        "xai",
        "gemini",
        "deepinfra",
        "cerebras",
        "lm_studio",
    }
)


class InlineSetupExecutor(ThreadPoolExecutor):
    """A thread pool that runs litellm's set-up of marked replay calls in the caller."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        if not _inline_setup(fn):
            return super().submit(fn, *args, **kwargs)
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # as a worker thread would: the awaiting caller re-raises it
            future.set_exception(exc)
        return future


def _inline_setup(fn: Any) -> bool:
    """Is ``fn`` litellm's ``partial(context.run, partial(completion, ...))`` for a marked call?"""
    if not isinstance(fn, partial) or not fn.args or not isinstance(fn.args[0], partial):
        return False
    return str(fn.args[0].keywords.get("litellm_call_id", "")).startswith(INLINE_CALL_ID_PREFIX)


@lru_cache(maxsize=1)
def _answered_response_class() -> Any:
    import aiohttp

    class AnsweredResponse(aiohttp.ClientResponse):
        """Frees the scheduler's slots as soon as the provider's answer starts arriving."""

        async def start(self, connection: Any) -> Any:
            response = await super().start(connection)
            provider_answered()
            return response

    return AnsweredResponse


_loop_sessions: dict[asyncio.AbstractEventLoop, Any] = {}


def _loop_session() -> Any:
    """This loop's aiohttp session (and its inline set-up executor), made on first use."""
    loop = asyncio.get_running_loop()
    session = _loop_sessions.get(loop)
    if session is not None and not session.closed:
        return session
    import aiohttp

    for known in [known for known in _loop_sessions if known.is_closed()]:
        del _loop_sessions[known]
    litellm = _litellm()
    trust_env = bool(getattr(litellm, "aiohttp_trust_env", False)) or os.environ.get(
        "AIOHTTP_TRUST_ENV", ""
    ).lower() in {"1", "true", "yes"}
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=15, ttl_dns_cache=300),
        response_class=_answered_response_class(),
        cookie_jar=aiohttp.DummyCookieJar(),  # providers' cookies are never needed
        trust_env=trust_env,  # proxies from the environment only when litellm is told to use them
    )
    if not isinstance(getattr(loop, "_default_executor", None), InlineSetupExecutor):
        loop.set_default_executor(InlineSetupExecutor(thread_name_prefix="attune-litellm"))
    if not _loop_sessions:
        atexit.register(_close_sessions_at_exit)
    _loop_sessions[loop] = session
    return session


def _close_sessions_at_exit() -> None:
    """Close the sessions of loops still running (the process loop's daemon thread).

    Otherwise aiohttp reports unclosed sessions while the interpreter shuts down.
    """
    for loop, session in list(_loop_sessions.items()):
        if loop.is_running() and not session.closed:
            try:
                asyncio.run_coroutine_threadsafe(session.close(), loop).result(timeout=5)
            except (TimeoutError, RuntimeError) as exc:
                print(f"attune: could not close an HTTP session at exit: {exc}", file=sys.stderr)


@lru_cache(maxsize=256)
def _setup_runs_inline(litellm_model: str) -> bool:
    """Does litellm route this model to a provider in INLINE_SETUP_PROVIDERS?

    Asked of litellm, not read off the prefix: a bare "gemini-..." goes to vertex_ai.
    """
    try:
        provider = _litellm().get_llm_provider(model=litellm_model)[1]
    except Exception:
        return False
    return provider in INLINE_SETUP_PROVIDERS


def _call_id(spec: EMSpec) -> str:
    prefix = INLINE_CALL_ID_PREFIX if _setup_runs_inline(spec.litellm_model) else CALL_ID_PREFIX
    return f"{prefix}{_CALL_ID_BASE}-{next(_call_numbers)}"


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from retry-after-ms / Retry-After headers on a provider error."""
    headers: Mapping[str, str] | None = None
    for attribute in ("litellm_response_headers", "headers"):
        value = getattr(exc, attribute, None)
        if value:
            headers = value
            break
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    lowered = {str(k).lower(): v for k, v in dict(headers).items()}
    try:
        if "retry-after-ms" in lowered:
            return float(lowered["retry-after-ms"]) / 1000
        if "retry-after" in lowered:
            return float(lowered["retry-after"])
    except (TypeError, ValueError):
        return None  # an HTTP-date Retry-After: fall back to our own backoff
    return None


def classify_error(exc: BaseException) -> Exception:
    """Map a litellm/provider exception to TransientCallError or PermanentCallError."""
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if status == 429 or name == "RateLimitError":
        return TransientCallError("429", str(exc)[:300], retry_after=_retry_after(exc), status=429)
    if name in {"Timeout", "APITimeoutError", "TimeoutError"} or status == 408:
        return TransientCallError("timeout", str(exc)[:300], status=status)
    if isinstance(status, int) and 500 <= status < 600:
        return TransientCallError(str(status), str(exc)[:300], retry_after=_retry_after(exc), status=status)
    if name in {"APIConnectionError", "ServiceUnavailableError", "InternalServerError", "ConnectionError"}:
        return TransientCallError("connection", str(exc)[:300], status=status)
    return PermanentCallError(f"{name}: {str(exc)[:300]}")


class LiteLLMBackend:
    """Calls any provider litellm supports."""

    cacheable = True

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: CallContext) -> Completion:
        litellm = _litellm()
        kwargs: dict[str, Any] = {
            "litellm_call_id": _call_id(spec),
            "model": spec.litellm_model,
            "messages": messages,
            "timeout": spec.timeout,
            "num_retries": 0,
            "max_retries": 0,
            "shared_session": _loop_session(),
            **spec.answer_params(),
        }
        if spec.api_base:
            kwargs["api_base"] = spec.api_base
        if not _lean and (spec.input_cost_per_million is not None or spec.output_cost_per_million is not None):
            # Only when litellm prices responses itself (ATTUNE_LITELLM_LEAN=0): the given
            # price spares it the slow, failing price-map lookup for unlisted models.
            # Otherwise we price the call and these would only make litellm build
            # a per-call price entry nobody reads.
            kwargs["input_cost_per_token"] = (spec.input_cost_per_million or 0.0) / 1e6
            kwargs["output_cost_per_token"] = (spec.output_cost_per_million or 0.0) / 1e6
        if spec.params.get("api_version"):
            kwargs["api_version"] = spec.params["api_version"]
        key = spec.api_key()
        if key:
            kwargs["api_key"] = key
        try:
            response = await litellm.acompletion(**kwargs)
        except (TransientCallError, PermanentCallError):
            raise
        except Exception as exc:
            raise classify_error(exc) from exc
        choice = response.choices[0] if response.choices else None
        text = getattr(getattr(choice, "message", None), "content", None)
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self._cost(spec, response, prompt_tokens, completion_tokens),
        )

    def _cost(self, spec: EMSpec, response: Any, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The call's price from ``price_per_token``; unknown prices give None, never an error.

        When litellm priced the response itself (``ATTUNE_LITELLM_LEAN=0``, no
        own prices) its figure is used, since it knows tiered and cached-token
        prices that a per-token rate does not.
        """
        if spec.input_cost_per_million is None and spec.output_cost_per_million is None:
            hidden = getattr(response, "_hidden_params", None) or {}
            if isinstance(hidden.get("response_cost"), (int, float)):
                return float(hidden["response_cost"])
        return call_cost(spec, prompt_tokens, completion_tokens)


def price_per_token(spec: EMSpec) -> tuple[float, float] | None:
    """(input, output) USD per token of a model, or None when no price is known.

    The one price lookup, for the cost of calls made and for dry-run
    estimates alike: the spec's own prices (the registry's override; a missing
    side counts as free), offline baselines free, else litellm's price list
    under the full model name or the name without its provider prefix.
    """
    if spec.input_cost_per_million is not None or spec.output_cost_per_million is not None:
        return ((spec.input_cost_per_million or 0.0) / 1e6, (spec.output_cost_per_million or 0.0) / 1e6)
    if spec.is_offline:
        return (0.0, 0.0)
    model_cost = _litellm().model_cost
    entry = model_cost.get(spec.litellm_model) or model_cost.get(spec.litellm_model.split("/", 1)[-1])
    if not entry or entry.get("input_cost_per_token") is None or entry.get("output_cost_per_token") is None:
        return None
    return (float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"]))


def call_cost(spec: EMSpec, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for a call of this size to ``spec``'s model, or None when its price is unknown."""
    price = price_per_token(spec)
    if price is None:
        return None
    return prompt_tokens * price[0] + completion_tokens * price[1]
