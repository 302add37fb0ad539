"""With Redis, a participant's session is read from the cache and kept in the database too.

A joined browser's session holds its study link; every participant page reads it. Read through the shared
cache it costs no query; written through to the database, a flushed cache (a Redis restart) loses nobody.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from collection.models import Participant, new_token
from collection.views import JOIN_SALT

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not settings.REDIS_URL, reason="sessions go through the cache only with Redis (REDIS_URL)"),
]


def joined_browser(study) -> tuple[Client, str]:
    cache.clear()  # the shared cache may hold other tests' enrolment counts for this address
    browser = Client(REMOTE_ADDR="203.0.113.40")
    start = signing.dumps(new_token(), salt=JOIN_SALT)
    response = browser.post(f"/join/{study.slug}/", {"start": start})
    assert response.status_code == 302
    return browser, response.url


def session_reads(browser: Client, path: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert browser.get(path).status_code in (200, 302)
    return [q["sql"] for q in queries.captured_queries if "django_session" in q["sql"]]


def test_a_participant_page_reads_the_session_from_the_cache_and_a_flushed_cache_loses_nothing(study):
    assert settings.SESSION_ENGINE == "django.contrib.sessions.backends.cached_db"
    browser, link = joined_browser(study)
    assert session_reads(browser, link) == []
    cache.clear()  # Redis restarted: the session comes back from the database, once
    reads = session_reads(browser, link)
    assert len(reads) == 1 and reads[0].lstrip().upper().startswith("SELECT")
    assert session_reads(browser, link) == []
    # the browser is still recognised as the participant it joined as
    assert browser.post(f"/join/{study.slug}/", {"choice": "continue"}).url == link
    assert Participant.objects.count() == 1
