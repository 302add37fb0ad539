"""The distress protocol as a participant meets it, in a real headless Chromium, at 1280 px and on a phone.

The offline model says nothing about safety: the panel, the resources and the choices come from Attune's
own screen. The research team's side too: the flag on their pages and the email a real local SMTP server receives;
the participant's own answers as signals; a failed reply, which says so (never an earlier, unrelated message).
Screenshots go to artifacts/screenshots/participant/.
"""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

from attunebench import catalogue as cat
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


def send(page: Page, text: str) -> None:
    """Write a message in the chat and send it, as the participant does."""
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_an_urgent_message_gets_the_panel_under_it_and_stopping_gives_the_wellbeing_code(page: Page, site, request):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    send(page, URGENT)
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
    send(page, URGENT)
    expect(page.get_by_text("The reply is complete.")).to_be_visible()
    page.get_by_role("button", name="Continue the study").click()
    expect(page.get_by_role("heading", name="How you feel and what the reply did")).to_be_visible()


def test_a_concern_shows_the_resources_without_interrupting(page: Page, site):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    send(page, CONCERN)
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
    send(page, "My sister and I stopped talking and I miss her.")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The reply could not be fetched just now. Your message is saved.")
    expect(alert).not_to_contain_text("Please write a message")


def test_the_questions_about_a_flagged_reply_can_be_skipped_without_penalty(page: Page, site):
    participant = chatting(site)
    page.goto(f"/s/{participant.token}/")
    send(page, URGENT)
    expect(page.get_by_text("The reply is complete.")).to_be_visible()
    page.get_by_role("button", name="Continue without the questions about this reply").click()
    # straight back to the chat: the next message can be written, no question about that reply
    expect(page.get_by_label("Your message")).to_be_visible()
    expect(page.get_by_text("You chose to go on without the questions about this reply")).to_be_visible()
    expect(page.locator("[data-turn-counter]")).to_contain_text("Reply 2")
    event = SafetyEvent.objects.get()
    assert event.choice == "skip"
    assert event.turn.skipped_for_wellbeing and not event.turn.binary_judgements.exists()


@pytest.fixture
def smtp_inbox(settings):
    """A real SMTP server on a free local port, with Django's mail framework pointed at it."""
    import socket
    import threading

    from aiosmtpd.controller import Controller

    received: list = []
    arrived = threading.Event()

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append(envelope)
            arrived.set()
            return "250 OK"

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    yield received, arrived
    controller.stop()


def test_an_urgent_message_flags_the_conversation_for_the_research_team_and_emails_the_safety_contact(
    browser, live_server, site, smtp_inbox, researcher
):
    received, arrived = smtp_inbox
    Study.objects.filter(pk=site.study.pk).update(safety_contact_email="safety@example.org")
    participant = chatting(site)
    person = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    page = person.new_page()
    page.goto(f"/s/{participant.token}/")
    send(page, URGENT)
    expect(page.get_by_role("region", name="Before we go on")).to_be_visible()
    # choosing while the reply still streams keeps the chat page; the questions come once it is complete
    expect(page.get_by_text("The reply is complete.")).to_be_visible()
    page.get_by_role("button", name="Continue the study").click()
    expect(page.get_by_role("heading", name="How you feel and what the reply did")).to_be_visible()
    person.close()

    # The email leaves after the request's commit, on the server's side: wait for it to arrive.
    assert arrived.wait(timeout=60), "the safety contact's email never reached the SMTP server"
    assert received[0].rcpt_tos == ["safety@example.org"]
    message = received[0].content.decode()
    assert "urgent safety signal" in message and site.study.slug in message
    assert "pills" not in message  # never the participant's own words

    team = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    desk = team.new_page()
    desk.goto("/research/login/")
    desk.fill("#id_username", "rita")
    desk.fill("#id_password", "researcher-pass-123")
    desk.click("#login-button")
    expect(desk).not_to_have_url(re.compile("/login/"))
    desk.goto(f"/research/studies/{site.study.slug}/")
    expect(desk.locator('[data-figure="safety"]')).to_contain_text("1 urgent")
    desk.goto(f"/research/quality/{site.study.slug}/")
    expect(desk.locator("[data-safety-flag]")).to_contain_text("urgent")
    desk.goto(f"/research/studies/{site.study.slug}/safety/")
    expect(desk.get_by_role("cell", name="urgent").first).to_be_visible()
    expect(desk.get_by_text("pills")).to_have_count(0)
    team.close()


def test_a_distress_tag_and_wanting_safety_help_show_the_resources_back_in_the_chat(browser, live_server, site):
    """The participant's own answers are signals: Distressed at 7 and "yes" to wanting to be pointed to safety help
    (B18, preferred) on a calm message log a concern, and the chat shows the resources once."""
    participant = chatting(site)
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    page = context.new_page()
    page.goto(f"/s/{participant.token}/")
    send(page, "We talked about the holidays and who hosts this year.")
    page.get_by_role("link", name="Continue to questions about this reply").click()
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    page.locator("label[for=id_mood_Distressed]").click()
    page.get_by_label("Strength of \u201cDistressed\u201d (1 to 7)").select_option("7")
    for qid in cat.BINARY_QUESTION_IDS:
        wanted = cat.YES if qid == "B18" else cat.NO
        page.locator(f"label[for=id_observed_{qid}_{cat.YES_NO_NA.index(cat.NO)}]").click()
        page.locator(f"label[for=id_preferred_{qid}_{cat.YES_NO_NA.index(wanted)}]").click()
    attention = page.locator("#q-attention")
    instructed = re.search(r"choose \u2018(\w[\w ]*)\u2019", attention.inner_text()).group(1)
    value = {label: value for value, label in cat.YES_NO_NA_LABELS.items()}[instructed]
    page.locator(f"label[for=id_attention_check_{cat.YES_NO_NA.index(value)}]").click()
    page.get_by_role("button", name="Save and continue").click()

    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    page.get_by_role("button", name="Start from the suggested rewrite").click()
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="Comparing replies", exact=True)).to_be_visible()
    pairs = page.locator("fieldset.pair")
    for index in range(pairs.count()):
        pairs.nth(index).locator("label.pill").first.click()
    page.get_by_role("button", name="Save and continue").click()

    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    expect(page.get_by_role("note", name="Where to find support")).to_have_count(1)
    expect(page.get_by_role("region", name="Before we go on")).to_have_count(0)  # a concern never interrupts
    event = SafetyEvent.objects.get()
    assert (event.level, event.source) == ("concern", "annotation")
    assert set(event.signals) == {"high_distress_tag", "asked_for_safety_help"}
    context.close()
