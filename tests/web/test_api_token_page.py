"""A researcher manages their own API token on the research pages.

Created and shown once, then only its date and last four characters; revoked at
once; one path (research.access.api_tokens) for the page and /api/token/.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_token_is_shown_once_then_only_its_last_four_characters(researcher):
    client = _client(researcher)
    assert "You have no API token." in client.get(reverse("research:token")).content.decode()
    created = client.post(reverse("research:token"), {"action": "create"})
    assert created.status_code == 200 and "no-store" in created["Cache-Control"]
    key = Token.objects.get(user=researcher).key
    body = created.content.decode()
    assert f'<code id="token-key">{key}</code>' in body and "shown only this once" in body
    again = client.get(reverse("research:token")).content.decode()
    assert key not in again
    assert f"…{key[-4:]}</code>" in again and Token.objects.get(user=researcher).created.strftime("%Y-%m-%d") in again
    # The key works for the API, and the API says whose it is.
    api = Client().get(reverse("api:model-list"), HTTP_AUTHORIZATION=f"Token {key}")
    assert api.status_code == 200


def test_creating_again_replaces_and_revoking_ends_the_token(researcher):
    client = _client(researcher)
    client.post(reverse("research:token"), {"action": "create"})
    first = Token.objects.get(user=researcher).key
    client.post(reverse("research:token"), {"action": "create"})
    second = Token.objects.get(user=researcher).key
    assert first != second
    assert Client().get(reverse("api:model-list"), HTTP_AUTHORIZATION=f"Token {first}").status_code == 401
    revoked = client.post(reverse("research:token"), {"action": "revoke"}, follow=True)
    assert "Token revoked" in revoked.content.decode() and "You have no API token." in revoked.content.decode()
    assert not Token.objects.filter(user=researcher).exists()
    assert Client().get(reverse("api:model-list"), HTTP_AUTHORIZATION=f"Token {second}").status_code == 401


def test_each_researcher_sees_and_revokes_only_their_own_token(researcher, site_admin):
    theirs = Token.objects.create(user=site_admin)
    client = _client(researcher)
    page = client.get(reverse("research:token")).content.decode()
    assert "You have no API token." in page and theirs.key[-4:] not in page
    client.post(reverse("research:token"), {"action": "revoke"})
    assert Token.objects.filter(key=theirs.key).exists()


def test_an_unknown_action_is_refused_with_a_message(researcher):
    page = _client(researcher).post(reverse("research:token"), {"action": "steal"}, follow=True)
    assert "Unknown action: choose create or revoke." in page.content.decode()
    assert not Token.objects.filter(user=researcher).exists()


def test_the_api_endpoint_uses_the_same_path(researcher):
    client = _client(researcher)
    issued = client.post(reverse("api:token"))
    assert issued.status_code == 201
    key = issued.json()["token"]
    assert f"…{key[-4:]}</code>" in client.get(reverse("research:token")).content.decode()
    assert client.delete(reverse("api:token")).status_code == 204
    assert not Token.objects.filter(user=researcher).exists()


def test_a_plain_account_cannot_reach_the_token_page(rater):
    assert _client(rater).post(reverse("research:token"), {"action": "create"}).status_code == 403
    assert not Token.objects.filter(user=rater).exists()
