"""The API token page: a researcher issues, sees and revokes their own REST API key."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from research.access.api_tokens import (
    DEFAULT_EXPIRY_DAYS,
    EXPIRY_DAYS,
    TokenExpiryError,
    check_expiry_days,
    do_issue_token,
    do_revoke_token,
    token_summary,
)
from research.access.checks import researcher_required, signed_in_user
from research.access.roles import is_researcher


@researcher_required
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: whether you have a token (created, expiry, lookup prefix). POST create (with a lifetime) or revoke.

    A new token is shown in the answer to the POST that made it and never again:
    the page is not cached, and the database holds only the key's digest.
    """
    user = signed_in_user(request)
    issued = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            try:
                days = check_expiry_days(request.POST.get("expires_in_days") or DEFAULT_EXPIRY_DAYS)
                issued = do_issue_token(user, days)
            except TokenExpiryError as exc:
                messages.error(request, str(exc))
                return redirect("research:token")
        elif action == "revoke":
            if do_revoke_token(user):
                messages.success(request, "Token revoked: scripts using it are refused from now on.")
            else:
                messages.info(request, "You had no token to revoke.")
            return redirect("research:token")
        else:
            messages.error(request, "Unknown action: choose create or revoke.")
            return redirect("research:token")
    response = render(
        request,
        "research/api_token.html",
        {
            "summary": token_summary(user),
            "issued": issued,
            "expiry_days": sorted(EXPIRY_DAYS),
            "default_days": DEFAULT_EXPIRY_DAYS,
        },
    )
    add_never_cache_headers(response)
    return response


class ResearchLoginView(auth_views.LoginView):
    """The research login. Without a ``next`` address, a researcher lands on the dashboard and anyone else (a
    human-baseline rater) on their rating list, never on a page they may not open."""

    template_name = "research/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        user = self.request.user
        return reverse("research:home" if is_researcher(user) else "research:rater_home")
