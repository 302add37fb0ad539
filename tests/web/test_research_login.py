"""Signing in at the research login lands each person on a page they may open."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _sign_in(username: str, password: str, next_page: str = "") -> str:
    client = Client()
    url = "/research/login/" + (f"?next={next_page}" if next_page else "")
    response = client.post(url, {"username": username, "password": password})
    assert response.status_code == 302, response.content.decode()[:500]
    landing = response["Location"]
    assert client.get(landing).status_code == 200, landing
    return landing


def test_a_researcher_lands_on_the_dashboard(researcher):
    assert _sign_in("rita", "researcher-pass-123") == "/research/"


def test_a_rater_lands_on_their_rating_list_not_a_forbidden_dashboard(rater):
    assert _sign_in("ravi", "rater-pass-123") == "/research/rate/"


def test_a_next_address_still_wins(researcher):
    assert _sign_in("rita", "researcher-pass-123", "/research/token/") == "/research/token/"
