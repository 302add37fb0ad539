"""The page a locked-out login sees (django-axes calls this through ``AXES_LOCKOUT_CALLABLE``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    """429 with a calm explanation and ``Retry-After``: how long until this username may try again from here."""
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    response = render(
        request,
        "research/locked_out.html",
        {"minutes": max(1, seconds // 60), "failure_limit": settings.AXES_FAILURE_LIMIT},
        status=429,
    )
    response["Retry-After"] = str(seconds)
    return response
