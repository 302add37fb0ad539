"""A platform-recruited participant in a real browser: entry URL → study → completion redirect,
a returning one, one who does not consent, and one without the ids.

The platform's completion URL is intercepted in the browser (no network), so the
test sees exactly where the participant is sent and with which code. The middle
of the study (chat and annotation, covered by test_participant_browser) is
walked with the test client on the same participant.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import Page, Route, expect

from attunebench import catalogue as cat
from collection.forms import Q1_SCREEN_LABELS
from collection.models import Participant, Study, hash_platform_id
from tests.web.test_participant_browser import DESKTOP, fill_panas, panas_ratings, shot, token_of
from tests.web.test_participant_flow import Walker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PLATFORM = "https://app.prolific.com/submissions/complete"
PID = "60a1b2c3d4e5f60718293a4b"


@pytest.fixture
def site(live_server, settings):
    from collection.setup import ensure_defaults

    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    defaults = ensure_defaults()
    Study.objects.filter(pk=defaults.study.pk).update(
        platform_completion_url=PLATFORM,
        platform_completion_code="C1DONE",
        platform_withdrawal_code="C2WITHDREW",
        platform_screenout_code="C3NOCONSENT",
    )
    defaults.study.refresh_from_db()
    return defaults


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    context.set_default_timeout(10_000)
    reached: list[str] = []

    def platform(route: Route) -> None:
        reached.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<title>Prolific</title><h1>Submission received</h1>")

    context.route(re.compile(r"^https://app\.prolific\.com/.*"), platform)
    opened = context.new_page()
    opened.platform_urls = reached  # type: ignore[attr-defined]
    yield opened
    context.close()


def entry(site, pid: str = PID, session: str = "sess-1") -> str:
    return f"/enter/{site.study.slug}/?PROLIFIC_PID={pid}&STUDY_ID=pst-1&SESSION_ID={session}"


def test_from_the_entry_url_to_the_completion_redirect_and_back_again(page: Page, site, live_server):
    page.goto(entry(site))
    shot(page, "r1-entry")
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="About this study")).to_be_visible()
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()

    # the middle of the study, on the same participant, through the same pages
    participant = Participant.objects.get(platform_id_hash=hash_platform_id(PID))
    participant.token = token_of(page)
    walker = Walker(Client(), participant)
    walker.profile()
    walker.pre_panas()
    walker.topic()
    for number in range(1, site.study.min_turns + 1):
        walker.turn(number)
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})

    page.goto(f"/s/{participant.token}/")
    expect(page.get_by_role("heading", name="How do you feel now, after the chat?")).to_be_visible()
    fill_panas(page, panas_ratings(2))
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="Your view of the conversation")).to_be_visible()
    page.get_by_label(Q1_SCREEN_LABELS[cat.Q1_OPTIONS[0]], exact=True).check()
    page.get_by_label(cat.Q2_OPTIONS[2], exact=True).check()
    page.get_by_label(cat.Q3_OPTIONS[1], exact=True).check()
    for branch, rating in {"perceiving": 6, "facilitating": 5, "understanding": 4, "managing": 3}.items():
        page.check(f"#id_branch_{branch}_{rating - 1}")
    page.get_by_role("button", name="Finish").click()

    expect(page.get_by_role("heading", name="Submission received")).to_be_visible()
    assert page.url == f"{PLATFORM}?cc=C1DONE"
    assert page.platform_urls == [f"{PLATFORM}?cc=C1DONE"]  # type: ignore[attr-defined]

    # the same id returning (another session): its own finished study, never a new participant
    page.goto(entry(site, session="sess-2"))
    expect(page.get_by_text("Welcome back")).to_be_visible()
    page.get_by_role("button", name="Continue the study").click()
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    assert Participant.objects.filter(study=site.study).count() == 1
    page.get_by_role("link", name="Return to your recruitment website").click()
    expect(page.get_by_role("heading", name="Submission received")).to_be_visible()
    assert page.url == f"{PLATFORM}?cc=C1DONE"


def test_a_returning_id_resumes_mid_study(page: Page, site):
    page.goto(entry(site))
    page.get_by_role("button", name="Start").click()
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    page.context.clear_cookies()  # another device: the platform repeats the session id of the enrolment
    page.goto(entry(site))
    page.get_by_role("button", name="Continue the study").click()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    assert Participant.objects.count() == 1
    page.context.clear_cookies()  # someone who knows only the platform id: a calm page, no way in
    response = page.goto(entry(site, session="sess-9"))
    assert response is not None and response.status == 409
    expect(page.get_by_role("status")).to_contain_text("already in progress")
    assert page.get_by_role("button", name="Continue the study").count() == 0


def test_not_consenting_returns_with_the_screen_out_code(page: Page, site):
    page.goto(entry(site, pid="declines"))
    page.get_by_role("button", name="Start").click()
    page.get_by_role("link", name="I do not want to take part").click()
    expect(page.get_by_role("heading", name="You do not have to take part")).to_be_visible()
    shot(page, "r2-not-taking-part")
    page.get_by_role("button", name="I do not want to take part").click()
    expect(page.get_by_role("heading", name="Submission received")).to_be_visible()
    assert page.url == f"{PLATFORM}?cc=C3NOCONSENT"


def test_withdrawing_returns_with_the_withdrawal_code(page: Page, site):
    page.goto(entry(site, pid="withdraws"))
    page.get_by_role("button", name="Start").click()
    page.get_by_role("link", name="Withdraw from the study").click()
    page.get_by_role("button", name=re.compile("withdraw", re.I)).first.click()
    expect(page.get_by_role("heading", name="You have withdrawn")).to_be_visible()
    page.get_by_role("link", name="Return to your recruitment website").click()
    expect(page.get_by_role("heading", name="Submission received")).to_be_visible()
    assert page.url == f"{PLATFORM}?cc=C2WITHDREW"


def test_arriving_without_the_ids_gets_a_calm_page(page: Page, site):
    response = page.goto(f"/enter/{site.study.slug}/")
    assert response is not None and response.status == 400
    expect(page.get_by_role("status")).to_contain_text("missing the details your recruitment website adds")
    shot(page, "r3-no-ids")
    assert Participant.objects.count() == 0
