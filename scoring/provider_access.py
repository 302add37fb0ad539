"""Where an evaluated model may be called and which key it may read: the registry's guard rails.

A registry row names a litellm model, optionally its own ``api_base`` and the
environment variable holding its key. Both are checked here, once, for the
admin form (at save) and for the replay (at call time), so a row can never send
a key, or a collected conversation, to a host nobody configured:

- ``api_base`` on this machine (loopback) is fine while live calls are off
  (the test and demo servers); with live calls on, its host must be listed in
  ``ATTUNE_PROVIDER_HOSTS`` (empty by default: only the providers' own endpoints).
- ``params.api_key_env`` must be on ``ATTUNE_PROVIDER_KEY_ENV``; the rule itself
  lives in the core (``attunebench.replay.llm.params_problem``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from django.conf import settings

from attunebench.replay.llm import params_problem


def is_loopback(api_base: str) -> bool:
    """Whether ``api_base`` points at this machine (localhost or a loopback address)."""
    host = urlparse(api_base).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_key_env() -> frozenset[str]:
    """The configured provider key variables (already checked at settings load)."""
    return frozenset(settings.ATTUNE_PROVIDER_KEY_ENV)


def api_base_problem(api_base: str, *, live: bool) -> str | None:
    """Why a model may not be called at ``api_base``, or None when it may.

    ``live`` is whether live (paid) calls are switched on: then even loopback
    must be listed, since a live deployment's own machine may serve other things.
    """
    if not api_base:
        return None
    parsed = urlparse(api_base)
    host = (parsed.hostname or "").lower()
    if parsed.scheme not in ("http", "https") or not host:
        return f"api_base {api_base!r} is not an http(s) URL with a host"
    if host in settings.ATTUNE_PROVIDER_HOSTS:
        return None
    if not live and is_loopback(api_base):
        return None
    listed = ", ".join(settings.ATTUNE_PROVIDER_HOSTS) or "none"
    where = "a live model" if live else "a model"
    return (
        f"api_base host {host!r} is not allowed for {where}: list it in ATTUNE_PROVIDER_HOSTS "
        f"(listed: {listed}){'' if live else ' or serve the model on this machine'}"
    )


def registry_problem(api_base: str, params: Mapping[str, Any]) -> dict[str, str]:
    """Field errors for a registry row as saved (loopback allowed: live mode is checked at call time)."""
    errors: dict[str, str] = {}
    if not isinstance(params, Mapping):
        errors["params"] = "params must be a JSON object"
    elif problem := params_problem(params, allowed_key_env()):
        errors["params"] = problem
    if problem := api_base_problem(api_base, live=False):
        errors["api_base"] = problem
    return errors
