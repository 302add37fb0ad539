"""Access checks shared by researcher pages, the API and the human-baseline pages.

Anonymous visitors (participants included: a study link never logs anyone in
as a Django user) are sent to the login page; a logged-in account without
researcher rights gets 403, so a rater cannot wander into dashboards.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.models import User
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import reverse
from rest_framework.permissions import BasePermission

from research.access.roles import is_researcher

View = Callable[..., HttpResponseBase]


def signed_in_user(request: HttpRequest) -> User:
    """The account behind a request that a login check has already let through."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("Please sign in.")
    return user


def researcher_required(view: View) -> View:
    """Decorator for researcher pages: login first, then staff rights."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url=reverse("research:login"))
        if not is_researcher(request.user):
            raise PermissionDenied("Researcher access only.")
        return view(request, *args, **kwargs)

    return wrapped


def login_required_403(view: View) -> View:
    """Decorator for rater pages: login first; ownership is checked by the access_* service."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url=reverse("research:login"))
        return view(request, *args, **kwargs)

    return wrapped


class IsResearcher(BasePermission):
    """DRF permission: the same rule as ``researcher_required``."""

    message = "Researcher access only (the research group)."

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_researcher(request.user)
