"""A researcher manages their own API token on the research pages.

Created with the lifetime they choose and shown once, then only its dates and
lookup prefix; the database keeps a digest, so a copied row is no credential;
an expired token is refused; revoked at once; one path
(research.access.api_tokens) for the page and /api/token/. Keys stored in plain
text before are deleted by a migration, and the API says what to do instead.
"""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from knox.models import AuthToken

from research.access.api_tokens import PLAIN_KEY_WITHDRAWN, do_issue_token

pytestmark = pytest.mark.django_db

API = "api:model-list"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(key: str):
    return Client().get(reverse(API), HTTP_AUTHORIZATION=f"Token {key}")


def test_a_token_is_shown_once_then_only_its_dates_and_lookup_prefix(researcher):
    client = _client(researcher)
    assert "You have no API token." in client.get(reverse("research:token")).content.decode()
    created = client.post(reverse("research:token"), {"action": "create", "expires_in_days": "30"})
    assert created.status_code == 200 and "no-store" in created["Cache-Control"]
    body = created.content.decode()
    key = body.split('<code id="token-key">', 1)[1].split("</code>", 1)[0]
    assert key.startswith("attune_") and "shown only this once" in body
    row = AuthToken.objects.get(user=researcher)
    assert round((row.expiry - row.created) / timedelta(days=1)) == 30  # the lifetime the researcher chose
    again = client.get(reverse("research:token")).content.decode()
    assert key not in again
    assert f"{row.token_key}…</code>" in again and row.expiry.strftime("%Y-%m-%d") in again
    assert _api(key).status_code == 200  # the key works for the API


def test_the_database_holds_a_digest_and_a_copied_row_is_no_credential(researcher):
    key = do_issue_token(researcher).key
    row = AuthToken.objects.values().get(user=researcher)
    assert key not in {str(v) for v in row.values()}  # no column holds the key
    assert row["token_key"] == key[: len(row["token_key"])] and len(row["token_key"]) < len(key)
    for copied in (row["digest"], row["token_key"], row["token_key"] + row["digest"][: len(key) - 15]):
        refused = _api(copied)
        assert refused.status_code == 401 and refused.json() == {"detail": "Invalid token."}
    assert _api(key).status_code == 200


def test_an_expired_token_is_refused(researcher):
    key = do_issue_token(researcher, 7).key
    assert _api(key).status_code == 200
    AuthToken.objects.filter(user=researcher).update(expiry=timezone.now() - timedelta(seconds=1))
    refused = _api(key)
    assert refused.status_code == 401 and refused.json() == {"detail": "Invalid token."}
    assert not AuthToken.objects.filter(user=researcher).exists()  # and it is gone


def test_a_lifetime_off_the_list_is_refused_with_the_choices(researcher):
    client = _client(researcher)
    page = client.post(reverse("research:token"), {"action": "create", "expires_in_days": "0"}, follow=True)
    assert "expires_in_days must be one of 7, 30, 90, 365, not &#x27;0&#x27;." in page.content.decode()
    refused = client.post("/api/token/", {"expires_in_days": 10000}, content_type="application/json")
    assert refused.status_code == 400 and "expires_in_days" in refused.json()
    assert not AuthToken.objects.filter(user=researcher).exists()


def test_creating_again_replaces_and_revoking_ends_the_token(researcher):
    client = _client(researcher)
    first = do_issue_token(researcher).key
    client.post(reverse("research:token"), {"action": "create"})
    assert AuthToken.objects.filter(user=researcher).count() == 1
    assert _api(first).status_code == 401
    revoked = client.post(reverse("research:token"), {"action": "revoke"}, follow=True)
    assert "Token revoked" in revoked.content.decode() and "You have no API token." in revoked.content.decode()
    assert not AuthToken.objects.filter(user=researcher).exists()


def test_each_researcher_sees_and_revokes_only_their_own_token(researcher, site_admin):
    theirs = do_issue_token(site_admin)
    client = _client(researcher)
    page = client.get(reverse("research:token")).content.decode()
    assert "You have no API token." in page and theirs.key[:15] not in page
    client.post(reverse("research:token"), {"action": "revoke"})
    assert _api(theirs.key).status_code == 200


def test_an_unknown_action_is_refused_with_a_message(researcher):
    page = _client(researcher).post(reverse("research:token"), {"action": "steal"}, follow=True)
    assert "Unknown action: choose create or revoke." in page.content.decode()
    assert not AuthToken.objects.filter(user=researcher).exists()


def test_the_api_endpoint_uses_the_same_path_and_shows_the_key_once(researcher):
    client = _client(researcher)
    issued = client.post(reverse("api:token"), {"expires_in_days": 365}, content_type="application/json")
    assert issued.status_code == 201
    body = issued.json()
    key = body["token"]
    row = AuthToken.objects.get(user=researcher)
    assert round((row.expiry - row.created) / timedelta(days=1)) == 365 and body["expiry"].startswith(
        row.expiry.strftime("%Y")
    )
    page = client.get(reverse("research:token")).content.decode()
    assert f"{row.token_key}…</code>" in page and key not in page
    assert client.delete(reverse("api:token")).status_code == 204
    assert not AuthToken.objects.filter(user=researcher).exists()


def test_a_plain_account_cannot_reach_the_token_page(rater):
    assert _client(rater).post(reverse("research:token"), {"action": "create"}).status_code == 403
    assert not AuthToken.objects.filter(user=rater).exists()


def test_a_key_of_the_old_plain_kind_is_answered_with_what_to_do():
    refused = _api("0123456789abcdef0123456789abcdef01234567")
    assert refused.status_code == 401 and refused.json() == {"detail": PLAIN_KEY_WITHDRAWN}
    assert "create a new one" in PLAIN_KEY_WITHDRAWN


@pytest.mark.django_db(transaction=True)
def test_the_migration_deletes_the_plain_keys_of_the_old_token_table(researcher):
    """A database from before digests: DRF's token table with a plain key in it. The migration empties it."""
    migration = importlib.import_module("research.migrations.0012_withdraw_plain_text_api_tokens")
    with connection.schema_editor() as editor:
        editor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp NULL, user_id integer)"
        )
    try:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO authtoken_token (key, user_id) VALUES (%s, %s)", ["a" * 40, researcher.pk])
        with connection.schema_editor() as editor:
            migration.withdraw_plain_tokens(None, editor)
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM authtoken_token")
            assert cursor.fetchone() == (0,)
    finally:
        with connection.schema_editor() as editor:
            editor.execute("DROP TABLE authtoken_token")
    assert _api("a" * 40).json() == {"detail": PLAIN_KEY_WITHDRAWN}
