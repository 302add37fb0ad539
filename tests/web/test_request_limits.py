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


# --- NUL bytes ------------------------------------------------------------------------------------
# SQLite stores a NUL, PostgreSQL raises on it: both must answer 400 before any query runs.


@pytest.mark.parametrize(
    "url",
    [
        "/api/conversations/?search=%00",
        "/api/conversations/?category=Grief%00",
        "/api/conversations/conv%00x/",
        "/api/runs/?em%00=1",
    ],
)
def test_api_nul_byte_is_a_json_400(api, sample_conversations, url):
    response = api.get(url)
    assert response.status_code == 400
    assert "NUL byte" in response.json()["detail"]


def test_participant_path_with_nul_is_a_plain_400(client):
    response = client.get("/s/abc%00def/")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain") and b"the path contains a NUL byte" in response.content


def test_form_field_with_nul_is_refused_and_nothing_is_looked_up(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.post("/admin/login/", {"username": "ad\x00min", "password": "x"})
    assert response.status_code == 400 and b"form field 'username'" in response.content


def test_json_body_with_nul_is_refused(api, sample_conversations):
    from datasets.models import DatasetVersion

    before = DatasetVersion.objects.count()
    response = api.post("/api/dataset-versions/", {"name": "v\x00"}, content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"].startswith("the JSON body")
    assert DatasetVersion.objects.count() == before


def test_text_without_nul_passes_through(api, sample_conversations):
    # A literal backslash-u-zero text (escaped in JSON as \\u0000) is not a NUL byte.
    assert api.get("/api/conversations/?search=%5Cu0000").status_code == 200
