"""Model specs and model access through litellm.

``EMSpec`` is the pure description of an evaluated model or judge (what the
Django ``EvaluatedModel`` registry row holds). ``LiteLLMBackend`` calls
``litellm.acompletion`` with the spec's parameters (or, for a model on an
OpenAI-compatible server of its own that litellm has no rules for, the direct
route: ``uses_openai_sdk``, ``direct_call``) and turns provider errors into the
scheduler's transient/permanent errors.

Choices:
- litellm is used through its public API only: ``litellm.acompletion`` with
  documented arguments and a few documented module settings. No internals are
  patched, so a litellm upgrade within the pinned range cannot silently change
  what a call does. Its per-call CPU (about 5 ms here, bench/replay_call_cpu.py)
  is small next to calls that take seconds, but not next to a local server's
  fraction of a second at 64 calls in flight: that is why the OpenAI SDK route
  exists (``attunebench.replay.openai_compatible``). A model litellm does not list is
  described to it once with the public ``litellm.register_model`` (provider and
  mode, no price), so it stops searching its price list and warning per call.
- ``import litellm`` happens on first use (it takes seconds), and its cost map
  is forced local (``LITELLM_LOCAL_MODEL_COST_MAP``): there is no network here.
- litellm's own retries are off (``num_retries=0``, ``max_retries=0``): the
  scheduler owns retries, so Retry-After and the global caps are respected.
- API keys are read from the environment only: a spec may name the variable
  (``params.api_key_env``) but never carry a key, and only a variable on the
  allow-list of provider key names (``allowed_key_env``); the application's own
  secrets (``ATTUNE_*``, ``SECRET*``, ``DATABASE_URL``, ``REDIS_URL``) never,
  whatever a list says. A model served at its own ``api_base`` gets that named
  key or the placeholder ``NO_KEY``, never litellm's fallback to an ambient
  provider key, so a host chosen in the registry cannot collect one.
- Cost is the one pricing rule of ``attunebench.pricing``: litellm's own cost
  calculation over the provider's token usage (prompt tokens served from the
  provider's prompt cache at their rate), the spec's price override when given;
  a model missing from litellm's price list has a null cost rather than failing
  the call.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol

from attunebench import pricing
from attunebench.pricing import PriceOverride
from attunebench.replay import direct_call, openai_compatible, paced_stream
from attunebench.replay.cache import make_key, normalise_endpoint
from attunebench.replay.failures import never_connected, retry_after_s
from attunebench.replay.prompts import CallContext
from attunebench.replay.scheduler import PermanentCallError, ProviderLimits, TransientCallError

log = logging.getLogger("attune.replay")

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
TRANSPORT_PARAMS: Final = frozenset({"timeout", "api_key_env", "api_version", "client"})
#: Values of the ``client`` parameter: ``litellm`` sends even an OpenAI-compatible server's calls through litellm.
CLIENT_CHOICES: Final = ("litellm",)
DEFAULT_TIMEOUT_S: Final = 120.0

# The variables a model may name as its key when no other list is configured:
# the usual providers' key variables, as litellm reads them.
DEFAULT_PROVIDER_KEY_ENV: Final = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "TOGETHERAI_API_KEY",
    "COHERE_API_KEY",
    "AZURE_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "FIREWORKS_AI_API_KEY",
)
# Never a model's key, even when listed: the application's own secrets and connections.
NEVER_KEY_ENV_PREFIXES: Final = ("ATTUNE_", "SECRET")
NEVER_KEY_ENV: Final = frozenset({"DATABASE_URL", "REDIS_URL"})
# The key sent to a model's own api_base when it names no key variable.
NO_KEY: Final = "none"
# Parameter names that would hold a secret itself rather than name where one is.
SECRET_PARAM_WORDS: Final = ("api_key", "secret", "password", "token")
HIDDEN: Final = "[hidden]"


def never_a_key_env(name: str) -> bool:
    """Whether ``name`` is one of the application's own secrets, which no model may read."""
    upper = name.upper()
    return upper in NEVER_KEY_ENV or upper.startswith(NEVER_KEY_ENV_PREFIXES)


def key_env_problem(name: object, allowed: Collection[str]) -> str | None:
    """Why ``name`` may not be read as a model's API key, or None when it may."""
    if not isinstance(name, str) or not name:
        return f"api_key_env must be the name of an environment variable, not {name!r}"
    if never_a_key_env(name):
        return f"api_key_env {name!r} is one of the application's own secrets and is never sent to a model"
    if name not in allowed:
        return f"api_key_env {name!r} is not a provider key variable; allowed: {', '.join(sorted(allowed))}"
    return None


def _is_secret_param(key: str) -> bool:
    lowered = key.lower()
    if lowered == "api_key_env" or lowered in ("max_tokens", "max_completion_tokens"):
        return False
    return any(word in lowered for word in SECRET_PARAM_WORDS)


def params_problem(params: Mapping[str, Any], allowed_key_env: Collection[str]) -> str | None:
    """Why a model's ``params`` are refused (a stored secret, an unknown name, a key variable off the list)."""
    secrets = sorted(k for k in params if _is_secret_param(str(k)))
    if secrets:
        return (
            f"{', '.join(secrets)}: API keys come from the environment only, never stored with a model; "
            "name the variable in api_key_env"
        )
    unknown = set(params) - ANSWER_PARAMS - TRANSPORT_PARAMS
    if unknown:
        return f"unknown model parameters {sorted(unknown)}"
    if "client" in params and params["client"] not in CLIENT_CHOICES:
        return f"client must be one of {', '.join(CLIENT_CHOICES)}, not {params['client']!r}"
    if "api_key_env" in params:
        return key_env_problem(params["api_key_env"], allowed_key_env)
    return None


def scrub_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` for display: anything that looks like a stored secret is replaced by ``HIDDEN``."""
    return {k: (HIDDEN if _is_secret_param(str(k)) else v) for k, v in params.items()}


@dataclass(frozen=True)
class EMSpec:
    """An evaluated model (or judge) as the replay engine needs it."""

    name: str
    litellm_model: str = ""
    kind: str = KIND_LLM
    api_base: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # None: no cap of its own, the caller's concurrency is the ceiling (a model outside the registry).
    max_in_flight: int | None = None
    rpm: int | None = None
    input_cost_per_million: float | None = None
    output_cost_per_million: float | None = None
    allowed_key_env: frozenset[str] = frozenset(DEFAULT_PROVIDER_KEY_ENV)
    # Which repeat of a run this is (0 the first): repeats get answers of their own, to measure sampling variance.
    repeat: int = 0

    def __post_init__(self) -> None:
        params = dict(self.params)
        problem = params_problem(params, self.allowed_key_env)
        if problem:
            raise ValueError(f"{self.name}: {problem}")
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
    def openai_compatible_server(self) -> bool:
        """Whether the model is ``openai/...`` at an ``api_base`` of its own, an OpenAI-compatible server, and
        not sent through litellm by name (``"client": "litellm"``): ``uses_openai_sdk`` decides the route."""
        return (
            not self.is_offline
            and bool(self.api_base)
            and self.litellm_model.startswith("openai/")
            and self.params.get("client") != "litellm"
        )

    @property
    def limits(self) -> ProviderLimits:
        return ProviderLimits(max_in_flight=self.max_in_flight, rpm=self.rpm)

    def answer_params(self) -> dict[str, Any]:
        """What goes into the cache key: parameters that can change the answer."""
        return {k: v for k, v in sorted(self.params.items()) if k in ANSWER_PARAMS}

    def cache_key(self, messages: list[dict[str, Any]], prompt_version: str) -> str:
        """The call cache's name for asking this model ``messages``: model, answer parameters, endpoint, repeat."""
        endpoint = normalise_endpoint(self.api_base)
        return make_key(self.litellm_model, self.answer_params(), messages, prompt_version, endpoint, self.repeat)

    @property
    def timeout(self) -> float:
        return float(self.params.get("timeout", DEFAULT_TIMEOUT_S))

    def api_key(self) -> str | None:
        """The key from the environment, if the spec names a variable for it.

        The name is checked again here, at call time, against the allow-list:
        whatever path built the spec, no other variable is ever read. Without
        ``api_key_env`` litellm finds the provider's usual variable
        (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) for the provider's own
        endpoint; a model at its own api_base gets ``NO_KEY`` instead, so
        litellm's fallback cannot send an ambient provider key to that host.
        """
        env = self.params.get("api_key_env")
        if env is not None:
            problem = key_env_problem(env, self.allowed_key_env)
            if problem:
                raise PermanentCallError(f"{self.name}: {problem}", sent=False)
            value = os.environ.get(str(env))
            if not value:
                raise PermanentCallError(f"{self.name}: environment variable {env} is not set", sent=False)
            return value
        if self.api_base:
            return NO_KEY
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
# Models outside litellm's price list that ``register_unlisted`` described to it:
# their entry carries no price, and ``price_per_token`` must not read one there.
_registered_unlisted: set[str] = set()


# litellm's loggers come with a handler of their own, so each of their lines was written twice (that
# handler's format, then the root logger's): they give it up and leave the writing to the application.
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def imported_litellm() -> Any:
    """litellm, imported (slow: seconds of CPU the first time), its loggers writing through the root logger's
    handlers only. Changes none of litellm's settings: :func:`load_litellm` configures it for replays."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    for name in LITELLM_LOGGERS:
        named = logging.getLogger(name)
        for handler in list(named.handlers):
            named.removeHandler(handler)
        named.propagate = True
    return litellm


def load_litellm() -> Any:
    """Import and configure litellm on first use (slow import; no network).

    Only litellm's documented module settings are touched.
    """
    global _configured
    litellm = imported_litellm()

    if not _configured:
        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True  # e.g. seed on providers without it: dropped, not an error
        litellm.num_retries = 0  # the scheduler owns retries
        litellm.success_callback = []
        litellm.failure_callback = []
        litellm.callbacks = []
        _configured = True
    return litellm


def register_unlisted(litellm: Any, model: str) -> None:
    """Describe a model missing from litellm's price list to litellm, once per process.

    Why: for a model it does not know (an ad-hoc ``--model openai/... --api-base``),
    litellm searches its price list and logs a warning on every call, a few ms of
    CPU each. ``litellm.register_model`` (public, documented) gives it an entry to
    find instead: provider and mode only, no price, so costs still come from
    ``price_per_token`` (the registry's override, else unknown).
    """
    if model in _registered_unlisted or model in litellm.model_cost or model.split("/", 1)[-1] in litellm.model_cost:
        return  # known under its full name or without its provider prefix
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    litellm.register_model({model: {"litellm_provider": provider, "mode": "chat"}})
    _registered_unlisted.add(model)


#: The model a warm-up goes through when no model of the run is known yet (an OpenAI-compatible one, the
#: path most providers take); it is never sent anywhere.
WARM_UP_MODEL: Final = "openai/attune-warm-up"


async def warm_up(specs: Collection[EMSpec | None] | None = None) -> None:
    """One mocked call through litellm per model of ``specs`` (None: one generic one, for a process that does
    not know its models yet), in the event loop that will make the calls. Offline and absent specs need
    none: a run of only those loads nothing.

    Why: litellm builds much of what a call needs on the first one, about half a second of CPU here
    (bench/replay_throughput.py: with 16 calls sent at once per process, their answers all waited
    behind it). A ``mock_response`` (litellm's documented test answer) goes through the same request
    handling without sending anything, so the cost falls before the first request, in start-up.
    In the loop that will make the calls: litellm's background logging is bound to its event loop.
    A warm-up that fails only leaves the first call slower: it is logged, and the real calls report
    whatever is wrong. Models on the direct route (``uses_openai_sdk``) need no litellm: their own
    connections have only their TLS settings to make (``paced_stream.warm_up``); one behind a proxy,
    which goes through the OpenAI SDK, gets the SDK's own warm-up (``openai_compatible.warm_up``), as does
    a process that does not know its models.
    """
    models: set[tuple[str, str | None]]
    if specs is None:
        models = {(WARM_UP_MODEL, None)}
    else:
        models = {
            (s.litellm_model, s.api_base or None)
            for s in specs
            if s is not None and not s.is_offline and not uses_openai_sdk(s)
        }
    direct = [s for s in specs or () if s is not None and uses_openai_sdk(s)]
    if specs is None or any(not direct_call.suits(str(s.api_base)) for s in direct):
        try:
            await openai_compatible.warm_up()
        except Exception as exc:  # an optimisation only, as below
            log.warning("OpenAI SDK warm-up failed (the first call will be slower): %s", exc)
    paced_stream.warm_up(str(s.api_base) for s in direct if direct_call.suits(str(s.api_base)))
    if not models:
        return
    litellm = load_litellm()
    for model, api_base in sorted(models, key=str):
        try:
            register_unlisted(litellm, model)
            await litellm.acompletion(
                model=model,
                messages=[{"role": "user", "content": "warm-up"}],
                mock_response="ok",
                api_base=api_base,
                num_retries=0,
            )
        except Exception as exc:  # an optimisation only: the replay goes on without it
            log.warning("litellm warm-up of %s failed (the first call will be slower): %s", model, exc)


#: A name litellm knows nothing about: what it sends for such a model is the request as given.
_GENERIC_MODEL: Final = "attune-generic-model"
_uses_sdk: dict[str, bool] = {}
#: The file ``uses_openai_sdk`` keeps its answers in across processes (``remember_routes_in``); None keeps none.
_routes_file: Path | None = None


def remember_routes_in(path: Path | None) -> None:
    """Keep ``uses_openai_sdk``'s answers in ``path``, per installed litellm, across processes.

    Why: the answer is litellm's own (its price list and its parameter rules), and asking costs its import,
    seconds of CPU; a process that calls the model through the OpenAI SDK otherwise never needs litellm. With
    the answer kept, a command that evaluates a model again sends its first request without importing it.
    The answers are kept per litellm installation (its ``__init__`` file's size and modification time), so an
    upgraded litellm, whose rules may differ, is asked again.
    """
    global _routes_file
    _routes_file = path


def _litellm_installation() -> str | None:
    """What identifies the installed litellm without importing it, or None when it is not installed."""
    import importlib.util

    found = importlib.util.find_spec("litellm")
    if found is None or not found.origin:
        return None
    stat = os.stat(found.origin)
    return f"{found.origin}:{stat.st_size}:{stat.st_mtime_ns}"


def _kept_routes(installation: str) -> dict[str, bool]:
    if _routes_file is None:
        return {}
    try:
        data = json.loads(_routes_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none kept yet, or a damaged file: asked again and rewritten
    if not isinstance(data, dict) or data.get("litellm") != installation or not isinstance(data.get("routes"), dict):
        return {}
    return {str(k): v for k, v in data["routes"].items() if isinstance(v, bool)}


def _keep_route(installation: str, model: str, sdk: bool) -> None:
    if _routes_file is None:
        return
    routes = {**_kept_routes(installation), model: sdk}
    try:
        _routes_file.parent.mkdir(parents=True, exist_ok=True)
        scratch = _routes_file.with_name(f"{_routes_file.name}.{os.getpid()}.tmp")
        scratch.write_text(json.dumps({"litellm": installation, "routes": routes}, sort_keys=True), encoding="utf-8")
        os.replace(scratch, _routes_file)  # whole or not at all: a reader never sees half a file
    except OSError as exc:  # an optimisation only: the next process asks litellm again
        log.warning("could not keep the call route of %s in %s: %s", model, _routes_file, exc)


def uses_openai_sdk(spec: EMSpec) -> bool:
    """Whether ``spec``'s calls go through the OpenAI SDK (``attunebench.replay.openai_compatible``) rather
    than litellm: an OpenAI-compatible server of the model's own, serving a model litellm treats like any
    unknown one (not in its list, the same supported parameters as a made-up name), so that litellm would
    send it the request as given and the SDK sends the same. A model litellm knows, or whose name litellm
    reads as a family with rules of its own (``gpt-5*``: parameters renamed or dropped), stays with litellm,
    which applies them.
    """
    if not spec.openai_compatible_server:
        return False
    model = spec.litellm_model
    if model in _uses_sdk:
        return _uses_sdk[model]
    if route_without_litellm(model):
        _uses_sdk[model] = True
        return True
    installation = _litellm_installation() if _routes_file is not None else None
    kept = _kept_routes(installation).get(model) if installation else None
    if kept is not None:
        _uses_sdk[model] = kept
    else:
        _uses_sdk[model] = route_by_litellm(model)
        if installation:
            _keep_route(installation, model, _uses_sdk[model])
    return _uses_sdk[model]


def route_by_litellm(model: str) -> bool:
    """litellm's own answer for ``openai/<name>`` at a server of its own (imports litellm: seconds of CPU): the
    direct route when litellm does not list the model and gives it the parameters of a made-up name."""
    litellm = load_litellm()
    served = openai_compatible.served_model_name(model)
    listed = _listed_by(litellm, model, served)

    def supported(name: str) -> set[str]:
        return set(litellm.get_supported_openai_params(model=name, custom_llm_provider="openai") or ())

    return not listed and supported(served) == supported(_GENERIC_MODEL)


def _listed_by(litellm: Any, model: str, served: str) -> bool:
    """Whether litellm's price list names the model (as given or as served), not counting the models Attune
    described to it itself (``register_unlisted``: no price, so not listed)."""
    return any(n in litellm.model_cost and n not in _registered_unlisted for n in (model, served))


#: Parts of a served name that litellm's OpenAI rules read as a family with rules of its own (``gpt-*``:
#: ``gpt-4``, ``gpt-5``, ...; ``o<digit>``: the o-series), or as another endpoint (``responses/``).
_FAMILY_MARKERS: Final = re.compile(r"gpt|(^|/)o\d|responses/", re.IGNORECASE)
#: litellm's packaged price list: its ``model_cost`` when ``LITELLM_LOCAL_MODEL_COST_MAP`` is true.
_LITELLM_PRICE_FILE: Final = "model_prices_and_context_window_backup.json"


def route_without_litellm(model: str) -> bool:
    """True when litellm's answer (``route_by_litellm``) is known to be the direct route without importing it;
    False means only litellm can say.

    The rule, for litellm's local price list (``LITELLM_LOCAL_MODEL_COST_MAP`` true, as ``attune`` sets it):
    a name that appears nowhere in that list (not even quoted inside an entry) is not listed, so litellm's
    OpenAI rules pick a model-specific configuration only by the name's form; a name with none of the forms
    those rules look for (``_FAMILY_MARKERS``) gets the parameters of a made-up name. Anything else goes to
    litellm. ``tests/core/test_replay_route_rule.py`` checks the two agree on names of every kind.
    """
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").lower() != "true":
        return False  # litellm fetches its price list from the network: only it knows what is listed
    served = openai_compatible.served_model_name(model)
    if not served or _FAMILY_MARKERS.search(served):
        return False
    litellm = sys.modules.get("litellm")
    if litellm is not None:  # loaded already: its own list, with the models registered with it since
        return not _listed_by(litellm, model, served)
    prices = _litellm_price_list()
    return prices is not None and not any(json.dumps(n, ensure_ascii=False).encode() in prices for n in {model, served})


@functools.cache
def _litellm_price_list() -> bytes | None:
    """The bytes of litellm's packaged price list, read once per process; None when there is none to read."""
    import importlib.util

    found = importlib.util.find_spec("litellm")
    if found is None or not found.origin:
        return None
    try:
        return (Path(found.origin).parent / _LITELLM_PRICE_FILE).read_bytes()
    except OSError:
        return None


def needs_litellm(spec: EMSpec | None) -> bool:
    """Whether calling ``spec``'s model goes through litellm: a live model not on the OpenAI SDK route."""
    return spec is not None and not spec.is_offline and not (spec.openai_compatible_server and uses_openai_sdk(spec))


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from retry-after-ms / Retry-After headers on a provider error.

    litellm's exceptions carry the provider's HTTP response (``response``, a
    documented attribute, as on the OpenAI SDK's errors they subclass, which
    the OpenAI-compatible route raises as they are).
    """
    return retry_after_s(getattr(getattr(exc, "response", None), "headers", None))


def classify_error(exc: BaseException) -> Exception:
    """Map a litellm or OpenAI SDK exception to TransientCallError or PermanentCallError."""
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if never_connected(exc):  # litellm reports a refused connection as a 500: it reached nobody
        return TransientCallError("connection", str(exc)[:300], sent=False)
    if status == 429 or name == "RateLimitError":
        return TransientCallError("429", str(exc)[:300], retry_after=_retry_after(exc), status=429)
    if name in {"Timeout", "APITimeoutError", "TimeoutError"} or status == 408:
        return TransientCallError("timeout", str(exc)[:300], status=status)
    if isinstance(status, int) and 500 <= status < 600:
        return TransientCallError(str(status), str(exc)[:300], retry_after=_retry_after(exc), status=status)
    if name in {"APIConnectionError", "ServiceUnavailableError", "InternalServerError", "ConnectionError"}:
        # A connection that was never opened (refused, unknown host) reached nobody: not a call made.
        return TransientCallError("connection", str(exc)[:300], status=status, sent=not never_connected(exc))
    return PermanentCallError(f"{name}: {str(exc)[:300]}", status=status if isinstance(status, int) else None)


class LiteLLMBackend:
    """Calls any provider litellm supports; an OpenAI-compatible server of the model's own (``openai/...`` at an
    ``api_base``) serving a model litellm has no rules for straight, without litellm's per-call bookkeeping
    (``uses_openai_sdk``): on a connection of our own (``direct_call``), or through the OpenAI SDK, which is
    what litellm would use for it, when the server is behind a proxy or redirects."""

    cacheable = True

    async def complete(
        self, spec: EMSpec, messages: list[dict[str, str]], ctx: CallContext, *, api_key: str | None = None
    ) -> Completion:
        """``api_key`` is the key the asking process already read (a worker's call courier gets it from its
        worker, whose environment is the one that counts); without it the spec's key is read here."""
        key = api_key if api_key is not None else spec.api_key()
        try:
            if uses_openai_sdk(spec):
                request: dict[str, Any] = {
                    "api_base": str(spec.api_base),
                    "api_key": key or NO_KEY,
                    "litellm_model": spec.litellm_model,
                    "messages": messages,
                    "params": spec.answer_params(),
                    "timeout": spec.timeout,
                }
                if direct_call.suits(request["api_base"]):
                    try:
                        return _completion_of_json(spec, await direct_call.chat_completion(**request))
                    except direct_call.DirectRouteUnsuited:
                        pass  # a redirect: the SDK below follows it
                response = await openai_compatible.chat_completion(**request)
            else:
                response = await load_litellm().acompletion(**_litellm_arguments(spec, messages, key))
        except (TransientCallError, PermanentCallError):
            raise
        except Exception as exc:
            raise classify_error(exc) from exc
        return _completion(spec, response)


def _litellm_arguments(spec: EMSpec, messages: list[dict[str, str]], key: str | None) -> dict[str, Any]:
    """``litellm.acompletion``'s arguments for one call to ``spec``."""
    register_unlisted(load_litellm(), spec.litellm_model)
    kwargs: dict[str, Any] = {
        "model": spec.litellm_model,
        "messages": messages,
        "timeout": spec.timeout,
        "num_retries": 0,
        "max_retries": 0,
        **spec.answer_params(),
    }
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    if spec.input_cost_per_million is not None or spec.output_cost_per_million is not None:
        # litellm's documented custom pricing: its own bookkeeping of the call then
        # uses the registry's price instead of failing to find an unlisted model.
        kwargs["input_cost_per_token"] = (spec.input_cost_per_million or 0.0) / 1e6
        kwargs["output_cost_per_token"] = (spec.output_cost_per_million or 0.0) / 1e6
    if spec.params.get("api_version"):
        kwargs["api_version"] = spec.params["api_version"]
    if key:
        kwargs["api_key"] = key
    return kwargs


def _completion_of_json(spec: EMSpec, answer: Mapping[str, Any]) -> Completion:
    """``_completion`` of a chat completion read as JSON (``direct_call``): the same fields, from dicts."""
    choice = answer["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}

    def tokens(name: str) -> int:
        try:
            return int(usage.get(name) or 0)
        except (TypeError, ValueError):
            return 0

    prompt_tokens, completion_tokens = tokens("prompt_tokens"), tokens("completion_tokens")
    return Completion(
        text=text if isinstance(text, str) else None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=call_cost(spec, prompt_tokens, completion_tokens, pricing.cached_prompt_tokens(usage)),
    )


def _completion(spec: EMSpec, response: Any) -> Completion:
    """The answer's text and token usage, priced (litellm's and the OpenAI SDK's responses have the same shape)."""
    choice = response.choices[0] if response.choices else None
    text = getattr(getattr(choice, "message", None), "content", None)
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    return Completion(
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        # Priced as the provider prices it (attunebench.pricing): prompt tokens it served from its own
        # prompt cache at their rate, the registry's price when one is set.
        cost_usd=call_cost(spec, prompt_tokens, completion_tokens, pricing.cached_prompt_tokens(usage)),
    )


def price_override(spec: EMSpec) -> PriceOverride | None:
    """The registry's price for ``spec``'s model (offline baselines are free), or None to use litellm's."""
    if spec.is_offline:
        return PriceOverride(0.0, 0.0)
    return PriceOverride.of(spec.input_cost_per_million, spec.output_cost_per_million)


def price_per_token(spec: EMSpec) -> tuple[float, float] | None:
    """(input, output) USD per token of a model, or None when no price is known (``attunebench.pricing``):
    for dry-run estimates, with the same override and price list as the calls themselves."""
    return pricing.price_per_token(spec.litellm_model, price_override(spec))


def call_cost(spec: EMSpec, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float | None:
    """USD for a call of this size to ``spec``'s model, or None when its price is unknown: the one pricing
    rule (``attunebench.pricing.call_cost``) the participant chat's live calls are priced by too."""
    override = price_override(spec)
    if override is None and spec.openai_compatible_server and uses_openai_sdk(spec):
        return None  # that route is taken only by a model litellm's price list does not have: no price to find
    if override is None:
        load_litellm()  # configured as the calls use it
    return pricing.call_cost(
        spec.litellm_model,
        prompt_tokens,
        completion_tokens,
        cached_prompt_tokens=cached_prompt_tokens,
        override=override,
    )
