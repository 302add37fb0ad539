"""Throttles and budgets against abuse, each on a clock the test moves.

Findings covered: open enrolment had no throttle (100 participants in 7.4 s,
each with its own chat quota); 40 wrong passwords in a row were accepted; the
API had no throttle; live model calls had no per-study budget. The enrolment
windows are the shared sliding-window logs (Redis when REDIS_URL is set), the
login lockout is django-axes' database handler, the API throttles are Django
REST framework's over the default cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.conf import settings as django_settings
from django.core import signing
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from annotation.models import AlternateResponses
from collection import study_flow as flow
from collection.models import OriginalModel, Participant, Study, new_token
from collection.views import JOIN_SALT
from research.access.api_tokens import do_issue_token
from research.api import throttles
from tests.clock import FakeClock
from tests.web.test_participant_flow import Walker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_windows(settings, monkeypatch):
    """Every test starts with empty windows: the in-process log is replaced, Redis keys of these limits removed."""
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    monkeypatch.setattr(flow, "_window_log", None)
    if os.environ.get("REDIS_URL"):
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        for key in client.scan_iter("attune:enrol-*"):
            client.delete(key)
    cache.clear()


@pytest.fixture
def enrol_clock(monkeypatch) -> FakeClock:
    clock = FakeClock(5_000_000.0)
    monkeypatch.setattr(flow, "enrol_clock", clock)
    return clock


def join(study: Study, address: str = "203.0.113.7", **extra: str):
    """One new browser pressing Start on the open enrolment page (its own signed start token)."""
    start = signing.dumps(new_token(), salt=JOIN_SALT)
    return Client(REMOTE_ADDR=address, **extra).post(f"/join/{study.slug}/", {"start": start})


# ---------------------------------------------------------------------------
# Open enrolment
# ---------------------------------------------------------------------------


def test_enrolment_is_throttled_per_address_over_a_sliding_hour(study, settings, enrol_clock):
    settings.ATTUNE_ENROL_PER_ADDRESS_PER_HOUR = 3
    assert [join(study).status_code for _ in range(3)] == [302, 302, 302]
    refused = join(study)
    assert refused.status_code == 429 and refused["Retry-After"] == "600"
    assert "A lot of people are joining this study just now" in refused.content.decode()
    assert "nothing has been recorded" in refused.content.decode()
    assert Participant.objects.count() == 3
    assert join(study, address="198.51.100.20").status_code == 302  # another address has its own window
    enrol_clock.now += 3_600  # the first three joins leave the window
    assert join(study).status_code == 302
    assert Participant.objects.count() == 5


def test_enrolment_is_throttled_per_study(study, settings, enrol_clock):
    settings.ATTUNE_ENROL_PER_STUDY_PER_HOUR = 2
    assert join(study, "192.0.2.1").status_code == 302
    assert join(study, "192.0.2.2").status_code == 302
    assert join(study, "192.0.2.3").status_code == 429  # a third address, but the study's hour is full
    other = Study.objects.create(
        slug="second", title="Second", information="i", crisis_resources="c", open_enrolment=True
    )
    assert join(other, "192.0.2.3").status_code == 302  # other studies are not affected
    enrol_clock.now += 1_800
    assert join(study, "192.0.2.4").status_code == 429
    enrol_clock.now += 1_800  # one hour after the first two
    assert join(study, "192.0.2.4").status_code == 302


def test_a_returning_browser_is_not_counted_again(study, settings, enrol_clock):
    settings.ATTUNE_ENROL_PER_ADDRESS_PER_HOUR = 1
    browser = Client(REMOTE_ADDR="203.0.113.9")
    start = signing.dumps(new_token(), salt=JOIN_SALT)
    first = browser.post(f"/join/{study.slug}/", {"start": start})
    assert browser.post(f"/join/{study.slug}/", {"start": start}).url == first.url  # a double click: no refusal
    # the same browser choosing "Continue as the previous participant" resumes, no new participant, no refusal
    assert browser.post(f"/join/{study.slug}/", {"choice": "continue"}).url == first.url
    assert Participant.objects.count() == 1


def test_behind_the_tls_proxy_the_forwarded_address_counts(study, settings, enrol_clock):
    settings.ATTUNE_ENROL_PER_ADDRESS_PER_HOUR = 1
    settings.ATTUNE_TRUSTED_PROXIES = 1
    proxy = "127.0.0.1"  # every connection comes from the proxy
    assert join(study, proxy, HTTP_X_FORWARDED_FOR="203.0.113.1").status_code == 302
    assert join(study, proxy, HTTP_X_FORWARDED_FOR="203.0.113.2").status_code == 302
    # a client cannot choose its address by writing its own X-Forwarded-For: the proxy appends the real one
    assert join(study, proxy, HTTP_X_FORWARDED_FOR="10.9.9.9, 203.0.113.1").status_code == 429


def test_a_study_with_a_participant_cap_stops_taking_people(study, enrol_clock):
    Study.objects.filter(pk=study.pk).update(max_participants=2)
    flow.do_enrol(study)  # an invited participant takes a place too
    assert join(study, "192.0.2.10").status_code == 302
    full = join(study, "192.0.2.11")
    assert full.status_code == 403
    assert "This study has all the participants it needs" in full.content.decode()
    page = Client().get(f"/join/{study.slug}/")
    assert page.status_code == 403 and b"Start</button>" not in page.content
    assert Participant.objects.filter(study=study).count() == 2
    with pytest.raises(flow.StudyFull):
        flow.do_open_enrol(Study.objects.get(pk=study.pk))


# ---------------------------------------------------------------------------
# Login lockout (django-axes): the research login and the admin login
# ---------------------------------------------------------------------------


def _login(client: Client, path: str, username: str, password: str):
    return client.post(path, {"username": username, "password": password})


@pytest.mark.embedded  # its user comes from a fixture looked up by name: the test database all the same
@pytest.mark.parametrize(
    ("path", "fixture_name", "password"),
    [
        ("/research/login/", "researcher", "researcher-pass-123"),
        ("/admin/login/", "site_admin", "admin-pass-123"),
    ],
    ids=["research-login", "admin-login"],
)
def test_wrong_passwords_lock_the_username_from_that_address(request, settings, path, fixture_name, password):
    user = request.getfixturevalue(fixture_name)
    attacker = Client(REMOTE_ADDR="203.0.113.66")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(attacker, path, user.username, "guess").status_code == 200  # the form again, with its error
    locked = _login(attacker, path, user.username, "guess")
    assert locked.status_code == 429
    assert locked["Retry-After"] == str(15 * 60)
    assert "Too many failed log-ins" in locked.content.decode() and "15 minutes" in locked.content.decode()
    # while locked even the right password is refused from there, and nothing is signed in
    again = _login(attacker, path, user.username, password)
    assert again.status_code == 429 and "_auth_user_id" not in attacker.session
    # the real user elsewhere is not locked out by someone else's guesses
    assert _login(Client(REMOTE_ADDR="198.51.100.5"), path, user.username, password).status_code == 302
    # after the cool-off (the recorded attempts moved back instead of waiting) the right password works
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(minutes=1))
    assert _login(attacker, path, user.username, password).status_code == 302


def test_login_lockout_settings_come_from_the_environment():
    assert django_settings.AXES_FAILURE_LIMIT == 5
    assert timedelta(minutes=15) == django_settings.AXES_COOLOFF_TIME
    assert django_settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert django_settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


# ---------------------------------------------------------------------------
# API throttles (Django REST framework)
# ---------------------------------------------------------------------------


def test_the_api_answers_429_json_with_retry_after_over_the_rate(researcher, django_user_model, settings, monkeypatch):
    from research.access.roles import do_make_researcher

    settings.ATTUNE_API_RATE = "3/minute"
    clock = FakeClock(1_000.0)
    monkeypatch.setattr(throttles, "api_clock", clock)
    api = Client(HTTP_AUTHORIZATION=f"Token {do_issue_token(researcher).key}")
    assert [api.get("/api/conversations/").status_code for _ in range(3)] == [200, 200, 200]
    clock.now += 20
    over = api.get("/api/conversations/")
    assert over.status_code == 429
    assert over["Content-Type"] == "application/json"
    assert over["Retry-After"] == "40"  # the oldest of the three leaves the minute 40 s from now
    assert over.json()["detail"].startswith("Request was throttled.")
    other = django_user_model.objects.create_user("rosa-api", password="another-pass-123")
    do_make_researcher(other)
    assert Client(HTTP_AUTHORIZATION=f"Token {do_issue_token(other).key}").get("/api/").status_code == 200
    clock.now += 41
    assert api.get("/api/conversations/").status_code == 200


def test_a_malformed_api_rate_stops_start_up_naming_the_variable(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "attune_site.settings",
        "ATTUNE_DATA_DIR": str(tmp_path),
        "ATTUNE_API_RATE": "lots",
    }
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert result.returncode != 0
    assert "ATTUNE_API_RATE='lots' is not a rate" in result.stderr


# ---------------------------------------------------------------------------
# The study's live-model budget
# ---------------------------------------------------------------------------


def test_a_spent_live_budget_stops_calls_before_the_provider_and_tells_everyone(
    client, participant, study, settings, fake_openai_server, researcher
):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    Study.objects.filter(pk=study.pk).update(live_call_budget=1, min_turns=1)
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name="budget-live", litellm_model="openai/budget-live", api_base=fake_openai_server.api_base
    )
    walker = Walker(client, participant)
    walker.to_chat()
    walker.send("I have been sleeping badly.", 1)
    assert walker.reply(1)[-1]["type"] == "done"  # the one call the budget allows
    assert len(fake_openai_server.requests) == 1
    walker.annotate(1)  # the improved-reply rewrite would be a second call: it is made offline instead
    assert len(fake_openai_server.requests) == 1
    assert AlternateResponses.objects.get().llm_improved != fake_openai_server.rewrite

    walker.send("And today was worse.", 2)
    events = walker.reply(2)
    assert events == [{"type": "error", "message": flow.LIVE_BUDGET_MESSAGE}]
    assert "Your message is saved" in flow.LIVE_BUDGET_MESSAGE
    assert len(fake_openai_server.requests) == 1  # the provider was never asked
    assert Study.objects.get(pk=study.pk).live_calls_used == 1

    researcher_client = Client()
    researcher_client.force_login(researcher)
    html = researcher_client.get("/research/collection/").content.decode()
    assert "1 / 1" in html and "budget spent" in html

    Study.objects.filter(pk=study.pk).update(live_call_budget=5)  # the team raises it; the retry goes through
    assert walker.reply(2)[-1]["type"] == "done"
    assert len(fake_openai_server.requests) == 2


def test_claims_never_pass_the_budget(study):
    Study.objects.filter(pk=study.pk).update(live_call_budget=2, live_calls_used=0)
    assert [flow.claim_live_call(study) for _ in range(4)] == [True, True, False, False]
    assert Study.objects.get(pk=study.pk).live_calls_used == 2
    Study.objects.filter(pk=study.pk).update(live_call_budget=None)
    assert flow.claim_live_call(study)  # no budget: every call is allowed (and still counted)
    assert Study.objects.get(pk=study.pk).live_calls_used == 3


def test_offline_replies_spend_nothing(client, participant, study):
    Study.objects.filter(pk=study.pk).update(live_call_budget=0)
    walker = Walker(client, participant)
    walker.to_chat()
    walker.send("Hello", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    assert Study.objects.get(pk=study.pk).live_calls_used == 0
