"""The API's one pagination rule: limit/offset with a ceiling, so no request can ask for every row at once."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

# Rows one page may hold whatever ``?limit=`` asks: a larger limit gets this many, never an error.
MAX_PAGE_SIZE = 500


class CappedLimitOffsetPagination(LimitOffsetPagination):
    """Limit/offset pages of ``PAGE_SIZE`` rows by default and at most ``MAX_PAGE_SIZE``.

    A limit that is not a positive whole number falls back to the default page (DRF's rule);
    a limit above the ceiling is cut to it, so ``?limit=10000000`` is one bounded page, not a 500.
    """

    max_limit = MAX_PAGE_SIZE
