"""API throttles: Django REST framework's per-user and per-address rates, on a clock tests can move.

Rates come from ``ATTUNE_API_RATE`` (signed-in researchers, per account) and
``ATTUNE_API_ANON_RATE`` (per address); counts live in the default cache, so
they are shared by every web worker when ``REDIS_URL`` is set. Over the rate
the API answers 429 with a JSON ``detail`` and a ``Retry-After`` header.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from collection.client_ip import client_ip

#: The throttles' clock; tests replace it to move time instead of waiting for it.
api_clock: Callable[[], float] = time.time


class ResearcherRateThrottle(UserRateThrottle):
    """Requests per signed-in account (``ATTUNE_API_RATE``)."""

    def get_rate(self) -> str:
        return settings.ATTUNE_API_RATE  # read per request, so a changed setting applies at once

    def get_ident(self, request: Request) -> str:
        return client_ip(request)  # the same address rule as the enrolment throttle and the login lockout

    def timer(self) -> float:
        return api_clock()


class AnonymousRateThrottle(AnonRateThrottle):
    """Requests per address without an account (``ATTUNE_API_ANON_RATE``)."""

    def get_rate(self) -> str:
        return settings.ATTUNE_API_ANON_RATE

    def get_ident(self, request: Request) -> str:
        return client_ip(request)

    def timer(self) -> float:
        return api_clock()
