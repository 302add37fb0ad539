"""Request limits: bounded API pages, NUL bytes refused, body size caps."""

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
    from research.api.pagination import MAX_PAGE_SIZE, CappedLimitOffsetPagination

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


def test_json_body_with_nul_is_left_to_drf_which_names_the_field(api, sample_conversations):
    from datasets.models import DatasetVersion

    response = api.post("/api/dataset-versions/", {"name": "v\x00"}, content_type="application/json")
    assert response.status_code == 400 and "Null characters" in response.json()["name"][0]
    assert not DatasetVersion.objects.exists()


def test_text_without_nul_passes_through(api, sample_conversations):
    # A literal backslash-u-zero text (escaped in JSON as \\u0000) is not a NUL byte.
    assert api.get("/api/conversations/?search=%5Cu0000").status_code == 200


# --- Body sizes ---------------------------------------------------------------------------------


def test_oversized_api_body_is_a_413_and_nothing_is_saved(api, sample_conversations, settings):
    from datasets.models import DatasetVersion

    assert settings.ATTUNE_MAX_REQUEST_BYTES == settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 2_621_440
    before = DatasetVersion.objects.count()
    # 3,000,000 bytes of description plus the JSON around it: over the 2,621,440-byte limit.
    body = {"name": "huge", "description": "x" * 3_000_000}
    response = api.post("/api/dataset-versions/", body, content_type="application/json")
    assert response.status_code == 413
    assert "at most 2621440" in response.json()["detail"]
    assert DatasetVersion.objects.count() == before


def test_multipart_upload_of_any_size_is_refused(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    big = client.post("/admin/login/", {"username": "a", "f": SimpleUploadedFile("a.bin", b"\0" * 3_000_000)})
    assert big.status_code == 413 and big["Content-Type"].startswith("text/plain")
    # A small file is still no file Attune reads: a 400, not a spool to disk and not a 500.
    small = client.post("/admin/login/", {"username": "a", "f": SimpleUploadedFile("a.txt", b"hello")})
    assert small.status_code == 400


def test_too_many_form_fields_is_a_400(client):
    fields = {f"f{i}": "1" for i in range(1001)}
    assert client.post("/admin/login/", fields).status_code == 400


def test_request_size_settings_come_from_the_environment(tmp_path):
    from tests.web.test_settings_env import _settings_process

    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATA_UPLOAD_MAX_MEMORY_SIZE, s.FILE_UPLOAD_MAX_MEMORY_SIZE, s.DATA_UPLOAD_MAX_NUMBER_FIELDS)"
    )
    result = _settings_process(tmp_path, code, ATTUNE_MAX_REQUEST_BYTES="100000", ATTUNE_MAX_FORM_FIELDS="200")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["100000", "100000", "200"]
    too_small = _settings_process(tmp_path, "import django; django.setup()", ATTUNE_MAX_REQUEST_BYTES="1000")
    assert too_small.returncode != 0 and "ATTUNE_MAX_REQUEST_BYTES='1000'" in too_small.stderr
