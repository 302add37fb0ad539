"""Participant request latency for ``/metrics``: each participant page's time to its response headers.

A participant's page is any view of the participant URLs (``collection/urls.py``); the label is the view's
name (``chat_send``, ``turn`` ...), never the path, which holds the participant's study link. A streaming
reply counts until its first bytes can leave; the stream itself is the open-streams gauge.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase
from prometheus_client import Histogram

logger = logging.getLogger("attune.request")

PARTICIPANT_REQUEST_SECONDS = Histogram(
    "attune_participant_request_seconds",
    "Participant page response time (to the headers)",
    labelnames=["view"],
    buckets=(0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


class ParticipantLatencyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.namespace == "collection":
            seconds = time.perf_counter() - started
            view = match.url_name or "unknown"
            PARTICIPANT_REQUEST_SECONDS.labels(view=view).observe(seconds)
            logger.info("participant %s %s: %s in %.3f s", request.method, view, response.status_code, seconds)
        return response
