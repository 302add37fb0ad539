"""Error pages for the public: calm, phone-sized, with the study's header and its crisis resources.

Django's defaults are unstyled English developer text at desktop width. These
handlers (wired in ``attune_site.urls`` and ``CSRF_FAILURE_VIEW``) say in plain
words what happened, whether anything was lost (only where that is true), and
where to get help. Under ``/api/`` they answer JSON instead, as the API does.
The 500 page is built defensively: the database may be what failed, so every
lookup falls back to the defaults and the template to a plain page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import reverse

from collection.models import Participant, Study, hash_token
from collection.setup import DEFAULT_CRISIS_RESOURCES

logger = logging.getLogger("attune.errors")

GENERIC_TITLE = "Attune research study"


@dataclass(frozen=True)
class ErrorPage:
    status: int
    heading: str
    explanation: str
    safety: str  # what happened to the participant's answers; said only where it is true


PAGES: dict[int, ErrorPage] = {
    400: ErrorPage(
        400,
        "Something in that request was not right",
        "The page could not read what was sent. This can happen with a broken or shortened link.",
        "Nothing was saved from that request. Everything you saved before is safe.",
    ),
    403: ErrorPage(
        403,
        "This page is not available to you",
        "You may need to use your personal study link, or to sign in.",
        "Nothing was changed. Everything you saved before is safe.",
    ),
    404: ErrorPage(
        404,
        "We could not find this page",
        "The link may be incomplete or mistyped. If you are taking part in the study, please open your "
        "personal study link again (copy the whole link).",
        "Your answers are safe: nothing you saved has been affected.",
    ),
    500: ErrorPage(
        500,
        "Sorry, something went wrong on our side",
        "This is not your fault. Please wait a moment, then go back and try again.",
        "Everything you saved before this page is safe. What you sent just now may not have been saved, "
        "so please check it when you go back.",
    ),
}

# The research pages and the admin speak to the research team, not to participants.
RESEARCH_PAGES: dict[int, ErrorPage] = {
    403: ErrorPage(
        403,
        "This research page is not available to you",
        "It needs a researcher account in this study's research group; ask the study's administrator.",
        "Nothing was changed.",
    ),
    404: ErrorPage(
        404,
        "This research page or record does not exist",
        "The address may be mistyped, or the record was removed: a participant who withdrew or was erased is "
        "left out of every research page.",
        "Nothing was changed.",
    ),
}
RESEARCH_PREFIXES = ("/research/", "/admin/")

CSRF_PAGE = ErrorPage(
    403,
    "This page had expired, so it was not sent",
    "For your security, a page that has been open for a long time, or was opened in another browser, cannot "
    "send answers. Please go back, reload the page and send again.",
    "What you just sent was not saved. Everything you saved before is safe, and text you typed is usually "
    "still in the box when you go back.",
)


def _study_for(request: HttpRequest) -> tuple[dict[str, str], str]:
    """The header and crisis resources of the study the request is about (else the defaults), and a way back."""
    study: Study | None = None
    back = ""
    try:
        match = request.resolver_match
        kwargs: dict[str, Any] = dict(match.kwargs) if match else {}
        if not kwargs:  # a 404 has no match: read the participant link from the path itself
            parts = request.path.strip("/").split("/")
            if len(parts) >= 2 and parts[0] == "s":
                kwargs = {"token": parts[1]}
            elif len(parts) >= 2 and parts[0] == "join":
                kwargs = {"slug": parts[1]}
        if "token" in kwargs:
            token = str(kwargs["token"])[:64]
            participant = Participant.objects.select_related("study").filter(token_hash=hash_token(token)).first()
            if participant is not None and participant.study is not None and participant.link_usable():
                study = participant.study
                back = reverse("collection:resume", kwargs={"token": token})
        elif "slug" in kwargs:
            study = Study.objects.open().filter(slug=str(kwargs["slug"])[:50]).first()
            if study is not None and study.open_enrolment:
                back = reverse("collection:join", kwargs={"slug": study.slug})
    except Exception:  # the database itself may be what failed
        logger.warning("error page: could not look up the study for %s", request.path, exc_info=True)
        study = None
    if study is None:
        return {"title": GENERIC_TITLE, "crisis_resources": DEFAULT_CRISIS_RESOURCES}, back
    return {"title": study.title, "crisis_resources": study.crisis_resources}, back


def render_error(request: HttpRequest, page: ErrorPage) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": page.heading}, status=page.status)
    if request.path.startswith(RESEARCH_PREFIXES) and page.status in RESEARCH_PAGES:
        page = RESEARCH_PAGES[page.status]
        context = {"study": {"title": "Attune research pages"}, "page": page, "back_url": "/research/"}
        return HttpResponse(render_to_string("errors/error.html", context, request=request), status=page.status)
    study, back = _study_for(request)
    context = {"study": study, "page": page, "back_url": back, "hide_withdraw": True}
    try:
        body: str = render_to_string("errors/error.html", context, request=request)
    except Exception:  # never fail while reporting a failure
        logger.exception("error page: template failed")
        body = (
            f"<!doctype html><html lang='en'><meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{page.heading}</title><h1>{page.heading}</h1><p>{page.safety}</p>"
            f"<p>{DEFAULT_CRISIS_RESOURCES}</p></html>"
        )
    return HttpResponse(body, status=page.status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render_error(request, PAGES[400])


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render_error(request, PAGES[403])


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render_error(request, PAGES[404])


def server_error(request: HttpRequest) -> HttpResponse:
    return render_error(request, PAGES[500])


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: an expired or foreign form post."""
    return render_error(request, CSRF_PAGE)
