"""The per-turn annotation in a real headless Chromium: effort budgets, hotkeys, the side panel and review.

Half the effort per turn, measured: at the default (all 36 behaviour
questions) a turn takes at most 4 page loads and every answer is one key press;
with the study's sampling at 8 questions a turn takes at most 40 clicks.
Screenshots at 1280 px and 390 px go to artifacts/screenshots/annotation/
(git-ignored). Run alone with ``pytest -m browser``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# Playwright's sync API keeps an event loop in the test thread; the ORM calls made
# by the test itself are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Locator, Page, expect

from annotation.models import BinaryJudgement, MoodTag, PairwiseComparison
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Conversation, Participant, Study, Topic, Turn
from collection.setup import ensure_defaults
from tests.web.axe_check import violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOT_DIR = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots" / "annotation"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
KEY_OF = {cat.YES: "1", cat.NO: "n", cat.NOT_APPLICABLE: "3"}  # digits and letters both work


@pytest.fixture
def site(live_server, settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    return ensure_defaults()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    context.set_default_timeout(10_000)
    opened = context.new_page()
    yield opened
    context.close()


UNLABELLED_CONTROLS = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
    .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !(el.tagName === 'BUTTON' && el.textContent.trim()))
    .map(el => el.name || el.id || el.outerHTML.slice(0, 60))"""
DUPLICATE_IDS = """() => { const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
    return ids.filter((id, i) => ids.indexOf(id) !== i); }"""
UNNAMED_GROUPS = """() => [...document.querySelectorAll('fieldset')].filter(f => !f.querySelector(':scope > legend'))
    .map(f => f.id || f.className)"""


def accessible(page: Page, name: str) -> None:
    """axe-core finds no violation (WCAG A/AA and best practice rules, as axe runs by default)."""
    problems = violations(page)  # the helper the participant walks share: rule id, impact and targets
    assert problems == [], f"{name}:\n" + "\n".join(problems)


def shot(page: Page, name: str) -> None:
    """Screenshots at 1280 and 390 px, after the checks every annotation page must pass at both sizes:
    axe-core, every control labelled, every group named by a legend, ids unique, no sideways scroll."""
    assert page.evaluate(UNLABELLED_CONTROLS) == [], name
    assert page.evaluate(UNNAMED_GROUPS) == [], name
    assert page.evaluate(DUPLICATE_IDS) == [], name
    accessible(page, name)
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / f"{name}-1280.png"), full_page=True)
    page.set_viewport_size(PHONE)
    accessible(page, f"{name} at 390 px")
    page.screenshot(path=str(SHOT_DIR / f"{name}-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], f"{name} scrolls sideways"
    page.set_viewport_size(DESKTOP)


def in_chat(participant: Participant) -> Conversation:
    """Bring a participant to the chat step through the same actions the pages call."""
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "35-44", [], [], None)
    flow.do_save_pre_panas(participant, dict.fromkeys(cat.PANAS_ITEMS, 4))
    topic = Topic.objects.get(subtopic="Exam pressure")
    return flow.do_start_conversation(participant, topic, cat.TOPIC_ATTITUDE_OPTIONS[0])


def planned(index: int, turn_number: int) -> tuple[str, str]:
    return cat.YES_NO_NA[(index + turn_number) % 3], cat.YES_NO_NA[(2 * index + turn_number) % 3]


class Loads:
    """Every page load of the main frame (a POST answered by a redirect and its GET is one load)."""

    def __init__(self, page: Page):
        self.urls: list[str] = []
        page.on("load", lambda _: self.urls.append(page.url))


def send(page: Page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()


def test_a_turn_at_the_default_takes_four_page_loads_and_one_key_per_answer(page, site):
    # Key order over the 36 questions alone; the attention check placed among them has its own walk
    # (test_quality_browser.py).
    type(site.study).objects.filter(pk=site.study.pk).update(attention_checks=0)
    site.study.refresh_from_db()
    participant = flow.do_enrol(site.study)
    conversation = in_chat(participant)
    loads = Loads(page)
    page.goto(f"/s/{participant.token}/")
    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    send(page, "I have exams next week and I can't sleep.")
    page.get_by_role("link", name="Continue to questions about this reply").click()

    # the answers page: mood and all 36 questions, the message and reply beside them
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    page.get_by_text("Keyboard shortcuts").click()  # folded, so the questions start high on the page
    expect(page.get_by_text("Yes: 1 or Y")).to_be_visible()  # the keys, documented on the page
    assert page.locator("fieldset.binary-question").count() == 36
    panel = page.locator("[data-exchange-panel]")
    expect(panel.locator(".bubble-model")).to_contain_text(conversation.turns.get().llm_response[:40])
    expect(page.locator("#id_observed_B1_0")).to_have_attribute("aria-keyshortcuts", "1 Y")
    shot(page, "01-answers")

    keys = 0
    page.focus("#id_mood_Nervous")
    page.keyboard.press("5")  # one key: the feeling, ticked, with its strength
    keys += 1
    expect(page.locator("#id_mood_Nervous")).to_be_checked()
    expect(page.locator("#id_intensity_Nervous")).to_have_value("5")

    # Tab order follows the pairs; a key answers the focused part and moves on to the next
    page.focus("#id_observed_B1_0")
    for index, qid in enumerate(cat.BINARY_QUESTION_IDS):
        observed, preferred = planned(index, 1)
        focused = page.evaluate("document.activeElement.name")
        assert focused == f"observed_{qid}", focused
        page.keyboard.press(KEY_OF[observed])
        assert page.evaluate("document.activeElement.name") == f"preferred_{qid}"
        page.keyboard.press(KEY_OF[preferred].upper() if index % 2 else KEY_OF[preferred])
        keys += 2
        if index == 24:  # two thirds down, the reply is still in view beside the questions
            box = panel.bounding_box()
            assert box is not None and box["y"] >= 0 and box["y"] + 40 < DESKTOP["height"]
            assert page.evaluate("window.scrollY") > 500
    assert keys == 1 + 72  # one key per answer
    assert page.evaluate("document.activeElement.textContent.trim()") == "Save and continue"
    page.keyboard.press("Enter")

    # the rewrite page: the participant's own reply and the questions to compare, together
    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    page.get_by_label("The reply you would have wanted").fill("Exams and no sleep is a hard mix.")
    page.check("input[name=questions][value='PW4']")
    shot(page, "02-rewrite")
    page.get_by_role("button", name="Save and continue").click()

    # every comparison on one page, one key each
    expect(page.get_by_role("heading", name="Comparing replies", exact=True)).to_be_visible()
    assert page.locator("fieldset.pair").count() == 6
    shot(page, "03-compare")
    page.focus("#id_winner_0_0")
    for key in ("a", "b", "1", "2", "A", "B"):
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    expect(page.get_by_role("link", name="Review or change your answers about the last reply")).to_be_visible()

    chat_url = page.url
    turn_loads = loads.urls[: loads.urls.index(chat_url, 1)]  # from the chat page up to the next one
    assert len(turn_loads) <= 4, turn_loads
    print(f"\npage loads per turn at 36 questions: {len(turn_loads)}; key presses for 73 answers: {keys}")

    turn = Turn.objects.get(conversation=conversation)
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", "intensity")) == [("Nervous", 5)]
    stored = {j.question_id: (j.observed, j.preferred) for j in BinaryJudgement.objects.filter(turn=turn)}
    assert stored == {qid: planned(i, 1) for i, qid in enumerate(cat.BINARY_QUESTION_IDS)}
    assert [c.winner for c in PairwiseComparison.objects.filter(turn=turn).order_by("position")] == list("ABABAB")
    assert turn.selected_pairwise_questions == ["general", "PW4"]


def test_the_message_panel_folds_away_on_a_phone(page, site):
    participant = flow.do_enrol(site.study)
    conversation = in_chat(participant)
    turn, _ = flow.do_add_message(conversation, 1, "My flatmate keeps shouting at me.")
    flow.do_save_reply(turn, "That sounds exhausting. What happens when they shout?")
    page.set_viewport_size(PHONE)
    page.goto(f"/s/{participant.token}/")
    panel = page.locator("[data-exchange-panel]")
    expect(panel.locator(".bubble-model")).to_be_visible()
    panel.locator("summary").click()
    expect(panel.locator(".bubble-model")).to_be_hidden()
    panel.locator("summary").press("Enter")  # and back, from the keyboard
    expect(panel.locator(".bubble-model")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    # Tab follows the pairs: what happened, then what I wanted, then the next question
    page.focus("#id_observed_B1_0")
    for name in ("preferred_B1", "observed_B2", "preferred_B2", "observed_B3"):
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.name") == name
    accessible(page, "answers page on a phone")
    page.screenshot(path=str(SHOT_DIR / "04-answers-phone-390.png"))


def test_a_sampled_turn_at_8_questions_takes_at_most_40_clicks_and_records_what_was_asked(page, site):
    Study.objects.filter(pk=site.study.pk).update(binary_sample_size=8)
    participant = flow.do_enrol(Study.objects.get(pk=site.study.pk))
    conversation = in_chat(participant)
    clicks = 0

    def click(target: Locator) -> None:
        nonlocal clicks
        target.click()
        clicks += 1

    page.goto(f"/s/{participant.token}/")
    asked_by_turn = []
    for number in (1, 2):
        clicks = 0
        page.get_by_label("Your message").fill(f"Message {number}: I'm worried about my results.")
        click(page.get_by_role("button", name="Send"))
        click(page.get_by_role("link", name="Continue to questions about this reply"))
        expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
        click(page.get_by_label(re.compile("^No change")))
        shown = page.locator("fieldset.binary-question").evaluate_all("els => els.map(e => e.id.slice(2))")
        assert len(shown) == 8
        for qid in shown:
            click(page.locator(f"label[for=id_observed_{qid}_0]"))
            click(page.locator(f"label[for=id_preferred_{qid}_1]"))
        if number == 1:
            shot(page, "05-answers-sampled-8")
        click(page.get_by_role("button", name="Save and continue"))
        expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
        # start from the suggested rewrite and keep it, with "general": its identical pair is never asked
        click(page.get_by_role("button", name="Start from the suggested rewrite"))
        click(page.get_by_role("button", name="Save and continue"))
        for pair in page.locator("fieldset.pair").all():
            click(pair.locator("label.pill").first)
        click(page.get_by_role("button", name="Save and continue"))
        expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
        assert clicks <= 40, clicks
        print(f"\nclicks for a turn at 8 questions (send to next chat page): {clicks}")

        turn = Turn.objects.get(conversation=conversation, turn_number=number)
        recorded = list(turn.binary_judgements.order_by("position").values_list("question_id", flat=True))
        assert recorded == shown  # what was asked is recorded, and only that
        assert set(turn.binary_judgements.values_list("observed", "preferred")) == {(cat.YES, cat.NO)}
        asked_by_turn.append(set(recorded))
    assert not asked_by_turn[0] & asked_by_turn[1]  # the next turn asks the next 8 of the rotation


def test_answers_can_be_reviewed_and_changed_until_the_next_message(page, site):
    participant = flow.do_enrol(site.study)
    conversation = in_chat(participant)
    page.goto(f"/s/{participant.token}/")
    send(page, "I had a fight with my sister.")
    page.get_by_role("link", name="Continue to questions about this reply").click()
    page.get_by_label(re.compile("^No change")).check()
    for qid in cat.BINARY_QUESTION_IDS:
        page.check(f"#id_observed_{qid}_0")
        page.check(f"#id_preferred_{qid}_0")
    page.get_by_role("button", name="Save and continue").click()
    page.get_by_label("The reply you would have wanted").fill("I'm sorry you two fought. What happened?")
    page.get_by_role("button", name="Save and continue").click()
    for name in ("winner_0", "winner_1", "winner_2"):
        page.check(f"input[name={name}][value=A]")
    page.get_by_role("button", name="Save and continue").click()

    page.get_by_role("link", name="Review or change your answers about the last reply").click()
    expect(page.get_by_role("heading", name="Review or change your answers")).to_be_visible()
    expect(page.locator("#id_observed_B8_0")).to_be_checked()
    expect(page.locator("input[name=winner_1][value=A]")).to_be_checked()
    shot(page, "06-review")
    page.focus("#id_observed_B8_0")
    page.keyboard.press("n")  # B8 observed: no
    page.keyboard.press("3")  # B8 wanted: not applicable
    page.focus("#id_winner_1_0")
    page.keyboard.press("b")
    page.check("#id_mood_Upset")
    page.get_by_label(re.compile("^No change")).uncheck()
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()

    turn = Turn.objects.get(conversation=conversation)
    assert BinaryJudgement.objects.get(turn=turn, question_id="B8").observed == cat.NO
    assert BinaryJudgement.objects.get(turn=turn, question_id="B8").preferred == cat.NOT_APPLICABLE
    assert BinaryJudgement.objects.filter(turn=turn, observed=cat.YES).count() == 35
    assert [c.winner for c in PairwiseComparison.objects.filter(turn=turn).order_by("position")] == ["A", "B", "A"]
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", flat=True)) == ["Upset"]

    # once the next message is sent, the answers are final
    send(page, "She hasn't answered my messages since.")
    page.goto(f"/s/{participant.token}/turn/1/review/")
    expect(page.get_by_role("heading", name="Review or change your answers")).to_have_count(0)
    assert BinaryJudgement.objects.get(turn=turn, question_id="B8").observed == cat.NO
