"""The API token page: a researcher issues, sees and revokes their own REST API key."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers

from research.access.api_tokens import do_issue_token, do_revoke_token, token_summary
from research.access.checks import researcher_required, signed_in_user


@researcher_required
def api_token(request: HttpRequest) -> HttpResponse:
    """GET: whether you have a token (created, last four characters). POST create/revoke.

    A new token is shown in the answer to the POST that made it and never again:
    the page is not cached and a reload shows only its last characters.
    """
    user = signed_in_user(request)
    issued = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            issued = do_issue_token(user).key
        elif action == "revoke":
            if do_revoke_token(user):
                messages.success(request, "Token revoked: scripts using it are refused from now on.")
            else:
                messages.info(request, "You had no token to revoke.")
            return redirect("research:token")
        else:
            messages.error(request, "Unknown action: choose create or revoke.")
            return redirect("research:token")
    response = render(request, "research/api_token.html", {"summary": token_summary(user), "issued": issued})
    add_never_cache_headers(response)
    return response
