"""Request limits (issue 13 item 5): bounded API pages, NUL bytes refused, body size caps."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def api(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def test_page_size_is_capped_not_an_error(api, sample_conversations, monkeypatch):
    from research.pagination import MAX_PAGE_SIZE, CappedLimitOffsetPagination

    assert MAX_PAGE_SIZE == CappedLimitOffsetPagination.max_limit == 500
    # A ceiling of 4 over the 15 sample conversations: a limit of ten million gets 4 rows.
    monkeypatch.setattr(CappedLimitOffsetPagination, "max_limit", 4)
    huge = api.get("/api/conversations/?limit=10000000")
    assert huge.status_code == 200
    body = huge.json()
    assert body["count"] == 15 and len(body["results"]) == 4 and "limit=4" in body["next"]
    # Beyond any database integer: still one capped page.
    assert len(api.get(f"/api/conversations/?limit={10**30}").json()["results"]) == 4


@pytest.mark.parametrize("query", ["limit=abc", "limit=-5", "limit=0", "limit=1e9", "offset=xyz", "offset=-1"])
def test_bad_limit_or_offset_gives_the_default_page(api, sample_conversations, query):
    response = api.get(f"/api/conversations/?{query}")
    assert response.status_code == 200
    # Default page of 50 holds all 15; a bad offset reads as 0.
    assert len(response.json()["results"]) == 15


def test_offset_past_the_end_is_an_empty_page(api, sample_conversations):
    response = api.get(f"/api/conversations/?offset={10**30}")
    assert response.status_code == 200 and response.json()["results"] == []
