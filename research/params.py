"""Query parameters as both the research pages and the REST API read them."""

from __future__ import annotations

MAX_ID = 2**63 - 1  # the largest id a database row can have (a signed 64-bit key)


def id_param(value: str | None) -> int | None:
    """A query-parameter id: None when absent or malformed, -1 (matches nothing) when beyond any database id."""
    if not value or not value.isdigit():
        return None
    number = int(value)
    return number if number <= MAX_ID else -1
