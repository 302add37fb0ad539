"""One pricing rule for every model call Attune makes: replays and judges, and the participant chat's live
original models.

A call is priced as its provider prices it: litellm's own cost calculation
(``litellm.cost_per_token``) over the call's token usage, prompt tokens served
from the provider's prompt cache included at their own (lower) rate. A price
given in the model registry overrides litellm's list; the registry holds one
input price, so every prompt token is charged at it. A model litellm has no
price for (and no override) has an unknown cost, None, never a guessed one: its
calls are counted apart as unpriced.

A streamed reply carries no usage: ``count_tokens`` counts the tokens sent and
received as litellm counts them, and the same rule prices them.

Pure: it imports no Django, and litellm only when a price is asked for.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("attune.pricing")


@dataclass(frozen=True)
class PriceOverride:
    """A price set in the model registry, USD per million tokens; a missing side is free."""

    input_per_million: float | None = None
    output_per_million: float | None = None

    @classmethod
    def of(cls, input_per_million: float | None, output_per_million: float | None) -> PriceOverride | None:
        """The override a registry row sets, or None when it sets neither side."""
        if input_per_million is None and output_per_million is None:
            return None
        return cls(input_per_million, output_per_million)

    def per_token(self) -> tuple[float, float]:
        return ((self.input_per_million or 0.0) / 1e6, (self.output_per_million or 0.0) / 1e6)


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network: litellm's bundled price list
    import litellm

    return litellm


def listed_name(model: str) -> str | None:
    """The name under which litellm's price list prices ``model`` (the full name or the name without its
    provider prefix), or None when it has no input and output price for it.

    An entry without prices (a model described to litellm only so it stops searching, ``register_unlisted``)
    is not a price: litellm would call such calls free.
    """
    model_cost = _litellm().model_cost
    for name in (model, model.split("/", 1)[-1]):
        entry = model_cost.get(name)
        if entry and entry.get("input_cost_per_token") is not None and entry.get("output_cost_per_token") is not None:
            return name
    return None


def price_per_token(model: str, override: PriceOverride | None = None) -> tuple[float, float] | None:
    """(input, output) USD per uncached token, or None when no price is known: for estimates before a run."""
    if override is not None:
        return override.per_token()
    name = listed_name(model)
    if name is None:
        return None
    entry = _litellm().model_cost[name]
    return (float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"]))


def call_cost(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_prompt_tokens: int = 0,
    override: PriceOverride | None = None,
) -> float | None:
    """USD for one call to ``model`` of this usage, or None when its price is unknown.

    ``cached_prompt_tokens`` is the part of ``prompt_tokens`` the provider served from its prompt cache
    (OpenAI's ``prompt_tokens_details.cached_tokens``); litellm charges them at the model's cache-read price.
    """
    if override is not None:
        input_price, output_price = override.per_token()
        return prompt_tokens * input_price + completion_tokens * output_price
    name = listed_name(model)
    if name is None:
        return None
    litellm = _litellm()
    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    usage = Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=min(cached_prompt_tokens, prompt_tokens)),
    )
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=name, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, usage_object=usage
        )
    except Exception as exc:  # litellm raises for a model its calculator cannot price after all
        log.info("litellm could not price a call to %s (%s); counted as unpriced", model, type(exc).__name__)
        return None
    return float(prompt_cost) + float(completion_cost)


def cached_prompt_tokens(usage: Any) -> int:
    """The prompt tokens a provider's usage says were served from its prompt cache (0 when it says nothing).

    OpenAI-shaped usage (litellm's too) has ``prompt_tokens_details.cached_tokens``; Anthropic's, through
    litellm, also ``cache_read_input_tokens``.
    """
    if isinstance(usage, Mapping):  # usage read as JSON
        details, cached = usage.get("prompt_tokens_details"), usage.get("cache_read_input_tokens")
    else:
        details, cached = getattr(usage, "prompt_tokens_details", None), getattr(usage, "cache_read_input_tokens", None)
    in_details = details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", None)
    cached = in_details or cached
    try:
        return max(0, int(cached or 0))
    except (TypeError, ValueError):
        return 0


def count_tokens(model: str, messages: Sequence[dict[str, str]], completion: str) -> tuple[int, int]:
    """(prompt, completion) tokens of a call whose reply carried no usage (a stream), as litellm counts them."""
    litellm = _litellm()
    prompt = int(litellm.token_counter(model=model, messages=list(messages)))
    answered = int(litellm.token_counter(model=model, text=completion, count_response_tokens=True)) if completion else 0
    return prompt, answered
