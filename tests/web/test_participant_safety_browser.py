"""Nothing lost, meaningful comparisons and public pages, in a real headless Chromium.

Two tabs on one study link, a shared device opening /join/ twice, text over
the length limits, reloads of half-written boxes, the Back button after a
refused form, the ideal reply's starting point with the identical comparison
skipped, streamed line breaks and right-to-left text, and the error pages at
390 px. Screenshots go to artifacts/screenshots/participant/ (git-ignored).
"""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

from annotation import turn_flow as tf
from annotation.models import AlternateResponses, PairwiseComparison
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import OriginalModel, Participant, Turn
from collection.setup import ensure_defaults
from tests.web.axe_check import assert_accessible
from tests.web.test_participant_browser import DESKTOP, SHOT_DIR, add_answered_turn, shot, start_chat, token_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def site(live_server, settings):
    """Defaults installed in the (flushed) live database, and a quick offline stream."""
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    return ensure_defaults()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    context.set_default_timeout(10_000)
    opened = context.new_page()
    yield opened
    context.close()


PHONE = {"width": 390, "height": 844}


def phone_shot(page: Page, name: str) -> None:
    """A 390 px screenshot, nothing may scroll sideways at that width, and axe-core finds no violation."""
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    assert_accessible(page, name)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, f"{name} scrolls sideways at 390 px"
    page.screenshot(path=str(SHOT_DIR / f"{name}-390.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


def to_rewrite_step(participant: Participant) -> Turn:
    """A participant on the ideal-reply page of their first turn, through the actions the pages call."""
    conversation = start_chat(participant)
    turn = add_answered_turn(conversation, "I moved cities for work and I feel very alone in the evenings.")
    tf.do_start_annotation(turn)
    asked = tf.asked_question_ids(turn)
    tf.do_save_answers(turn, [], dict.fromkeys(asked, ("no", "no")), asked)
    assert tf.locate_annotation(turn).step == tf.REWRITE
    return Turn.objects.get(pk=turn.pk)


# ---------------------------------------------------------------------------
# Nothing lost: two tabs, a shared device, length limits, reloads, Back
# ---------------------------------------------------------------------------


def test_two_tabs_the_stale_one_is_told_and_keeps_its_text(page, site):
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    other = page.context.new_page()
    page.goto(f"/s/{participant.token}/")
    other.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill("Tab one: my flatmate moved out and I miss her.")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()

    stale_text = "Tab two: something quite different that must not vanish."
    other.get_by_label("Your message").fill(stale_text)
    other.get_by_role("button", name="Send").click()
    expect(other.get_by_role("alert")).to_contain_text("this message was not sent")
    expect(other.get_by_label("Your message")).to_have_value(stale_text)
    expect(other.get_by_role("link", name="Go to where you are now")).to_be_visible()
    shot(other, "30-stale-chat-tab")
    assert [t.user_message for t in Turn.objects.all()] == ["Tab one: my flatmate moved out and I miss her."]

    # both tabs on the ideal-reply page: the one that saves second gets the calm page with its text
    turn = Turn.objects.get()
    tf.do_start_annotation(turn)
    asked = tf.asked_question_ids(turn)
    tf.do_save_answers(turn, [], dict.fromkeys(asked, ("yes", "yes")), asked)
    page.goto(f"/s/{participant.token}/")
    other.goto(f"/s/{participant.token}/")
    expect(other.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    page.get_by_label("The reply you would have wanted").fill("Saved from the first tab.")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="Comparing replies")).to_be_visible()
    other.get_by_label("The reply you would have wanted").fill("Written in the second tab, line one\nline two")
    other.get_by_role("button", name="Save and continue").click()
    expect(other.get_by_role("heading", name="This page was out of date")).to_be_visible()
    expect(other.get_by_label("The reply you would have wanted")).to_have_value(
        "Written in the second tab, line one\nline two"
    )
    expect(other.get_by_role("button", name="Copy this text")).to_be_visible()
    shot(other, "31-stale-page")
    phone_shot(other, "31-stale-page")
    assert AlternateResponses.objects.get(turn=turn).human_edited == "Saved from the first tab."
    other.close()


def test_shared_device_join_twice_asks_and_makes_someone_new(page, site, browser, live_server):
    page.goto(f"/join/{site.study.slug}/")
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="About this study")).to_be_visible()
    first = token_of(page)

    page.goto(f"/join/{site.study.slug}/")  # the next person, same browser
    expect(page.get_by_role("heading", name="Is this a new person?")).to_be_visible()
    expect(page.get_by_role("button", name="Continue as the previous participant")).to_be_visible()
    assert "About this study" not in page.content()
    shot(page, "32-join-shared-device")
    page.get_by_role("button", name="I\u2019m someone new").click()
    expect(page.get_by_role("heading", name="About this study")).to_be_visible()
    assert token_of(page) != first
    assert Participant.objects.count() == 2

    # without the script nothing stops a double click: still one participant per start page
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url, java_script_enabled=False)
    plain = context.new_page()
    plain.goto(f"/join/{site.study.slug}/")
    plain.get_by_role("button", name="Start").dblclick()
    expect(plain.get_by_role("heading", name="About this study")).to_be_visible()
    assert Participant.objects.count() == 3
    context.close()


def test_length_limits_are_counted_live_and_never_cut(page, site):
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    page.goto(f"/s/{participant.token}/")
    box = page.get_by_label("Your message")
    counter = page.locator("#count-message")
    expect(counter).to_have_text("0 of 4000 characters")
    long_text = ("I need to get all of this out. " * 140)[:4050]
    box.fill(long_text)  # as a paste would: nothing cuts it
    expect(box).to_have_value(long_text)
    expect(counter).to_have_text(re.compile(r"^4050 of 4000 characters: 50 too many"))
    expect(counter).to_have_class(re.compile("is-over"))
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert")).to_contain_text("This is 4050 characters long and the limit is 4000")
    expect(box).to_have_value(long_text)
    shot(page, "33-length-limit")
    assert not Turn.objects.exists()
    box.fill(long_text[:3990])
    expect(counter).to_have_text("3990 of 4000 characters")


def finish_chat(participant: Participant) -> None:
    conversation = start_chat(participant)
    for n in range(1, 4):
        turn = add_answered_turn(conversation, f"Message {n}")
        tf.do_start_annotation(turn)  # annotated through the same actions the pages call
        asked = tf.asked_question_ids(turn)
        tf.do_save_answers(turn, [], dict.fromkeys(asked, ("no", "no")), asked)
        tf.do_save_rewrite(turn, f"Ideal reply {n}", ["general"])
        positions = PairwiseComparison.objects.filter(turn=turn).values_list("position", flat=True)
        tf.do_save_comparisons(turn, dict.fromkeys(positions, "A"))
    flow.do_finish_chat(conversation)
    flow.do_save_post_panas(conversation, dict.fromkeys(cat.PANAS_ITEMS, 4))


def test_survey_text_survives_reload_and_back_never_resubmits(page, site):
    participant = flow.do_enrol(site.study)
    finish_chat(participant)
    page.goto(f"/s/{participant.token}/")
    expect(page.get_by_role("heading", name="Your view of the conversation")).to_be_visible()
    page.get_by_label(re.compile("^Anything else that felt off")).fill("It repeated itself")
    page.get_by_label(re.compile("^Anything else you would like to tell")).fill("Half a thought, then")
    page.get_by_label(cat.Q2_OPTIONS[1], exact=True).check()
    page.reload()
    expect(page.get_by_label(re.compile("^Anything else that felt off"))).to_have_value("It repeated itself")
    expect(page.get_by_label(re.compile("^Anything else you would like to tell"))).to_have_value("Half a thought, then")
    expect(page.get_by_label(cat.Q2_OPTIONS[1], exact=True)).to_be_checked()

    # a refused submission redirects: the page is a GET, so Back and reload never resubmit
    methods: list[str] = []
    page.on("request", lambda request: methods.append(request.method))
    page.get_by_role("button", name="Finish").click()
    expect(page.get_by_role("heading", name="Some answers need attention")).to_be_visible()
    assert methods[:2] == ["POST", "GET"]
    expect(page.get_by_label(re.compile("^Anything else you would like to tell"))).to_have_value("Half a thought, then")
    shot(page, "34-survey-refused")
    methods.clear()
    page.reload()
    page.go_back()
    page.go_forward()
    assert "POST" not in methods
    expect(page.get_by_role("heading", name="Your view of the conversation")).to_be_visible()


# ---------------------------------------------------------------------------
# Comparisons that mean something: the ideal reply's start, identical texts skipped
# ---------------------------------------------------------------------------


def test_ideal_reply_start_choice_and_identical_comparison_skipped(page, site):
    participant = flow.do_enrol(site.study)
    turn = to_rewrite_step(participant)
    improved = AlternateResponses.objects.get(turn=turn).llm_improved
    page.goto(f"/s/{participant.token}/")
    box = page.get_by_label("The reply you would have wanted")
    expect(box).to_have_value("")  # starts empty by default
    shot(page, "35-ideal-reply-start")
    url = page.url
    page.get_by_role("button", name="Start from the model\u2019s reply").click()
    expect(box).to_have_value(turn.llm_response)
    assert page.url == url  # filled in place, no page load
    expect(page.get_by_role("button", name="Start from the model\u2019s reply")).to_have_attribute(
        "aria-pressed", "true"
    )
    page.get_by_role("button", name="Start from the suggested rewrite").click()
    expect(box).to_have_value(improved)
    expect(page.locator("#count-human_edited")).to_have_text(f"{len(improved)} of 4000 characters")
    page.get_by_role("button", name="Save and continue").click()

    # "general" is chosen on the ideal-reply page by default, so its comparisons follow at once
    expect(page.get_by_role("heading", name="Comparing replies")).to_be_visible()
    expect(page.locator("[data-skipped-identical]")).to_have_text(
        "Not asked: the suggested rewrite and your ideal reply are the same text, so there is nothing to choose between."
    )
    pairs = page.locator("fieldset.pair")
    expect(pairs).to_have_count(2)
    shot(page, "36-compare-identical-skipped")
    for name in {p.locator("input[type=radio]").first.get_attribute("name") for p in pairs.all()}:
        page.check(f"input[name='{name}'][value='A']")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    turn.refresh_from_db()
    assert turn.annotation_completed_at is not None
    assert turn.skipped_comparisons == [
        {"questionId": "general", "responseA": "alternate", "responseB": "human", "reason": "identical"}
    ]
    assert {frozenset((c.response_a, c.response_b)) for c in PairwiseComparison.objects.filter(turn=turn)} == {
        frozenset(("original", "alternate")),
        frozenset(("original", "human")),
    }


# ---------------------------------------------------------------------------
# Words and pages for the public
# ---------------------------------------------------------------------------


def test_streamed_reply_keeps_line_breaks_and_text_follows_its_direction(
    page, site, settings, fake_openai_server, live_server
):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name="acme-lines", provider="acme", litellm_model="openai/acme-lines", api_base=fake_openai_server.api_base
    )
    fake_openai_server.reply = "That sounds heavy.\n\nWhat helps a little in the evenings?"
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill("أشعر بالوحدة في المساء\nخاصة بعد العمل")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()
    streamed = page.locator(".bubble-model .bubble-text").last
    assert streamed.inner_text() == "That sounds heavy.\n\nWhat helps a little in the evenings?"
    assert streamed.get_attribute("dir") == "auto"
    assert streamed.evaluate("el => getComputedStyle(el).whiteSpace") == "pre-wrap"
    mine = page.locator(".bubble-user .bubble-text").last
    assert mine.get_attribute("dir") == "auto"
    assert mine.evaluate("el => getComputedStyle(el).direction") in ("rtl", "ltr")  # plaintext picks per paragraph
    assert mine.inner_text() == "أشعر بالوحدة في المساء\nخاصة بعد العمل"
    shot(page, "37-streamed-newlines-rtl")
    page.reload()  # the saved copy shows the same line breaks
    assert page.locator(".bubble-model .bubble-text").last.inner_text() == fake_openai_server.reply


def test_error_pages_at_phone_width(page, site, monkeypatch):
    participant = flow.do_enrol(site.study)
    page.set_viewport_size(PHONE)
    response = page.goto("/s/not-a-real-study-link/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="We could not find this page")).to_be_visible()
    expect(page.get_by_text("Your answers are safe")).to_be_visible()
    expect(page.get_by_role("heading", name="If you are feeling distressed")).to_be_visible()
    phone_shot(page, "38-error-404")

    # an expired form (the CSRF cookie is gone): the calm page, not Django's developer text
    page.goto(f"/s/{participant.token}/")
    page.context.clear_cookies()
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="This page had expired, so it was not sent")).to_be_visible()
    expect(page.get_by_text(site.study.crisis_resources[:40])).to_be_visible()
    expect(page.get_by_role("link", name="Back to the study")).to_be_visible()
    phone_shot(page, "39-error-csrf")

    def broken(_token):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(flow, "enter", broken)  # how every participant page starts
    response = page.goto(f"/s/{participant.token}/")
    assert response.status == 500
    expect(page.get_by_role("heading", name="Sorry, something went wrong on our side")).to_be_visible()
    expect(page.get_by_text("Everything you saved before this page is safe")).to_be_visible()
    phone_shot(page, "40-error-500")

    icon = page.request.get("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"


def test_join_closed_when_the_study_is_full(page, site):
    site.study.max_participants = 1
    site.study.save(update_fields=["max_participants"])
    flow.do_enrol(site.study)
    response = page.goto(f"/join/{site.study.slug}/")
    assert response.status == 403
    expect(page.locator("main")).to_contain_text(flow.STUDY_FULL_MESSAGE)
    shot(page, "41-join-closed")
    assert Participant.objects.count() == 1


def test_chat_not_ready_and_annotation_continue_pages(page, site):
    # no active model: the topic page's submission gets the calm "not ready" page
    participant = flow.do_enrol(site.study)
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "35-44", [], [], None)
    flow.do_save_pre_panas(participant, dict.fromkeys(cat.PANAS_ITEMS, 3))
    OriginalModel.objects.update(active=False)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Debt worries", exact=True).check()
    page.get_by_label(cat.TOPIC_ATTITUDE_OPTIONS[0], exact=True).check()
    page.get_by_role("button", name="Start the chat").click()
    expect(page.get_by_role("heading", name="The chat is not ready yet")).to_be_visible()
    shot(page, "42-chat-not-ready")
    OriginalModel.objects.update(active=True)

    # the ideal-reply step before its suggested rewrite exists: a "continue" page writes it on a POST
    other = flow.do_enrol(site.study)
    turn = to_rewrite_step(other)
    AlternateResponses.objects.filter(turn=turn).update(llm_improved="")
    page.goto(f"/s/{other.token}/")
    expect(page.get_by_role("heading", name="Your answers are saved")).to_be_visible()
    shot(page, "43-annotation-continue")
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()


# ---------------------------------------------------------------------------
# Anonymity with live models: a provider that names itself
# ---------------------------------------------------------------------------

#: Records every text the model's chat bubbles ever held, so a name shown for a moment is caught too.
WATCH_BUBBLES = """
window.__bubbleTexts = [];
new MutationObserver(() => {
  document.querySelectorAll('.bubble-model .bubble-text').forEach(el => window.__bubbleTexts.push(el.textContent));
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def test_a_leaking_provider_is_never_shown_in_the_browser(page, site, settings, fake_openai_server, live_server):
    from tests.web.test_identity_screen import CLEAN, LEAKING

    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name="acme-frontier-9000",
        provider="acme",
        litellm_model="openai/acme-frontier-9000",
        api_base=fake_openai_server.api_base,
    )
    fake_openai_server.replies = [LEAKING]  # the first attempt names itself; the one asked again does not
    fake_openai_server.reply = CLEAN
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    page.add_init_script(WATCH_BUBBLES)
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill("This week has been so heavy and I feel alone with it.")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()
    assert page.locator(".bubble-model .bubble-text").last.inner_text() == CLEAN
    seen = page.evaluate("window.__bubbleTexts")
    assert seen, "the observer saw the reply arrive"
    for name in ("GPT", "gpt", "OpenAI", "acme-frontier-9000"):
        assert not any(name in text for text in seen), name
    shot(page, "42-leaking-provider-screened")
    turn = Turn.objects.get(conversation__participant=participant)
    assert turn.identity_screen == "regenerated" and turn.llm_response == CLEAN
    # The leaking reply and the one asked again; the improved-reply rewrite (prepared once the reply is stored,
    # off the request path) is a call of its own, not a chat reply.
    chat_calls = [
        r for r in fake_openai_server.requests if not any("Assistant replied:" in m["content"] for m in r["messages"])
    ]
    assert len(chat_calls) == 2
