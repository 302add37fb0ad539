"""A participant's whole study session in a real headless Chromium (Playwright, sync API).

Runs against pytest-django's live server with the offline scripted models (and,
for the provider-failure test, a tiny local OpenAI-compatible server): never a
real provider. Screenshots of every step at 1280 px and 360 px go to
artifacts/screenshots/participant/ (git-ignored). Run alone with
``pytest -m browser``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API keeps an event loop in the test thread; the ORM calls made
# by the test itself are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from django.core.management import call_command
from playwright.sync_api import Page, expect

from annotation.models import BinaryJudgement, MoodTag, PairwiseComparison
from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.chat_model import build_request, offline_reply
from collection.forms import Q1_SCREEN_LABELS
from collection.models import Conversation, OriginalModel, Participant, Topic, Turn, hash_token
from collection.setup import OFFLINE_MODEL_NAMES, ensure_defaults
from datasets.pseudonyms import export_pseudonym
from tests.anonymity import names_found
from tests.web.axe_check import assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOT_DIR = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots" / "participant"
DESKTOP = {"width": 1280, "height": 900}
NARROW = {"width": 360, "height": 780}


@dataclass
class Recorder:
    """Every response the participant's browser received from our site: URL, headers and body."""

    base: str
    seen: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        def on_response(response: Any) -> None:
            if not response.url.startswith(self.base):
                return
            try:
                body = response.body()
            except Exception:  # redirects have no body to read
                body = b""
            self.seen.append((response.url, response.all_headers(), body))

        page.on("response", on_response)

    def leaks(self, secrets: list[str]) -> list[str]:
        found = []
        for url, headers, body in self.seen:
            text = body.decode("utf-8", "replace") + "\n" + "\n".join(f"{k}: {v}" for k, v in headers.items())
            found += [f"{secret!r} in {url}" for secret in names_found(text, secrets)]
        return found


@pytest.fixture
def site(live_server, settings):
    """Defaults installed in the (flushed) live database, and a quick offline stream."""
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    defaults = ensure_defaults()
    return defaults


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


def shot(page: Page, name: str, axe: bool = True) -> None:
    """Full-page screenshots at desktop and 360 px, plus two checks every step must pass:
    every control has a label, and nothing scrolls sideways at 320 px; and axe-core finds no violation
    at 1280 px nor at 390 px (``axe=False`` only where the page has JavaScript switched off: axe is a script)."""
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    assert page.evaluate(UNLABELLED_CONTROLS) == [], name
    if axe:
        assert_accessible(page, name)
    page.screenshot(path=str(SHOT_DIR / f"{name}-1280.png"), full_page=True)
    page.set_viewport_size(NARROW)
    page.screenshot(path=str(SHOT_DIR / f"{name}-360.png"), full_page=True)
    page.set_viewport_size({"width": 320, "height": 700})
    assert page.evaluate("document.documentElement.scrollWidth") <= 320, f"{name} scrolls sideways at 320 px"
    page.set_viewport_size(DESKTOP)


def token_of(page: Page) -> str:
    return re.search(r"/s/([^/]+)/", page.url).group(1)


def fill_panas(page: Page, ratings: dict[str, int], keyboard_item: str | None = None) -> None:
    for item, rating in ratings.items():
        if item == keyboard_item:
            # keyboard only: focus the first option, then arrow keys move and select within the group
            page.focus(f"#id_{item}_0")
            page.keyboard.press("Space")
            for _ in range(rating - 1):
                page.keyboard.press("ArrowRight")
        else:
            page.check(f"#id_{item}_{rating - 1}")


def panas_ratings(offset: int) -> dict[str, int]:
    return {item: (i + offset) % 7 + 1 for i, item in enumerate(cat.PANAS_ITEMS)}


def binary_answer(index: int, turn_number: int) -> tuple[str, str]:
    return cat.YES_NO_NA[(index + turn_number) % 3], cat.YES_NO_NA[(index + 2 * turn_number) % 3]


def answer_behaviour_questions(page: Page, turn_number: int) -> None:
    """Answer every behaviour question on the answers page by clicking (the keyboard path has its own test)."""
    index_of = {qid: i for i, qid in enumerate(cat.BINARY_QUESTION_IDS)}
    qids = page.locator("fieldset.binary-question").evaluate_all("els => els.map(e => e.id.slice(2))")
    for qid in qids:
        observed, preferred = binary_answer(index_of[qid], turn_number)
        page.check(f"#id_observed_{qid}_{cat.YES_NO_NA.index(observed)}")
        page.check(f"#id_preferred_{qid}_{cat.YES_NO_NA.index(preferred)}")


def read_pairs(page: Page) -> list[tuple[str, str, str]]:
    """(input name, Reply A text, Reply B text) for each pair on a comparison page."""
    out = []
    for pair in page.locator("fieldset.pair").all():
        name = pair.locator("input[type=radio]").first.get_attribute("name")
        texts = pair.locator(".bubble-option .bubble-text").all_inner_texts()
        out.append((name, texts[0].strip(), texts[1].strip()))
    return out


TURN_PLANS: list[dict[str, Any]] = [
    {
        "message": "I have exams next week and I feel anxious all the time. I can't sleep properly.",
        "mood": [("Nervous", 5), ("Distressed", None)],
        "golden": "Exams and no sleep is such a hard mix. Would it help to talk about the nights first?",
        "questions": ["general", "PW4"],
    },
    {
        "message": "Mostly it's maths. I keep thinking I'll fail and let my parents down.",
        "mood": [("Determined", 3)],
        "golden": "That fear of letting your parents down sounds heavy. What do you imagine they would say?",
        "questions": ["general"],
    },
    {
        "message": "Maybe I could ask my teacher for help with the hardest topics.",
        "mood": [],
        "golden": "That sounds like a kind and practical idea. What would you want to ask first?",
        "questions": ["general", "PW1", "PW10"],
    },
]


def test_full_participant_walk_exports_exactly_what_was_entered(page, site, live_server, tmp_path):
    recorder = Recorder(live_server.url)
    recorder.attach(page)

    page.goto(f"/join/{site.study.slug}/")
    shot(page, "00-join")
    page.get_by_role("button", name="Start").click()

    # consent: submitting without the box shows the error in words, then consent properly
    expect(page.get_by_role("heading", name="About this study")).to_be_visible()
    page.get_by_role("button", name="Continue").click()
    expect(page.locator(".field-error")).to_contain_text("please tick this box")
    shot(page, "01-consent-error")
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_label(re.compile("^Optional: I agree that mental-health information")).check()
    shot(page, "01-consent")
    page.get_by_role("button", name="Continue").click()

    token = token_of(page)
    participant = Participant.objects.get(token_hash=hash_token(token))
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    page.get_by_label("25-34", exact=True).check()
    page.get_by_label("Analytical", exact=True).check()
    page.get_by_label("Sensitive", exact=True).check()
    page.get_by_label("Feel heard", exact=True).check()
    page.get_by_label("Anxiety", exact=True).check()
    shot(page, "02-profile")
    page.get_by_role("button", name="Save and continue").click()

    expect(page.get_by_role("heading", name="How do you feel right now?")).to_be_visible()
    pre = panas_ratings(0)
    fill_panas(page, pre, keyboard_item="Proud")
    shot(page, "03-pre-panas")
    page.get_by_role("button", name="Save and continue").click()

    expect(page.get_by_role("heading", name="What would you like to talk about?")).to_be_visible()
    page.get_by_label("Exam pressure", exact=True).check()
    page.get_by_label(cat.TOPIC_ATTITUDE_OPTIONS[1], exact=True).check()
    shot(page, "04-topic")
    page.get_by_role("button", name="Start the chat").click()

    expected_turns = []
    for number, plan in enumerate(TURN_PLANS, start=1):
        first = number == 1
        expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
        if first:
            shot(page, "05-chat-empty")
        page.get_by_label("Your message").fill(plan["message"])
        page.get_by_role("button", name="Send").click()
        continue_link = page.get_by_role("link", name="Continue to questions about this reply")
        expect(continue_link).to_be_visible()
        reply_shown = page.locator(".bubble-model .bubble-text").last.inner_text().strip()
        assert reply_shown
        if first or number == 3:
            shot(page, f"06-chat-reply-{number}")
        continue_link.click()

        expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
        if plan["mood"]:
            for emotion, intensity in plan["mood"]:
                page.check(f"#id_mood_{emotion}")
                if intensity:
                    page.select_option(f"#id_intensity_{emotion}", str(intensity))
        else:
            page.get_by_label(re.compile("^No change")).check()
        answer_behaviour_questions(page, number)
        if first:
            shot(page, "07-answers")
        page.get_by_role("button", name="Save and continue").click()

        expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
        improved_shown = page.locator(".bubble-alt .bubble-text").inner_text().strip()
        assert page.get_by_label("The reply you would have wanted").input_value() == ""  # starts empty
        page.get_by_role("button", name="Start from the suggested rewrite").click()
        assert page.get_by_label("The reply you would have wanted").input_value() == improved_shown
        page.get_by_label("The reply you would have wanted").fill(plan["golden"])
        for question in plan["questions"]:
            page.check(f"input[name=questions][value='{question}']")
        if first:
            shot(page, "09-golden-reply-and-questions")
        page.get_by_role("button", name="Save and continue").click()

        expect(page.get_by_role("heading", name="Comparing replies", exact=True)).to_be_visible()
        texts = {
            cat.RESPONSE_ORIGINAL: reply_shown,
            cat.RESPONSE_ALTERNATE: improved_shown,
            cat.RESPONSE_HUMAN: plan["golden"],
        }
        label_of = {text: label for label, text in texts.items()}
        comparisons = []
        pairs = read_pairs(page)
        assert len(pairs) == 3 * len(plan["questions"])  # every chosen question on one page
        for q_index, question in enumerate(plan["questions"]):
            expect(page.get_by_role("heading", name=cat.PAIRWISE_QUESTIONS[question])).to_be_visible()
            for p_index, (name, text_a, text_b) in enumerate(pairs[3 * q_index : 3 * q_index + 3]):
                winner = "A" if (q_index + p_index + number) % 2 else "B"
                page.check(f"input[name='{name}'][value='{winner}']")
                comparisons.append(
                    {
                        "questionId": question,
                        "responseA": label_of[text_a],
                        "responseB": label_of[text_b],
                        "winner": winner,
                    }
                )
        if first:
            shot(page, "11-compare")
        page.get_by_role("button", name="Save and continue").click()

        expected_turns.append(
            {
                "turnNumber": number,
                "userMessage": plan["message"],
                "llmResponse": reply_shown,
                "moodShiftTags": [
                    {"emotion": e, "intensity": i}
                    for e, i in sorted(plan["mood"], key=lambda t: cat.PANAS_ITEMS.index(t[0]))
                ],
                "binaryJudgements": [
                    {
                        "questionId": qid,
                        "observedBehavior": binary_answer(i, number)[0],
                        "preferredBehavior": binary_answer(i, number)[1],
                        "llmValue": None,
                    }
                    for i, qid in enumerate(cat.BINARY_QUESTION_IDS)
                ],
                "alternateResponses": {"llmImproved": improved_shown, "humanEdited": plan["golden"]},
                "pairwiseComparisons": comparisons,
                "selectedPairwiseQuestions": [q for q in cat.PAIRWISE_QUESTION_IDS if q in plan["questions"]],
            }
        )

    # after three turns the participant may finish: a message typed but not sent stops that, with its words kept
    expect(page.get_by_role("button", name="Finish the chat")).to_be_visible()
    shot(page, "12-chat-can-finish")
    unsent = "One more thing I wanted to say."
    page.get_by_label("Your message").fill(unsent)
    page.get_by_role("button", name="Finish the chat").click()
    expect(page.locator("#error-message")).to_contain_text("Your message has not been sent yet")
    expect(page.get_by_label("Your message")).to_have_value(unsent)
    expect(page.get_by_label("Your message")).to_be_focused()
    shot(page, "12-chat-finish-unsent")
    page.get_by_label("Your message").fill("")
    page.get_by_role("button", name="Finish the chat").click()
    expect(page.get_by_role("heading", name="Finish the chat?")).to_be_visible()
    shot(page, "12-chat-finish-confirm")
    page.get_by_role("link", name="Back to the chat").click()
    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    assert Conversation.objects.get().turns.count() == 3  # nothing sent, nothing finished
    page.get_by_role("button", name="Finish the chat").click()
    page.get_by_role("button", name="Yes, finish the chat").click()

    expect(page.get_by_role("heading", name="How do you feel now, after the chat?")).to_be_visible()
    post = panas_ratings(3)
    fill_panas(page, post)
    shot(page, "13-post-panas")
    page.get_by_role("button", name="Save and continue").click()

    expect(page.get_by_role("heading", name="Your view of the conversation")).to_be_visible()
    page.get_by_label(Q1_SCREEN_LABELS[cat.Q1_OPTIONS[0]], exact=True).check()
    page.get_by_label(Q1_SCREEN_LABELS[cat.Q1_OPTIONS[5]], exact=True).check()
    page.get_by_label(re.compile("^If you chose “Other”")).fill("Someone to check in on me")  # ticks Other too
    page.get_by_label(cat.Q2_OPTIONS[2], exact=True).check()
    page.get_by_label(cat.Q3_OPTIONS[1], exact=True).check()
    page.get_by_label("Too many questions", exact=True).check()
    page.get_by_label(re.compile("^Anything else that felt off")).fill("Ended a bit abruptly")
    branch_ratings = {"perceiving": 6, "facilitating": 5, "understanding": 4, "managing": 3}
    for branch, rating in branch_ratings.items():
        page.check(f"#id_branch_{branch}_{rating - 1}")
    page.get_by_label(re.compile("^Anything else you would like to tell")).fill("Thank you, this was useful.")
    shot(page, "14-survey")
    page.get_by_role("button", name="Finish").click()

    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()
    participant.refresh_from_db()
    expect(page.locator("#completion-code")).to_have_text(participant.completion_code)
    shot(page, "15-thank-you")

    # the export is a valid canonical file holding exactly what was entered
    out = tmp_path / "export"
    call_command("export", "--out", str(out))
    files = list(out.glob("*.json"))
    assert len(files) == 1
    doc = cf.load_conversation(files[0].read_bytes(), source=files[0].name)
    data = cf.to_canonical_dict(doc)
    conversation = Conversation.objects.get()
    assert data["conversationId"] == conversation.conversation_id
    assert data["metadata"]["category"] == "Study" and data["metadata"]["subtopic"] == "Exam pressure"
    assert data["metadata"]["turnCount"] == 3
    assert data["metadata"][cat.Q1_OTHER_TEXT_KEY] == "Someone to check in on me"
    assert data["participant_profile"] == {
        "participant_id": export_pseudonym(participant.pseudonym),  # exports carry the keyed-hash pseudonym
        "age": "25-34",
        "traits": ["Analytical", "Sensitive"],
        "goals": ["Feel heard"],
        "responses": {"topicAttitude": cat.TOPIC_ATTITUDE_OPTIONS[1]},
        "diagnoses": ["Anxiety"],
        "sensitiveDataConsent": True,
    }
    assert data["prePanas"]["items"] == pre
    assert data["prePanas"]["totalPositiveAffect"] == sum(pre[i] for i in cat.POSITIVE_AFFECT_ITEMS)
    assert data["postPanas"]["items"] == post
    assert data["conversationWideQuestions"] == {
        "q1_lookingFor": [cat.Q1_OPTIONS[0], cat.Q1_OPTIONS[5], cat.Q1_OTHER],
        "q2_emotionClarity": cat.Q2_OPTIONS[2],
        "q3_modelFit": cat.Q3_OPTIONS[1],
        "q3_followUp_whatFeltOff": ["Too many questions", "Ended a bit abruptly"],
        "fourBranchScores": branch_ratings,
    }
    got_turns = [
        {
            "turnNumber": t["turnNumber"],
            "userMessage": t["userMessage"],
            "llmResponse": t["llmResponse"],
            "moodShiftTags": t["moodShiftTags"],
            **t["annotations"],
        }
        for t in data["turns"]
    ]
    assert got_turns == expected_turns
    assert Conversation.objects.get().comment == "Thank you, this was useful."

    # the participant's browser never received an original model's real name (nor its alias)
    secrets = [m.name for m in OriginalModel.objects.exclude(name="")] + [m.alias for m in OriginalModel.objects.all()]
    assert set(OFFLINE_MODEL_NAMES) <= set(secrets)
    assert len(recorder.seen) > 40
    assert recorder.leaks(secrets) == []


def start_chat(participant: Participant, subtopic: str = "Debt worries") -> Conversation:
    """Bring a participant to the chat step through the same actions the pages call."""
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "35-44", [], [], None)
    flow.do_save_pre_panas(participant, panas_ratings(1))
    return flow.do_start_conversation(participant, Topic.objects.get(subtopic=subtopic), cat.TOPIC_ATTITUDE_OPTIONS[0])


def add_answered_turn(conversation: Conversation, message: str) -> Turn:
    turn, _ = flow.do_add_message(conversation, flow.next_turn_number(conversation), message)
    flow.do_save_reply(turn, offline_reply(build_request(conversation, turn)))
    return turn


def test_refresh_mid_annotation_keeps_answers(page, site):
    participant = flow.do_enrol(site.study)
    conversation = start_chat(participant)
    turn = add_answered_turn(conversation, "I owe money on two cards and I'm scared to open my post.")

    page.goto(f"/s/{participant.token}/")
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    page.check("#id_mood_Scared")
    page.select_option("#id_intensity_Scared", "6")
    page.reload()  # unsaved choices survive a refresh
    expect(page.locator("#id_mood_Scared")).to_be_checked()
    expect(page.locator("#id_intensity_Scared")).to_have_value("6")
    page.check("#id_observed_B1_0")
    page.check("#id_preferred_B1_1")
    page.reload()
    expect(page.locator("#id_observed_B1_0")).to_be_checked()
    expect(page.locator("#id_preferred_B1_1")).to_be_checked()
    # a new tab on the study link resumes on this very page, with the unsent choices
    other = page.context.new_page()
    other.goto(f"/s/{participant.token}/")
    assert other.url == page.url
    expect(other.locator("#id_observed_B1_0")).to_be_checked()
    other.close()

    # golden reply typed but not sent survives a refresh
    answer_behaviour_questions(page, 1)
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", "intensity")) == [("Scared", 6)]
    page.get_by_label("The reply you would have wanted").fill("Opening the post can feel so frightening.")
    page.reload()
    expect(page.get_by_label("The reply you would have wanted")).to_have_value(
        "Opening the post can feel so frightening."
    )
    # the back button never shows a stale step: it lands on the current one
    page.go_back()
    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    assert BinaryJudgement.objects.filter(turn=turn, observed__isnull=True).count() == 0


def test_double_submissions_change_nothing_twice(browser, site, live_server):
    """Without JavaScript nothing stops a double click, so the server must be idempotent."""
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    participant = flow.do_enrol(site.study)
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "18-24", [], [], None)

    page.goto(f"/s/{participant.token}/")
    fill_panas(page, panas_ratings(2))
    page.get_by_role("button", name="Save and continue").dblclick()
    expect(page.get_by_role("heading", name="What would you like to talk about?")).to_be_visible()
    page.get_by_label("Losing a pet", exact=True).check()
    page.get_by_label(cat.TOPIC_ATTITUDE_OPTIONS[2], exact=True).check()
    page.get_by_role("button", name="Start the chat").dblclick()
    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    assert Conversation.objects.filter(participant=participant).count() == 1

    page.get_by_label("Your message").fill("My cat died on Sunday and the flat feels so empty.")
    page.get_by_role("button", name="Send").dblclick()
    expect(page.get_by_role("button", name="Get the reply")).to_be_visible()
    shot(page, "20-no-js-pending-reply", axe=False)
    page.get_by_role("button", name="Get the reply").dblclick()
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    page.check("#id_mood_Upset")
    answer_behaviour_questions(page, 1)
    page.get_by_role("button", name="Save and continue").dblclick()
    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()

    conversation = Conversation.objects.get(participant=participant)
    assert conversation.turns.count() == 1
    turn = conversation.turns.get()
    assert turn.user_message == "My cat died on Sunday and the flat feels so empty."
    assert turn.llm_response
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", flat=True)) == ["Upset"]
    assert BinaryJudgement.objects.filter(turn=turn).count() == 36
    assert conversation.panas_surveys.count() == 1
    context.close()


def test_provider_failure_then_retry_loses_nothing(page, site, settings, fake_openai_server, live_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    secret_name = "acme-frontier-model-x9"
    OriginalModel.objects.create(
        name=secret_name, provider="acme", litellm_model=f"openai/{secret_name}", api_base=fake_openai_server.api_base
    )
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    recorder = Recorder(live_server.url)
    recorder.attach(page)

    fake_openai_server.fail_next = 1
    page.goto(f"/s/{participant.token}/")
    message = "Rent went up again and I don't know how I'll manage this month."
    page.get_by_label("Your message").fill(message)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("alert")).to_contain_text("Your message is saved")
    retry = page.get_by_role("button", name="Try again")
    expect(retry).to_be_visible()
    shot(page, "21-provider-failure")
    turn = Turn.objects.get(conversation__participant=participant)
    assert turn.user_message == message and turn.llm_response == ""

    # a refresh while failed keeps the message and offers the reply again
    page.reload()
    expect(page.get_by_text(message)).to_be_visible()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()

    reply = Turn.objects.get(pk=turn.pk).llm_response
    assert reply == fake_openai_server.reply
    assert fake_openai_server.requests[-1]["model"] == secret_name
    page.get_by_role("link", name="Continue to questions about this reply").click()
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    assert recorder.leaks([secret_name, "acme"]) == []


def test_retry_button_after_failure(page, site, settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name="acme-model", provider="acme", litellm_model="openai/acme-model", api_base=fake_openai_server.api_base
    )
    participant = flow.do_enrol(site.study)
    start_chat(participant)
    fake_openai_server.fail_next = 2
    page.goto(f"/s/{participant.token}/")
    page.get_by_label("Your message").fill("I feel ashamed about my overdraft.")
    page.get_by_role("button", name="Send").click()
    page.get_by_role("button", name="Try again").click()  # fails again: still calm, still saved
    expect(page.get_by_role("button", name="Try again")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Please try again")
    page.get_by_role("button", name="Try again").click()
    expect(page.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()
    assert page.locator(".bubble-model .bubble-text").last.inner_text().strip() == fake_openai_server.reply
    assert Turn.objects.get(conversation__participant=participant).llm_response == fake_openai_server.reply


def test_withdrawal_from_the_chat_excludes_the_conversation_from_export(page, site, tmp_path):
    participant = flow.do_enrol(site.study)
    conversation = start_chat(participant)
    add_answered_turn(conversation, "Work has been relentless.")
    keeper = flow.do_enrol(site.study)
    start_chat(keeper, "Stress and burnout")

    page.goto(f"/s/{participant.token}/")
    page.get_by_role("link", name="Withdraw from the study").click()
    expect(page.get_by_role("heading", name="Withdraw from the study?")).to_be_visible()
    shot(page, "22-withdraw-confirm")
    page.get_by_role("button", name="Yes, withdraw me").click()
    expect(page.get_by_role("heading", name="You have withdrawn")).to_be_visible()
    shot(page, "23-withdrawn")
    page.goto(f"/s/{participant.token}/turn/1/")
    expect(page.get_by_role("heading", name="You have withdrawn")).to_be_visible()

    participant.refresh_from_db()
    assert participant.withdrawn_at is not None
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.WITHDRAWN
    out = tmp_path / "export"
    call_command("export", "--out", str(out), "--include-unfinished")  # the keeper's chat has no reply yet
    exported = [cf.load_conversation(p.read_bytes()).conversationId for p in out.glob("*.json")]
    assert conversation.conversation_id not in exported
    assert len(exported) == 1
    assert PairwiseComparison.objects.count() == 0


def test_a_stopped_or_restored_page_can_be_sent_again_and_a_double_click_still_sends_once(page, site):
    participant = flow.do_enrol(site.study)
    page.goto(f"/s/{participant.token}/")
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    # the server takes its time: the post hangs until the participant presses Stop
    page.route("**/consent/", lambda route: None if route.request.method == "POST" else route.fallback())
    page.evaluate(
        "document.querySelector('form').addEventListener('submit', () => setTimeout(() => window.stop(), 1000))"
    )
    page.get_by_label("I have read the information above and I agree to take part.").check()
    button = page.get_by_role("button", name="Continue")
    button.click()  # returns once Stop has ended the hanging post
    expect(button).to_be_enabled()  # after Stop the button works again
    page.unroute("**/consent/")
    sent_before = len(posts)
    button.dblclick()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    assert len(posts) == sent_before + 1  # the double click sent the form once
    assert Participant.objects.get(pk=participant.pk).consents.count() == 1

    # back from the back-forward cache the page is as it was left, mid-submission: it is released on pageshow
    page.get_by_label("25-34", exact=True).check()
    page.evaluate("document.querySelector('form[data-keep]').addEventListener('submit', e => e.preventDefault())")
    save = page.get_by_role("button", name="Save and continue")
    save.click()
    expect(save).to_be_disabled()
    page.evaluate("window.dispatchEvent(new PageTransitionEvent('pageshow', {persisted: true}))")
    expect(save).to_be_enabled()


def test_the_personal_link_can_be_copied_or_without_javascript_selected(browser, site, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    page.goto(f"/join/{site.study.slug}/")
    page.get_by_role("button", name="Start").click()
    expect(page.get_by_role("heading", name="Your personal link")).to_be_visible()
    link = f"{live_server.url}/s/{token_of(page)}/"
    expect(page.get_by_label("Your link to come back")).to_have_value(link)
    page.get_by_role("button", name="Copy the link").click()
    expect(page.locator("[data-copy=personal-link]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == link
    shot(page, "01-consent-personal-link")
    context.close()

    plain = browser.new_context(viewport=DESKTOP, base_url=live_server.url, java_script_enabled=False)
    page = plain.new_page()
    page.goto(link)
    box = page.get_by_label("Your link to come back")
    expect(box).to_have_value(link)  # there to select and copy by hand
    expect(page.get_by_role("button", name="Copy the link")).to_be_hidden()  # no button that would do nothing
    plain.close()
