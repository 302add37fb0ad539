"""The Content-Security-Policy header reused per process is exactly the one django-csp builds each time."""

from __future__ import annotations

from csp.constants import HEADER
from csp.decorators import csp_update
from csp.utils import build_policy
from django.http import HttpResponse
from django.template import engines
from django.test import RequestFactory

from attune_site.csp_header import CSPMiddleware


def respond(view, path: str = "/join/pilot/") -> HttpResponse:
    request = RequestFactory().get(path)
    return CSPMiddleware(view)(request)  # type: ignore[return-value]


def test_a_page_without_a_nonce_gets_the_settings_policy_each_time():
    first = respond(lambda request: HttpResponse("page"))
    second = respond(lambda request: HttpResponse("page"))
    assert first[HEADER] == second[HEADER] == build_policy()
    assert "'nonce-" not in first[HEADER]


def test_a_page_that_uses_a_nonce_gets_its_own_in_the_header():
    template = engines["django"].from_string("<script nonce='{{ request.csp_nonce }}'></script>")

    def view(request):
        return HttpResponse(template.render({}, request))

    response = respond(view)
    nonce = response.content.decode().split("nonce='")[1].split("'")[0]
    assert f"'nonce-{nonce}'" in response[HEADER]


def test_a_view_that_changes_its_policy_keeps_its_change():
    @csp_update({"img-src": "https://images.example.org"})
    def view(request):
        return HttpResponse("page")

    header = respond(view)[HEADER]
    assert "https://images.example.org" in header and header != build_policy()


def test_a_header_the_view_set_itself_is_kept():
    def view(request):
        response = HttpResponse("page")
        response[HEADER] = "default-src 'none'"
        return response

    assert respond(view)[HEADER] == "default-src 'none'"
