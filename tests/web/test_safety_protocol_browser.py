"""The distress protocol as a participant meets it, in a real headless Chromium, at 1280 px and on a phone.

The offline model says nothing about safety: the panel, the resources and the choices come from Attune's
own screen. Also a failed reply, which says so (never an earlier, unrelated message). Screenshots go to
artifacts/screenshots/participant/.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

from collection import study_flow as flow
from collection.models import Participant, SafetyEvent, Study
from collection.setup import ensure_defaults
from tests.web.test_participant_browser import DESKTOP, shot, start_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
URGENT = (
    "Honestly I think everyone would be better off without me. I have pills saved up and I might take them tonight."
)
CONCERN = "I feel so hopeless lately, like nothing is ever going to get better."


@pytest.fixture
def site(live_server, settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    defaults = ensure_defaults()
    Study.objects.filter(pk=defaults.study.pk).update(wellbeing_completion_code="WELLBEING-42")
    return defaults


@pytest.fixture(params=[DESKTOP, PHONE], ids=["desktop", "phone"])
def page(request, browser, live_server):
    context = browser.new_context(viewport=request.param, base_url=live_server.url)
    context.set_default_timeout(10_000)
    opened = context.new_page()
    yield opened
    context.close()


def chatting(site) -> Participant:
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    return participant


def test_an_urgent_message_gets_the_panel_under_it_and_stopping_gives_the_wellbeing_code(page: Page, site, request):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill(URGENT)
    page.get_by_role("button", name="Send").click()
    panel = page.get_by_role("region", name="Before we go on")
    expect(panel).to_be_visible()
    expect(panel).to_contain_text("Samaritans")
    # directly under the participant's own message, before the model's reply
    assert page.evaluate(
        """() => { const items = [...document.querySelectorAll('.messages > li')];
                   const mine = items.findIndex(li => li.classList.contains('bubble-user'));
                   return items[mine + 1].classList.contains('safety-item'); }"""
    )
    expect(page.get_by_text("The reply is complete.")).to_be_visible()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_hidden()
    shot(page, f"40-safety-panel-{request.node.callspec.id}")
    page.get_by_role("button", name="Stop the study (you still get your completion code)").click()
    expect(page.get_by_role("heading", name="Thank you for taking part")).to_be_visible()
    expect(page.locator("[data-wellbeing-code]")).to_have_text("WELLBEING-42")
    shot(page, f"41-safety-stopped-{request.node.callspec.id}")
    event = SafetyEvent.objects.get()
    assert (event.level, event.choice) == ("urgent", "stop")
    assert Participant.objects.get(pk=participant.pk).stopped_at is not None


def test_continuing_after_the_panel_leads_to_the_questions(page: Page, site):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill(URGENT)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_text("The reply is complete.")).to_be_visible()
    page.get_by_role("button", name="Continue the study").click()
    expect(page.get_by_role("heading", name="How you feel and what the reply did")).to_be_visible()


def test_a_concern_shows_the_resources_without_interrupting(page: Page, site):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill(CONCERN)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("note", name="Where to find support")).to_be_visible()
    expect(page.get_by_role("region", name="Before we go on")).to_have_count(0)
    page.get_by_role("link", name="Continue to questions about this reply").click()
    expect(page.get_by_role("heading", name="How you feel and what the reply did")).to_be_visible()
    assert SafetyEvent.objects.get().level == "concern"


def test_a_failed_reply_says_so_not_an_earlier_message(page: Page, site):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    page.get_by_role("button", name="Send").click()  # empty: refused in words, nothing sent
    expect(page.get_by_role("alert")).to_contain_text("Please write a message before sending.")
    page.route("**/chat/reply/**", lambda route: route.fulfill(status=502, body="bad gateway"))
    page.get_by_label("Your message").fill("My sister and I stopped talking and I miss her.")
    page.get_by_role("button", name="Send").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The reply could not be fetched just now. Your message is saved.")
    expect(alert).not_to_contain_text("Please write a message")


def test_the_questions_about_a_flagged_reply_can_be_skipped_without_penalty(page: Page, site):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill(URGENT)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_text("The reply is complete.")).to_be_visible()
    page.get_by_role("button", name="Continue without the questions about this reply").click()
    # straight back to the chat: the next message can be written, no question about that reply
    expect(page.get_by_label("Your message")).to_be_visible()
    expect(page.get_by_text("You chose to go on without the questions about this reply")).to_be_visible()
    expect(page.locator("[data-turn-counter]")).to_contain_text("Reply 2")
    event = SafetyEvent.objects.get()
    assert event.choice == "skip"
    assert event.turn.skipped_for_wellbeing and not event.turn.binary_judgements.exists()
