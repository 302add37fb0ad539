"""The client's address, as the throttles and the login lockout see it.

Behind the TLS proxy every connection comes from the proxy, so the address that
counts is the one the proxy appends to ``X-Forwarded-For``. Only the last
``ATTUNE_TRUSTED_PROXIES`` entries are trusted (a client can write anything
before them); with 0 the connection's own address is used. Django REST
framework's throttles follow the same rule through its ``NUM_PROXIES`` setting.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """The address the outermost trusted proxy saw, else the connection's address."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    proxies = settings.ATTUNE_TRUSTED_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if not hops:
        return remote
    return hops[-min(proxies, len(hops))]
