"""Request size limits enforced before any view reads the body.

Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` counts the form fields of a multipart body but not its
files, so a 50 MB "file" posted to any page used to be read and spooled to disk. Attune takes no
file uploads, so one rule covers every request: a declared body larger than
``ATTUNE_MAX_REQUEST_BYTES`` is a 413 before a byte of it is read, and a file part is refused
outright (``DATA_UPLOAD_MAX_NUMBER_FILES = 0`` in settings).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


def refusal(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """The error in the shape the caller reads: JSON under ``/api/`` (every API error is), plain text elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def declared_length(request: HttpRequest) -> int:
    """The body length the client declared (0 when absent or unreadable: Django then reads nothing)."""
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0


class RequestSizeLimitMiddleware:
    """Answer 413 to a request whose body is larger than ``ATTUNE_MAX_REQUEST_BYTES``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit: int = settings.ATTUNE_MAX_REQUEST_BYTES
        size = declared_length(request)
        if size > limit:
            return refusal(
                request,
                f"the request body is {size} bytes; at most {limit} are accepted (ATTUNE_MAX_REQUEST_BYTES)",
                413,
            )
        return self.get_response(request)
