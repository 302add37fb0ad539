"""Refuse NUL bytes at the door: no database stores one in text, and PostgreSQL errors on it.

A ``%00`` in a path, query parameter or form field would otherwise reach a lookup and turn into a
500 (SQLite stores it, PostgreSQL raises). One middleware answers every such request with a 400
that says what was wrong: JSON under ``/api/`` (every API error is JSON), plain text elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.http import HttpRequest, HttpResponse

from attune_site.request_limits import refusal

NUL = "\x00"


def _first_nul_field(pairs: Iterable[tuple[str, list[str]]]) -> str | None:
    for key, values in pairs:
        if NUL in key or any(NUL in value for value in values):
            return key.replace(NUL, "\\x00")
    return None


def nul_byte_problem(request: HttpRequest) -> str | None:
    """Where the request carries a NUL byte (path, query parameter or form field), or None."""
    if NUL in request.path:
        return "the path"
    if (field := _first_nul_field(request.GET.lists())) is not None:
        return f"query parameter {field!r}"
    # Form fields of the pages. The API reads JSON only, through DRF, whose text fields refuse a NUL
    # naming the field; reading its body here would also take the stream from DRF.
    on_a_page = request.method == "POST" and not request.path.startswith("/api/")
    if on_a_page and (field := _first_nul_field(request.POST.lists())) is not None:
        return f"form field {field!r}"
    return None


class RejectNulBytesMiddleware:
    """Answer 400 to a request with a NUL byte anywhere the application would read text from."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = nul_byte_problem(request)
        if where is None:
            return self.get_response(request)
        message = f"{where} contains a NUL byte (%00), which no text field accepts"
        return refusal(request, message, 400)
