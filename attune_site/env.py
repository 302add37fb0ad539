"""Typed readers of environment variables: a value the app cannot understand stops it at start-up.

One convention for every variable: unset or blank means "use the default"
(``docker compose`` passes ``${X:-}`` as an empty string); anything else must
parse, or ``ImproperlyConfigured`` names the variable, the value it had and
what is accepted. A typo such as ``ATTUNE_ALLOW_LIVE_MODELS=ture`` is an error,
never a silent "off".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})
BOOLEAN_HINT = "1/0, true/false, yes/no or on/off (any case)"


def _raw(name: str) -> str | None:
    """The variable's value stripped of surrounding space, or None when unset or blank."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _bad(name: str, raw: str, accepted: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"environment variable {name}={raw!r} is not valid: expected {accepted}")


def env_str(name: str, default: str = "", *, choices: Sequence[str] | None = None) -> str:
    """A string; with ``choices``, one of them (compared case-insensitively, returned as listed)."""
    raw = _raw(name)
    if raw is None:
        return default
    if choices is None:
        return raw
    for choice in choices:
        if raw.lower() == choice.lower():
            return choice
    raise _bad(name, raw, "one of " + ", ".join(choices))


def env_bool(name: str, default: bool) -> bool:
    """A yes/no switch: 1/0, true/false, yes/no, on/off in any case; anything else is an error."""
    raw = _raw(name)
    if raw is None:
        return default
    word = raw.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise _bad(name, raw, BOOLEAN_HINT)


def _range_hint(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum} to {maximum}"
    if minimum is not None:
        return f" of at least {minimum}"
    if maximum is not None:
        return f" of at most {maximum}"
    return ""


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number, optionally within [minimum, maximum] (the default is not checked: it is ours)."""
    raw = _raw(name)
    if raw is None:
        return default
    accepted = "a whole number" + _range_hint(minimum, maximum)
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, accepted) from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _bad(name, raw, accepted)
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """A finite number, optionally within [minimum, maximum]."""
    raw = _raw(name)
    if raw is None:
        return default
    accepted = "a number" + _range_hint(minimum, maximum)
    try:
        value = float(raw)
    except ValueError:
        raise _bad(name, raw, accepted) from None
    if value != value or value in (float("inf"), float("-inf")):  # NaN or infinite
        raise _bad(name, raw, accepted)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _bad(name, raw, accepted)
    return value


def env_list(name: str, default: Sequence[str] = ()) -> list[str]:
    """Comma-separated items, each stripped; empty items (``a,,b`` or a trailing comma) are dropped."""
    raw = _raw(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_path(name: str, default: Path) -> Path:
    """An absolute path (a relative one is taken from the working directory), not required to exist."""
    raw = _raw(name)
    return (Path(raw).expanduser() if raw is not None else default).resolve()
