"""A researcher's own API token: issue (shown once), describe (created, last four characters), revoke.

One path for the research pages and ``/api/token/``. DRF's token model keeps one
token per account, so issuing a new one replaces (and so revokes) the old one.
Nothing here logs or returns the key except ``do_issue_token``, whose caller
shows it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.authtoken.models import Token

SHOWN_CHARS = 4


@dataclass(frozen=True)
class TokenSummary:
    """What may be shown of an existing token: never the key, only its last characters."""

    created: datetime
    last_chars: str


def token_summary(user: User) -> TokenSummary | None:
    """The account's token as it may be shown again, or None when it has none."""
    token = Token.objects.filter(user=user).only("key", "created").first()
    if token is None:
        return None
    return TokenSummary(created=token.created, last_chars=token.key[-SHOWN_CHARS:])


def do_issue_token(user: User) -> Token:
    """A new token for ``user``; any previous one stops working at once."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def do_revoke_token(user: User) -> bool:
    """Delete the account's token; whether there was one."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return deleted > 0
