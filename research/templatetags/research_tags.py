"""Small formatting filters for research templates (numbers, p-values, dictionary look-ups, pseudonyms)."""

from __future__ import annotations

from typing import Any

from django import template
from pydantic import BaseModel

from datasets.pseudonyms import export_pseudonym

register = template.Library()


@register.filter
def num(value: Any, digits: int = 2) -> str:
    """A number with fixed decimals, or an en dash for missing values."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value):.{int(digits)}f}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pseudonym(participant: Any) -> str:
    """A participant as exports and the API show them (the keyed-hash pseudonym), never the stored id, so a
    researcher can match what a page shows with conversations and exports; an en dash for none."""
    if participant is None:
        return "–"
    return export_pseudonym(participant.pseudonym)


@register.filter
def pval(value: Any) -> str:
    """p-values as researchers write them: '< 0.001' below the third decimal."""
    if value is None:
        return "–"
    value = float(value)
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` for a dict, field ``key`` of a result model; None when absent."""
    if mapping is None:
        return None
    if isinstance(mapping, BaseModel):
        return getattr(mapping, key) if key in type(mapping).model_fields else None
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def usd(value: Any) -> str:
    if value is None:
        return "–"
    return f"${float(value):,.4f}" if float(value) < 1 else f"${float(value):,.2f}"


@register.filter
def duration(seconds: Any) -> str:
    if seconds is None:
        return "–"
    seconds = float(seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


@register.filter
def percent(value: Any) -> str:
    """A 0–1 share as a whole percentage ('0%', '67%'), or an en dash when it is not known."""
    if value is None or value == "":
        return "–"
    return f"{100 * float(value):.0f}%"
