"""The Content-Security-Policy header, built once per process instead of on every response.

django-csp builds the header from the settings on every response (twice: the policy and the report-only
one), which cost about a tenth of a static file's or a health check's server CPU. A response whose page used
no nonce and set no policy of its own (every participant page) gets the same header every time, so that
header is built once and reused; any other response goes through django-csp's own path unchanged.
"""

from __future__ import annotations

import http.client
from functools import cache
from typing import Any

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject
from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponseBase

#: What a view or decorator sets on a response to change its policy (django-csp's decorators).
PER_RESPONSE = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)
SETTINGS = ("CONTENT_SECURITY_POLICY", "CONTENT_SECURITY_POLICY_REPORT_ONLY")


@cache
def settings_policy(report_only: bool) -> str:
    """The header django-csp builds from the settings alone (no nonce, nothing per response)."""
    return build_policy(report_only=report_only)


@receiver(setting_changed)
def _forget_policy(setting: str, **kwargs: Any) -> None:
    if setting in SETTINGS:
        settings_policy.cache_clear()


class CSPMiddleware(BaseCSPMiddleware):
    """django-csp's middleware, with the settings' header reused when a response needs nothing else."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if getattr(request, "_csp_nonce", None) is not None or any(
            getattr(response, name, None) is not None for name in PER_RESPONSE
        ):
            return super().process_response(request, response)
        if settings.DEBUG and response.status_code in (http.client.INTERNAL_SERVER_ERROR, http.client.NOT_FOUND):
            return response
        for header, setting, exempt, report_only in (
            (HEADER, SETTINGS[0], "_csp_exempt", False),
            (HEADER_REPORT_ONLY, SETTINGS[1], "_csp_exempt_ro", True),
        ):
            policy = settings_policy(report_only)
            if not policy or header in response or getattr(response, exempt, False) is not False:
                continue
            prefixes = (getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES", None) or ()
            if not request.path_info.startswith(tuple(prefixes)):
                response[header] = policy
        # as django-csp: a nonce asked for after the header is written is an error, not a silent gap
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)  # type: ignore[attr-defined]
        return response
