"""A researcher's own API token: issue (shown once, with an expiry they choose), describe, revoke.

Tokens are django-rest-knox's: the database keeps a SHA-512 digest of each key
and a short lookup prefix, never the key, so a copied database (or a backup)
holds no working credential. A key is shown once, in the answer that created
it. One token per account: issuing a new one replaces (and so revokes) the old
one. Every token expires, after the number of days its researcher chose
(``EXPIRY_DAYS``); an expired token is refused and deleted on its next use.

Keys issued before digests were kept were stored in plain text (DRF's own
tokens); a migration (research/0012) deleted them. The API answers such a key
with what to do (``PLAIN_KEY_WITHDRAWN``: create a new one), and the token page
says the same to a researcher who has no token.

One path for the research pages and ``/api/token/``. Nothing here logs or
returns a key except ``do_issue_token``, whose caller shows it once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.contrib.auth.models import User
from django.db import transaction
from knox.auth import TokenAuthentication
from knox.models import AuthToken
from rest_framework import exceptions

#: The lifetimes a researcher may choose for a token, in days; the first is the default.
EXPIRY_DAYS: Final = (90, 30, 7, 365)
DEFAULT_EXPIRY_DAYS: Final = EXPIRY_DAYS[0]

#: What a key issued before digests were kept looks like: 40 hexadecimal characters (DRF's own tokens).
PLAIN_KEY: Final = re.compile(r"[0-9a-f]{40}")
PLAIN_KEY_WITHDRAWN: Final = (
    "This API token was issued before tokens were stored as digests and has been withdrawn: create a new one "
    "on the research pages (/research/token/) or with POST /api/token/; it is shown once."
)


class TokenExpiryError(ValueError):
    """A lifetime that is not one of ``EXPIRY_DAYS``; the message says which are."""


@dataclass(frozen=True)
class IssuedToken:
    """A token just created: ``key`` is shown to its owner once and stored nowhere."""

    key: str
    created: datetime
    expiry: datetime


@dataclass(frozen=True)
class TokenSummary:
    """What may be shown of an existing token: never the key, only the prefix it is looked up by."""

    created: datetime
    expiry: datetime | None
    lookup_prefix: str


def check_expiry_days(days: Any) -> int:
    """The chosen lifetime in days; refuses anything but one of ``EXPIRY_DAYS``."""
    try:
        value = int(days)
    except (TypeError, ValueError):
        value = None
    if value not in EXPIRY_DAYS:
        choices = ", ".join(str(d) for d in sorted(EXPIRY_DAYS))
        raise TokenExpiryError(f"expires_in_days must be one of {choices}, not {days!r}.")
    return value


def token_summary(user: User) -> TokenSummary | None:
    """The account's token as it may be shown again, or None when it has none."""
    token = AuthToken.objects.filter(user=user).order_by("-created").only("token_key", "created", "expiry").first()
    if token is None:
        return None
    return TokenSummary(created=token.created, expiry=token.expiry, lookup_prefix=token.token_key)


def do_issue_token(user: User, expires_in_days: int = DEFAULT_EXPIRY_DAYS) -> IssuedToken:
    """A new token for ``user`` that expires after ``expires_in_days``; any previous one stops working at once."""
    days = check_expiry_days(expires_in_days)
    with transaction.atomic():
        AuthToken.objects.filter(user=user).delete()
        token, key = AuthToken.objects.create(user=user, expiry=timedelta(days=days))
    assert token.expiry is not None
    return IssuedToken(key=key, created=token.created, expiry=token.expiry)


def do_revoke_token(user: User) -> bool:
    """Delete the account's token; whether there was one."""
    deleted, _ = AuthToken.objects.filter(user=user).delete()
    return deleted > 0


class DigestTokenAuthentication(TokenAuthentication):
    """knox's token authentication (digest compared in constant time, expiry refused), which answers a key
    of the withdrawn plain-text kind with what to do instead of a bare "Invalid token"."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, Any]:
        try:
            return super().authenticate_credentials(token)
        except exceptions.AuthenticationFailed:
            if PLAIN_KEY.fullmatch(token.decode("utf-8", "replace")):
                raise exceptions.AuthenticationFailed(PLAIN_KEY_WITHDRAWN) from None
            raise
