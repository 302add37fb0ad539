"""Static files: hashed, compressed and cached for years once collectstatic has run; as they are before it
(the demo, a checkout, these tests), with nothing failing in between."""

from __future__ import annotations

import gzip

import pytest
from django.core.management import call_command
from django.http import HttpResponse
from django.templatetags.static import static
from django.test import RequestFactory
from whitenoise.middleware import WhiteNoiseMiddleware

CSS = "participant/participant.css"


def serve(path: str, **headers: str):
    """One request through a WhiteNoise built from the current settings (it reads the files when built)."""
    middleware = WhiteNoiseMiddleware(lambda request: HttpResponse(status=404))
    return middleware(RequestFactory().get(path, **headers))


def test_without_collectstatic_files_keep_their_names_and_are_served_from_the_source():
    assert static(CSS) == f"/static/{CSS}"
    response = serve(f"/static/{CSS}")
    assert response.status_code == 200
    assert "immutable" not in response["Cache-Control"]


@pytest.fixture
def collected(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "staticfiles"
    call_command("collectstatic", interactive=False, verbosity=0)
    return settings.STATIC_ROOT


def test_collected_files_get_hashed_names_compressed_copies_and_a_long_cache_lifetime(collected):
    url = static(CSS)
    assert url.startswith("/static/participant/participant.") and url != f"/static/{CSS}" and url.endswith(".css")
    assert (collected / "staticfiles.json").is_file()
    hashed = collected / url.removeprefix("/static/")
    assert hashed.is_file() and (collected / (url.removeprefix("/static/") + ".gz")).is_file()

    response = serve(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]
    assert response["Content-Encoding"] == "gzip"
    assert gzip.decompress(b"".join(response.streaming_content)) == hashed.read_bytes()


def test_a_file_missing_from_the_manifest_keeps_its_name_instead_of_failing_the_page(collected):
    assert static("participant/not-collected-yet.css") == "/static/participant/not-collected-yet.css"


def test_an_address_worked_out_once_is_the_same_each_time_and_follows_debug(collected, settings):
    hashed = static(CSS)
    assert static(CSS) == hashed != f"/static/{CSS}"
    settings.DEBUG = True  # Django names the unhashed file while debugging, read at each call
    assert static(CSS) == f"/static/{CSS}"
    settings.DEBUG = False
    assert static(CSS) == hashed
