"""A deployment's optional moderation model, beside Attune's own offline screen (``attunebench.safety``).

Set ``ATTUNE_SAFETY_MODEL`` (and allow live models) and every participant message and free-text answer is
also sent, through litellm, to that moderation endpoint (OpenAI's moderation format). What it flags is
added to what the offline rules found (``with_moderation``): it can raise a level, never lower one, and
never removes a detection. It must never hold up a participant: one attempt, a short timeout, and on any
failure the offline screening stands alone, the error is logged, and the safety log page shows it
(``health``), so the research team knows the second opinion was missing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from attunebench.safety import Screening, screen_text, with_moderation

logger = logging.getLogger("attune.safety")
_HEALTH_KEY = "attune:safety-model:health"
_HEALTH_SECONDS = 7 * 24 * 3600


def configured() -> bool:
    """A moderation model is named and this deployment may call live models."""
    return bool(settings.ATTUNE_SAFETY_MODEL) and settings.ATTUNE_ALLOW_LIVE_MODELS


def _client() -> Any:
    """An OpenAI client that tries once and gives up after the configured timeout (litellm's own default
    client would retry and wait minutes)."""
    import os

    from openai import OpenAI

    return OpenAI(
        api_key=os.environ.get("OPENAI_API_KEY") or "not-set",
        base_url=settings.ATTUNE_SAFETY_MODEL_API_BASE or None,
        timeout=settings.ATTUNE_SAFETY_MODEL_TIMEOUT,
        max_retries=0,
    )


def moderation_flags(text: str) -> dict[str, bool] | None:
    """The categories the moderation model flagged in ``text``; None when none is configured or it failed."""
    if not configured() or not text.strip():
        return None
    try:
        import litellm

        response = litellm.moderation(input=text, model=settings.ATTUNE_SAFETY_MODEL, client=_client())
        results = response.results or []
        flagged: dict[str, bool] = {}
        for result in results:
            categories: Any = result.categories or {}
            items = categories.model_dump(by_alias=True) if hasattr(categories, "model_dump") else dict(categories)
            for name, value in items.items():
                flagged[str(name)] = flagged.get(str(name), False) or bool(value)
    except Exception as exc:  # any failure: the offline screen stands alone, and the team is told
        _note_failure(exc)
        return None
    _note_success()
    return flagged


def screen(text: str) -> Screening:
    """The offline screen of ``text``, plus what the moderation model adds when one is configured."""
    offline = screen_text(text)
    flags = moderation_flags(text)
    return offline if flags is None else with_moderation(offline, flags)


def _note_failure(exc: Exception) -> None:
    error = f"{type(exc).__name__}: {str(exc)[:200]}"
    logger.error("safety: the moderation model %s failed (%s); the offline screen stands alone", _model(), error)
    now = timezone.now().isoformat(timespec="seconds")
    health = health_record() or {}
    failures = int(health.get("failures", 0)) + 1
    cache.set(_HEALTH_KEY, {**health, "failures": failures, "last_error": error, "last_error_at": now}, _HEALTH_SECONDS)


def _note_success() -> None:
    health = health_record() or {}
    cache.set(_HEALTH_KEY, {**health, "last_ok_at": timezone.now().isoformat(timespec="seconds")}, _HEALTH_SECONDS)


def _model() -> str:
    return str(settings.ATTUNE_SAFETY_MODEL)


def health_record() -> Mapping[str, Any] | None:
    """What the safety log page says about the moderation model: failures counted, the last error and when,
    the last success (kept a week); None when nothing was recorded."""
    record = cache.get(_HEALTH_KEY)
    return record if isinstance(record, dict) else None


def health() -> dict[str, Any]:
    """For the safety log page: whether a moderation model is on, which, and its recorded failures."""
    record = health_record() or {}
    return {"configured": configured(), "model": _model(), **record}
