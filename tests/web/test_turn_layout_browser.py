"""The lighter turn in a real headless Chromium: the answers page's height, measured and printed, and a
whole turn on a phone.

The answers page shows one row per behaviour (the question, then "did it happen?" and "did I want it?"
side by side): at most 3 screens tall on a 1280x800 desktop and at most 8 on a 390x844 phone, with all
36 questions and the attention check. The heights are printed (``-s`` shows them). Screenshots go to
artifacts/screenshots/annotation/ (git-ignored).
"""

from __future__ import annotations

import os
import re

import pytest

# Playwright's sync API keeps an event loop in the test thread; the ORM calls made
# by the test itself are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Locator, Page, expect

from annotation.models import BinaryJudgement, MoodTag, PairwiseComparison
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Turn
from collection.setup import ensure_defaults
from tests.web.test_annotation_browser import SHOT_DIR, accessible, in_chat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SCREENS_AT_MOST = {"desktop": 3, "phone": 8}
OVERFLOWING_ROWS = """() => [...document.querySelectorAll('fieldset.binary-question, #q-attention')]
    .filter(row => row.scrollWidth > row.clientWidth + 1
        || [...row.querySelectorAll('.pill')].some(p => p.getBoundingClientRect().right > row.getBoundingClientRect().right))
    .map(row => row.id)"""


@pytest.fixture
def site(live_server, settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    return ensure_defaults()


def open_page(browser, live_server, size: dict[str, int]) -> Page:
    context = browser.new_context(viewport=size, base_url=live_server.url)
    context.set_default_timeout(10_000)
    return context.new_page()


@pytest.mark.parametrize("device", ["desktop", "phone"])
def test_the_answers_page_is_at_most_3_screens_on_a_desktop_and_8_on_a_phone(browser, live_server, site, device):
    size = DESKTOP if device == "desktop" else PHONE
    participant = flow.do_enrol(site.study)
    conversation = in_chat(participant)
    turn, _ = flow.do_add_message(conversation, 1, "My flatmate keeps shouting at me.")
    flow.do_save_reply(turn, "That sounds exhausting. What happens when they shout?")
    page = open_page(browser, live_server, size)
    page.goto(f"/s/{participant.token}/")
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    assert page.locator("fieldset.binary-question").count() == 36
    assert page.locator("#q-attention").count() == 1  # the demo study's check is on this page, and counted
    # every answer, with the checked mark's extra width, still inside its row
    for qid in cat.BINARY_QUESTION_IDS:
        page.locator(f"label[for=id_observed_{qid}_2]").click()
        page.locator(f"label[for=id_preferred_{qid}_2]").click()
    page.locator("#q-attention label.pill").nth(2).click()
    assert page.evaluate(OVERFLOWING_ROWS) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    height = page.evaluate("document.documentElement.scrollHeight")
    screens = height / size["height"]
    print(f"\nanswers page on a {device} ({size['width']}x{size['height']}): {height} px = {screens:.2f} screens")
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / f"10-answers-rows-{device}-{size['width']}.png"), full_page=True)
    accessible(page, f"answers page, {device}")
    assert screens <= SCREENS_AT_MOST[device], f"{height} px is {screens:.2f} screens"
    page.context.close()


def test_a_whole_turn_on_a_phone(browser, live_server, site):
    """Chat message, reply, the answers page, the comparisons and the next chat page, at 390x844 by touch."""
    participant = flow.do_enrol(site.study)
    conversation = in_chat(participant)
    page = open_page(browser, live_server, PHONE)
    clicks = 0

    def tap(target: Locator) -> None:
        nonlocal clicks
        target.click()
        clicks += 1

    page.goto(f"/s/{participant.token}/")
    expect(page.locator("[data-turn-counter]")).to_contain_text("Reply 1")
    page.get_by_label("Your message").fill("I have exams next week and I can't sleep.")
    tap(page.get_by_role("button", name="Send"))
    tap(page.get_by_role("link", name="Continue to questions about this reply"))

    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    tap(page.locator("label[for=id_mood_Nervous]"))
    page.get_by_label("Strength of \u201cNervous\u201d (1 to 7)").select_option("5")
    clicks += 1
    planned = {qid: (cat.YES_NO_NA[i % 3], cat.YES_NO_NA[(i + 1) % 3]) for i, qid in enumerate(cat.BINARY_QUESTION_IDS)}
    for qid, (observed, preferred) in planned.items():
        tap(page.locator(f"label[for=id_observed_{qid}_{cat.YES_NO_NA.index(observed)}]"))
        tap(page.locator(f"label[for=id_preferred_{qid}_{cat.YES_NO_NA.index(preferred)}]"))
    attention = page.locator("#q-attention")
    instructed = re.search(r"choose \u2018(\w[\w ]*)\u2019", attention.inner_text()).group(1)
    value = {label: value for value, label in cat.YES_NO_NA_LABELS.items()}[instructed]
    tap(page.locator(f"label[for=id_attention_check_{cat.YES_NO_NA.index(value)}]"))
    page.screenshot(path=str(SHOT_DIR / "11-phone-turn-answers-390.png"), full_page=True)
    tap(page.get_by_role("button", name="Save and continue"))

    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    tap(page.get_by_role("button", name="Start from the suggested rewrite"))
    tap(page.locator("input[name=questions][value='PW4']"))
    tap(page.get_by_role("button", name="Save and continue"))

    expect(page.get_by_role("heading", name="Comparing replies", exact=True)).to_be_visible()
    pairs = page.locator("fieldset.pair")
    compared = pairs.count()
    for index in range(compared):
        tap(pairs.nth(index).locator("label.pill").first)
    page.screenshot(path=str(SHOT_DIR / "12-phone-turn-compare-390.png"), full_page=True)
    tap(page.get_by_role("button", name="Save and continue"))

    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    expect(page.locator("[data-turn-counter]")).to_contain_text("Reply 2")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    print(f"\ntaps for a whole turn on a phone at 36 questions (send to next chat page): {clicks}")

    turn = Turn.objects.get(conversation=conversation)
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", "intensity")) == [("Nervous", 5)]
    stored = {j.question_id: (j.observed, j.preferred) for j in BinaryJudgement.objects.filter(turn=turn)}
    assert stored == planned
    assert list(PairwiseComparison.objects.filter(turn=turn).values_list("winner", flat=True)) == ["A"] * compared
    assert turn.selected_pairwise_questions == ["general", "PW4"]
    assert turn.attention_checks.get().passed
    page.context.close()
