"""The participant study flow through Django's test client: every step, its errors, idempotency and privacy.

Real code all the way down (offline scripted models, the real services, the
real export); the only stand-in is a local OpenAI-compatible server for the
live-model path.
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape

from annotation import turn_flow as tf
from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
from annotation.sampling import ROTATION_CYCLE, sample_question_ids
from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.assignment import NoModelAvailable, choose_original_model, conversation_counts
from collection.chat_model import _TOPIC_LINES, ReplyRequest, offline_reply
from collection.models import (
    Consent,
    Conversation,
    ConversationWideAnswers,
    OriginalModel,
    PanasSurvey,
    Participant,
    ParticipantProfile,
    SensitiveProfile,
    Study,
    Topic,
    Turn,
)
from collection.setup import OFFLINE_MODEL_NAMES, ensure_defaults
from datasets.exchange import exportable_conversations
from tests.anonymity import names_found


@pytest.fixture(autouse=True)
def _quick_and_clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()  # rate-limit windows and reply locks start empty in every test


class Walker:
    """Drives one participant through the pages like a browser would, recording every response."""

    def __init__(self, client: Client, participant: Participant):
        self.client = client
        self.participant = participant
        self.token = participant.token
        self.responses: list[Any] = []

    def url(self, suffix: str = "") -> str:
        return f"/s/{self.token}/{suffix}"

    def get(self, path: str, **extra: Any):
        response = self.client.get(path, **extra)
        self.responses.append(response)
        return response

    def post(self, path: str, data: dict | None = None, **extra: Any):
        response = self.client.post(path, data or {}, **extra)
        self.responses.append(response)
        return response

    def refused(self, response):
        """A refused form redirects to its own page (post/redirect/get), which shows the answers and errors again."""
        assert response.status_code == 302, response.status_code
        page = self.get(response.url)
        assert page.status_code == 200
        return page

    def current(self) -> str:
        """Where the study link sends the participant now."""
        response = self.get(self.url())
        assert response.status_code == 302
        return response.url

    def body(self, response) -> str:
        if getattr(response, "streaming", False):
            content = b"".join(response.streaming_content)
            response.streamed_body = content
            return content.decode()
        return response.content.decode()

    # --- steps -----------------------------------------------------------------
    def consent(self, sensitive: bool = True):
        return self.post(self.url("consent/"), {"agree": "on", **({"sensitive": "on"} if sensitive else {})})

    def profile(self, **data: Any):
        return self.post(self.url("about-you/"), {"age_band": "35-44", **data})

    def pre_panas(self, rating: int = 3):
        return self.post(self.url("feelings-before/"), {item: str(rating) for item in cat.PANAS_ITEMS})

    def topic(self, subtopic: str = "Exam pressure"):
        topic = Topic.objects.get(subtopic=subtopic)
        return self.post(self.url("topic/"), {"topic": topic.pk, "attitude": cat.TOPIC_ATTITUDE_OPTIONS[0]})

    def to_chat(self, subtopic: str = "Exam pressure") -> Conversation:
        self.consent()
        self.profile()
        self.pre_panas()
        self.topic(subtopic)
        return Conversation.objects.get(participant=self.participant)

    def send(self, text: str, turn_number: int, as_json: bool = True):
        extra = {"HTTP_ACCEPT": "application/json"} if as_json else {}
        return self.post(self.url("chat/send/"), {"message": text, "turn_number": turn_number}, **extra)

    def reply(self, turn_number: int) -> list[dict]:
        response = self.post(self.url(f"chat/reply/{turn_number}/"), HTTP_ACCEPT="application/x-ndjson")
        assert response.status_code == 200
        assert response["Content-Type"] == "application/x-ndjson"
        return [json.loads(line) for line in self.body(response).splitlines() if line]

    def annotate(self, turn_number: int, moods: dict | None = None, questions: tuple[str, ...] = ("general",)) -> None:
        """Answer the three annotation pages of a turn through the pages, as a browser would."""
        url = self.url(f"turn/{turn_number}/")
        html = self.body(self.get(url))
        ids = re.findall(r'name="observed_(B\d+)"', html)
        shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
        data = {"step": "answers", "shown": shown, **(moods if moods is not None else {"no_change": "on"})}
        data.update(every_answer(list(dict.fromkeys(ids)), "yes", "no"))
        assert self.post(url, data).status_code == 302
        data = {"step": "rewrite", "human_edited": f"My ideal reply {turn_number}", "questions": list(questions)}
        assert self.post(url, data).status_code == 302
        html = self.body(self.get(url))
        names = set(re.findall(r'name="(winner_\d+)"', html))
        assert self.post(url, {"step": "compare", **dict.fromkeys(names, "B")}).status_code == 302

    def turn(self, turn_number: int, text: str | None = None) -> None:
        assert self.send(text or f"Message number {turn_number}: I feel worried.", turn_number).status_code == 200
        assert self.reply(turn_number)[-1]["type"] == "done"
        self.annotate(turn_number)

    def finish(self) -> None:
        self.post(self.url("chat/finish/"), {"confirm": "yes"})
        self.post(self.url("feelings-after/"), dict.fromkeys(cat.PANAS_ITEMS, "5"))
        self.post(self.url("your-view/"), survey_answers())

    def to_survey(self) -> Conversation:
        """Chat the minimum three turns, finish, and answer the feelings after: the survey page is next."""
        conversation = self.to_chat()
        for n in (1, 2, 3):
            self.turn(n)
        self.post(self.url("chat/finish/"), {"confirm": "yes"})
        self.post(self.url("feelings-after/"), dict.fromkeys(cat.PANAS_ITEMS, "5"))
        assert self.current().endswith("/your-view/")
        return conversation


def survey_answers(**changes: Any) -> dict[str, Any]:
    """A complete, valid survey post, with ``changes`` applied (a value of None leaves that answer out)."""
    answers = {
        "looking_for": [cat.Q1_OPTIONS[1]],
        "emotion_clarity": cat.Q2_OPTIONS[0],
        "model_fit": cat.Q3_OPTIONS[0],
        **{f"branch_{b}": "6" for b in cat.FOUR_BRANCHES},
        **changes,
    }
    return {k: v for k, v in answers.items() if v is not None}


@pytest.fixture
def walker(client, participant) -> Walker:
    return Walker(client, participant)


def answered_turn(conversation: Conversation, text: str = "I feel so tired of all this.") -> Turn:
    """A turn with its offline reply, created through the same actions the pages use."""
    from collection.chat_model import build_request

    turn, _ = flow.do_add_message(conversation, flow.next_turn_number(conversation), text)
    flow.do_save_reply(turn, offline_reply(build_request(conversation, turn)))
    return Turn.objects.get(pk=turn.pk)


# ---------------------------------------------------------------------------
# Steps and their errors
# ---------------------------------------------------------------------------


def test_study_link_starts_at_consent_and_shows_help(walker, study):
    assert walker.current().endswith("/consent/")
    page = walker.get(walker.url("consent/"))
    html = walker.body(page)
    assert study.crisis_resources[:40] in html
    # plain words, not the benchmark's research jargon
    assert "This is not therapy" in html and "it cannot get help for you in an emergency" in html
    assert escape(cat.RESEARCH_ONLY_STATEMENT) not in html and "diagnostic instrument" not in html
    assert "Withdraw from the study" in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert page["Cache-Control"].startswith("max-age=0")


def test_consent_without_the_box_is_refused_in_words(walker):
    page = walker.refused(walker.post(walker.url("consent/"), {"sensitive": "on"}))
    html = walker.body(page)
    assert "To take part, please tick this box" in html
    assert 'name="sensitive" id="id_sensitive" checked' in html  # the rest is kept
    assert not Consent.objects.exists()


def test_consent_stores_version_time_and_separate_sensitive_choice(walker, study):
    assert walker.consent(sensitive=False).status_code == 302
    consent = Consent.objects.get(participant=walker.participant)
    assert consent.version == study.consent_version
    assert consent.consented_at is not None
    assert consent.sensitive_data_consent is False
    assert walker.current().endswith("/about-you/")


def test_profile_without_sensitive_consent_never_asks_or_stores_diagnoses(walker):
    walker.consent(sensitive=False)
    html = walker.body(walker.get(walker.url("about-you/")))
    assert "diagnosed" not in html
    walker.profile(diagnoses=["Depression"], traits=["Practical"])
    assert ParticipantProfile.objects.get(participant=walker.participant).traits == ["Practical"]
    assert not SensitiveProfile.objects.exists()


def test_profile_errors_are_next_to_the_field_and_keep_other_answers(walker):
    walker.consent(sensitive=True)
    page = walker.refused(
        walker.post(walker.url("about-you/"), {"traits": ["Anxious"], "diagnoses": ["None", "Anxiety"]})
    )
    html = walker.body(page)
    assert "Please choose an age range" in html
    assert "“None” cannot be combined with other answers" in html
    assert re.search(r'value="Anxious"[^>]*checked', html)
    assert not ParticipantProfile.objects.exists()
    walker.profile(diagnoses=["Anxiety", "Depression"])
    assert SensitiveProfile.objects.get(participant=walker.participant).diagnoses == ["Anxiety", "Depression"]


def test_panas_requires_all_twenty_items_and_names_the_missing_one(walker):
    walker.consent()
    walker.profile()
    data = {item: "4" for item in cat.PANAS_ITEMS if item != "Jittery"}
    page = walker.refused(walker.post(walker.url("feelings-before/"), data))
    html = walker.body(page)
    assert "Please choose how jittery you feel, from 1 to 7." in html
    assert html.count("checked") == 19  # everything else kept
    walker.participant.refresh_from_db()
    assert walker.participant.pending_pre_panas == {}
    assert walker.pre_panas(rating=2).status_code == 302
    walker.participant.refresh_from_db()
    assert walker.participant.pending_pre_panas == dict.fromkeys(cat.PANAS_ITEMS, 2)


def test_topic_page_groups_all_fifty_topics_by_category(walker):
    walker.consent()
    walker.profile()
    walker.pre_panas()
    html = walker.body(walker.get(walker.url("topic/")))
    for category, subtopics in cat.TOPICS.items():
        assert f"<legend>{category}</legend>" in html
        for subtopic in subtopics:
            assert escape(subtopic) in html


def test_choosing_a_topic_starts_the_conversation_and_moves_the_pre_panas(walker, study):
    conversation = walker.to_chat("Losing a pet")
    assert conversation.topic.category == "Grief"
    assert conversation.status == Conversation.Status.IN_PROGRESS
    assert conversation.original_model.name in OFFLINE_MODEL_NAMES
    pre = PanasSurvey.objects.get(conversation=conversation, kind="pre")
    assert (pre.total_positive, pre.total_negative) == (30, 30)
    walker.participant.refresh_from_db()
    assert walker.participant.pending_pre_panas == {}
    profile = ParticipantProfile.objects.get(participant=walker.participant)
    assert profile.topic_attitude == cat.TOPIC_ATTITUDE_OPTIONS[0]
    assert conversation.metadata_extra == {"study": study.slug}
    assert walker.current().endswith("/chat/")


def test_chat_page_shows_only_model_as_the_name(walker):
    conversation = walker.to_chat()
    answered_turn(conversation)
    conversation.turns.update(
        annotation_completed_at=conversation.started_at, completeness=cat.TURN_COMPLETE, mood_answered=True
    )
    html = walker.body(walker.get(walker.url("chat/")))
    assert '<p class="bubble-who">Model</p>' in html
    assert conversation.original_model.name not in html
    assert conversation.original_model.alias not in html


# ---------------------------------------------------------------------------
# Chat: save first, stream, fail calmly, retry
# ---------------------------------------------------------------------------


def test_message_is_saved_before_the_model_is_called_and_survives_a_failure(walker, settings):
    walker.to_chat()
    settings.ATTUNE_OFFLINE_MODEL_FAILS = True
    sent = walker.send("My manager shouted at me today.", 1)
    assert sent.status_code == 200
    assert sent.json()["reply_url"] == walker.url("chat/reply/1/")
    turn = Turn.objects.get(conversation__participant=walker.participant)
    assert (turn.user_message, turn.llm_response) == ("My manager shouted at me today.", "")

    events = walker.reply(1)
    assert events == [{"type": "start"}, {"type": "error", "message": events[1]["message"]}]
    assert "Your message is saved" in events[1]["message"]
    assert Turn.objects.get(pk=turn.pk).llm_response == ""

    # without JavaScript the failure lands on the chat page with a calm message and a retry button
    fallback = walker.post(walker.url("chat/reply/1/"))
    assert fallback.status_code == 302 and fallback.url.endswith("/chat/?reply=failed")
    html = walker.body(walker.get(fallback.url))
    assert "Your message is saved" in html and "Try again" in html and "My manager shouted at me today." in html

    settings.ATTUNE_OFFLINE_MODEL_FAILS = False
    events = walker.reply(1)
    assert [e["type"] for e in events][-1] == "done"
    reply = "".join(e["text"] for e in events if e["type"] == "delta")
    assert Turn.objects.get(pk=turn.pk).llm_response == reply.strip()
    # Pieces that arrive together are sent together: how many depends on speed (see test_live_models).
    assert [e["type"] for e in events if e["type"] != "delta"] == ["start", "done"]
    assert events[-1]["next"] == walker.url("turn/1/")  # the continue link skips the study link's redirect
    assert walker.current().endswith("/turn/1/")


def test_a_second_reply_request_resends_the_saved_reply_without_calling_again(walker):
    walker.to_chat()
    walker.send("hello there, I am sad", 1)
    first = walker.reply(1)
    saved = Turn.objects.get(conversation__participant=walker.participant).llm_response
    again = walker.reply(1)
    assert again == [{"type": "delta", "text": saved}, {"type": "done", "next": walker.url()}]
    assert "".join(e["text"] for e in first if e["type"] == "delta").strip() == saved


def test_reply_in_progress_elsewhere_reports_busy_instead_of_a_second_call(walker):
    conversation = walker.to_chat()
    walker.send("hi", 1)
    turn = conversation.turns.get()
    cache.add(f"attune:reply-lock:{turn.pk}", 1, timeout=60)
    assert walker.reply(1) == [{"type": "busy"}]


def test_double_send_creates_one_turn(walker):
    walker.to_chat()
    first = walker.send("Same words twice", 1)
    second = walker.send("Same words twice", 1)
    assert first.json() == second.json()
    assert Turn.objects.filter(conversation__participant=walker.participant).count() == 1


def test_send_without_javascript_redirects_to_the_chat_with_a_get_reply_button(walker):
    walker.to_chat()
    sent = walker.send("No script here", 1, as_json=False)
    assert sent.status_code == 302 and sent.url.endswith("/chat/")
    html = walker.body(walker.get(sent.url))
    assert "Get the reply" in html and "No script here" in html
    # straight to the reply's annotation, where the study link would send the participant, without its redirect
    assert walker.post(walker.url("chat/reply/1/")).url == walker.url("turn/1/")
    assert walker.current().endswith("/turn/1/")


def test_empty_or_overlong_message_is_refused_in_words(walker):
    walker.to_chat()
    empty = walker.send("   ", 1)
    assert empty.status_code == 400 and empty.json()["error"] == "Please write a message before sending."
    too_long = walker.send("x" * 4001, 1, as_json=False)
    assert too_long.status_code == 302 and too_long.url == walker.url("chat/")  # post/redirect/get
    html = walker.body(walker.get(too_long.url))
    assert "This is 4001 characters long and the limit is 4000" in html
    assert "x" * 4001 in html  # the words are kept in the box, never cut
    assert 'maxlength="' not in html  # the browser does not cut a paste either: the counter warns instead
    assert 'data-limit="4000"' in html
    assert walker.get(walker.url("chat/")).content.count(b"x" * 4001) == 0  # shown once, then gone
    as_json = walker.send("y" * 4001, 1)
    assert as_json.status_code == 400 and "4001 characters long" in as_json.json()["error"]
    # line breaks count once, as the live counter counts them (browsers post CR LF)
    assert walker.send("a\r\n" * 1999 + "ab", 1).status_code == 200
    assert Turn.objects.get().user_message == "a\n" * 1999 + "ab"


def test_overlong_free_text_in_the_survey_is_refused_and_kept(walker):
    walker.to_chat()
    walker.turn(1)
    walker.turn(2)
    walker.turn(3)
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    walker.post(walker.url("feelings-after/"), dict.fromkeys(cat.PANAS_ITEMS, "5"))
    answers = {
        "looking_for": [cat.Q1_OPTIONS[1]],
        "emotion_clarity": cat.Q2_OPTIONS[0],
        "model_fit": cat.Q3_OPTIONS[0],
        **{f"branch_{b}": "6" for b in cat.FOUR_BRANCHES},
        "comment": "z" * 4100,
    }
    page = walker.refused(walker.post(walker.url("your-view/"), answers))
    html = walker.body(page)
    assert "This is 4100 characters long and the limit is 4000" in html and "z" * 4100 in html
    assert Conversation.objects.get().status == Conversation.Status.ANNOTATING


def test_words_under_other_choose_other_even_with_no_box_ticked(walker):
    conversation = walker.to_survey()
    answers = survey_answers(looking_for=None, looking_for_other="Someone to check in on me")
    saved = walker.post(walker.url("your-view/"), answers)
    assert saved.status_code == 302 and walker.current().endswith("/thank-you/")
    assert ConversationWideAnswers.objects.get(conversation=conversation).looking_for == [cat.Q1_OTHER]
    conversation.refresh_from_db()
    assert conversation.metadata_extra[cat.Q1_OTHER_TEXT_KEY] == "Someone to check in on me"


def test_the_first_question_still_needs_a_box_or_words_under_other(walker):
    walker.to_survey()
    for other in ("", "   "):
        page = walker.refused(
            walker.post(walker.url("your-view/"), survey_answers(looking_for=None, looking_for_other=other))
        )
        assert "Please choose at least one answer" in walker.body(page)
    assert not ConversationWideAnswers.objects.exists()


def test_other_text_counts_line_breaks_once_and_is_refused_calmly_when_too_long(walker):
    conversation = walker.to_survey()
    page = walker.refused(walker.post(walker.url("your-view/"), survey_answers(looking_for_other="w" * 301)))
    html = walker.body(page)
    assert "This is 301 characters long and the limit is 300" in html and "w" * 301 in html
    assert "Ensure this value" not in html  # not Django's default wording
    alone = walker.refused(
        walker.post(walker.url("your-view/"), survey_answers(looking_for=None, looking_for_other="w" * 301))
    )
    assert "Please choose at least one answer" not in walker.body(alone)  # the words are an answer: only too long
    # 300 characters as the live counter counts them, though the browser posts each line break as CR LF
    saved = walker.post(walker.url("your-view/"), survey_answers(looking_for_other="a\r\n" * 149 + "ab"))
    assert saved.status_code == 302 and walker.current().endswith("/thank-you/")
    conversation.refresh_from_db()
    assert conversation.metadata_extra[cat.Q1_OTHER_TEXT_KEY] == "a " * 149 + "ab"


def test_no_new_message_before_the_reply_is_annotated(walker):
    walker.to_chat()
    walker.turn_number = 1
    walker.send("first", 1)
    walker.reply(1)
    refused = walker.send("second", 2)
    assert refused.status_code == 409 and refused.json()["redirect"] == walker.url()
    assert walker.current().endswith("/turn/1/")
    assert Turn.objects.count() == 1


def test_chat_messages_are_rate_limited_per_participant(walker, settings, client, study, monkeypatch):
    settings.ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE = 1
    monkeypatch.setattr(flow, "chat_clock", lambda: 1_000_000.0)  # every message at the same instant
    walker.to_chat()
    walker.turn(1)
    refused = walker.refused(walker.send("Sorry, one more thing", 2, as_json=False))
    html = walker.body(refused)
    assert "You are sending messages very quickly" in html and "Sorry, one more thing" in html
    assert walker.send("Sorry, one more thing", 2).json()["error"].startswith("You are sending messages")
    assert Turn.objects.count() == 1
    # another participant is not affected by this participant's limit
    other = Walker(Client(), flow.do_enrol(study))
    other.to_chat()
    assert other.send("Hello", 1).status_code == 200


def test_finishing_needs_the_minimum_number_of_turns(walker):
    walker.to_chat()
    walker.turn(1)
    walker.turn(2)
    assert "Finish the chat" not in walker.body(walker.get(walker.url("chat/")))
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    assert walker.current().endswith("/chat/")
    walker.turn(3)
    assert "Finish the chat" in walker.body(walker.get(walker.url("chat/")))
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    assert walker.current().endswith("/feelings-after/")


def test_finishing_with_an_unsent_message_is_refused_calmly_and_keeps_the_words(walker):
    walker.to_chat()
    for n in (1, 2, 3):
        walker.turn(n)
    html = walker.body(walker.get(walker.url("chat/")))
    # the Finish button belongs to the message form, so the box's text goes with it, even without JavaScript
    form = re.search(r"<form[^>]*data-chat-form.*?</form>", html, re.S).group(0)
    assert f'formaction="{walker.url("chat/finish/")}"' in form and "Finish the chat" in form
    unsent = "Actually, one more thing:\r\nthank you for listening."
    refused = walker.post(walker.url("chat/finish/"), {"message": unsent, "turn_number": 4, "confirm": "yes"})
    assert refused.status_code == 302 and refused.url == walker.url("chat/")
    html = walker.body(walker.get(refused.url))
    assert "Your message has not been sent yet, so the chat is not finished." in html
    assert "Please send it, or clear the box, and then finish the chat." in html
    assert re.search(r"<textarea[^>]*>Actually, one more thing:\s+thank you for listening.</textarea>", html)
    assert Conversation.objects.get().status == Conversation.Status.IN_PROGRESS
    assert walker.current().endswith("/chat/")
    assert walker.send("Actually, one more thing: thank you for listening.", 4).status_code == 200  # send it now


def test_finishing_the_chat_asks_first_and_only_yes_finishes(walker):
    walker.to_chat()
    for n in (1, 2, 3):
        walker.turn(n)
    asked = walker.post(walker.url("chat/finish/"), {"message": "  ", "turn_number": 4})  # an empty box
    assert asked.status_code == 302 and asked.url == walker.url("chat/finish/")
    page = walker.get(asked.url)
    html = walker.body(page)
    assert page.status_code == 200 and "<h1>Finish the chat?</h1>" in html
    assert "You won&rsquo;t be able to add more messages" in html
    assert re.search(r'<button type="submit" name="confirm" value="yes"[^>]*>Yes, finish the chat</button>', html)
    assert f'href="{walker.url("chat/")}"' in html and "Back to the chat" in html
    assert Conversation.objects.get().status == Conversation.Status.IN_PROGRESS
    assert walker.current().endswith("/chat/")  # asking is not finishing: the study link still opens the chat
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    assert Conversation.objects.get().status == Conversation.Status.ANNOTATING
    assert walker.current().endswith("/feelings-after/")
    moved_on = walker.get(walker.url("chat/finish/"))  # the confirm page, opened again after finishing
    assert moved_on.status_code == 302 and moved_on.url.endswith("/feelings-after/")


def test_chat_stops_taking_messages_at_the_maximum(walker, study):
    Study.objects.filter(pk=study.pk).update(min_turns=1, max_turns=1)
    walker.to_chat()
    walker.turn(1)
    html = walker.body(walker.get(walker.url("chat/")))
    assert "You have reached the most messages" in html and 'name="message"' not in html
    assert walker.send("more", 2).status_code == 400


# ---------------------------------------------------------------------------
# Per-turn annotation
# ---------------------------------------------------------------------------


def every_answer(question_ids: list[str], observed: str = "yes", preferred: str = "no") -> dict[str, str]:
    return {
        **{f"observed_{qid}": observed for qid in question_ids},
        **{f"preferred_{qid}": preferred for qid in question_ids},
    }


def answers_page(walker: Walker, url: str) -> tuple[list[str], str]:
    """(question ids shown, signed shown-token) of the answers page."""
    html = walker.body(walker.get(url))
    ids = list(dict.fromkeys(re.findall(r'name="observed_(B\d+)"', html)))
    return ids, re.search(r'name="shown" value="([^"]+)"', html).group(1)


def save_answers(walker: Walker, url: str, moods: dict | None = None, value: str = "yes") -> list[str]:
    ids, shown = answers_page(walker, url)
    data = {"step": "answers", "shown": shown, **(moods if moods is not None else {"no_change": "on"})}
    assert walker.post(url, {**data, **every_answer(ids, value, value)}).status_code == 302
    return ids


def test_mood_needs_a_feeling_or_no_change_and_not_both(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    ids, shown = answers_page(walker, url)
    answers = every_answer(ids)
    neither = walker.body(walker.refused(walker.post(url, {"step": "answers", "shown": shown, **answers})))
    assert "Please tick at least one feeling, or tick “No change”" in neither
    both = walker.refused(walker.post(url, {"step": "answers", "no_change": "on", "mood_Upset": "on", **answers}))
    assert "Please untick one or the other" in walker.body(both)
    assert not BinaryJudgement.objects.filter(turn=turn).exists()
    # a strength alone counts as choosing the word; a tick without strength stores no intensity
    walker.post(url, {"step": "answers", "shown": shown, "intensity_Upset": "4", "mood_Alert": "on", **answers})
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", "intensity")) == [
        ("Alert", None),
        ("Upset", 4),
    ]


def error_summary(html: str) -> str:
    """The text of the error summary at the top of a refused page, tags removed."""
    block = re.search(r'<div class="error-summary".*?</div>', html, re.S).group(0)
    return " ".join(re.sub(r"<[^>]+>", " ", block).split())


def test_the_error_summary_counts_the_answers_that_need_attention_and_calls_none_missing_that_is_not(walker):
    walker.to_survey()
    # nothing chosen, and a comment over its limit: seven answers are missing, one is too long
    page = walker.refused(walker.post(walker.url("your-view/"), {"comment": "z" * 4100}))
    summary = error_summary(walker.body(page))
    assert "8 answers need attention. Each one is marked below in red" in summary
    assert "missing" not in summary


def test_the_error_summary_does_not_count_a_page_wide_problem_as_an_answer(walker):
    conversation = walker.to_chat()
    answered_turn(conversation)
    url = walker.url("turn/1/")
    ids, shown = answers_page(walker, url)
    # no feeling ticked (a problem of the whole mood section) and two answers left out: two answer errors
    answers = {k: v for k, v in every_answer(ids).items() if k not in (f"observed_{ids[0]}", f"observed_{ids[1]}")}
    summary = error_summary(
        walker.body(walker.refused(walker.post(url, {"step": "answers", "shown": shown, **answers})))
    )
    assert "Please tick at least one feeling" in summary
    assert summary.count("Please say whether this happened") == 2  # each one listed, linked to its question
    assert "answers" not in summary.replace("Some answers need attention", "")  # no count of 3 "answers"
    # every answer left out: the count is of answers, without the mood section's problem
    summary = error_summary(walker.body(walker.refused(walker.post(url, {"step": "answers", "shown": shown}))))
    assert f"{2 * len(ids)} answers need attention" in summary


def test_the_mood_and_pair_errors_are_linked_from_the_summary_and_described_to_screen_readers(walker):
    conversation = walker.to_chat()
    answered_turn(conversation)
    url = walker.url("turn/1/")
    ids, shown = answers_page(walker, url)
    html = walker.body(walker.refused(walker.post(url, {"step": "answers", "shown": shown, **every_answer(ids)})))
    mood = re.search(r'<fieldset class="mood has-error"[^>]*>', html).group(0)
    assert 'id="field-mood"' in mood and 'aria-describedby="error-mood"' in mood
    assert re.search(r'<p class="field-error" id="error-mood">.*Please tick at least one feeling', html)
    assert '<li><a href="#field-mood">Please tick at least one feeling' in html  # the summary links to it
    save_answers(walker, url)
    walker.post(url, {"step": "rewrite", "human_edited": "Mine", "questions": ["general"]})
    html = walker.body(walker.refused(walker.post(url, {"step": "compare"})))
    pairs = re.findall(r'<fieldset class="pair has-error" id="field-(winner_\d+)"[^>]*>', html)
    assert len(pairs) == 3
    for name in pairs:
        assert re.search(rf'id="field-{name}" data-answer-group aria-describedby="error-{name}"', html)
        assert f'id="error-{name}"' in html


def test_no_change_is_stored_as_an_empty_tag_list(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    save_answers(walker, walker.url("turn/1/"))
    assert not MoodTag.objects.filter(turn=turn).exists()
    assert BinaryJudgement.objects.filter(turn=turn).count() == 36


def test_all_behaviour_questions_are_on_one_page_first_person_each_with_its_own_second_prompt(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    html = walker.body(walker.get(url))
    assert "Did this reply change how you feel?" in html  # mood and questions share the page
    for label in cat.BINARY_CATEGORY_LABELS.values():
        assert label in html
    for q in cat.BINARY_QUESTIONS:
        assert escape(q.first_person) in html and escape(q.wanted) in html
    assert "Did you want it?" not in html
    # one row per behaviour: each answer group is named for screen readers ("Did it happen?" and the
    # question's own second prompt), with a short visible caption, and each section has column headings
    groups = len(cat.BINARY_CATEGORY_LABELS)
    assert html.count("Did it happen?") == 36 * 2 + groups
    assert html.count("Did I want it?") == 36 + groups
    assert "Keyboard shortcuts" in html and "participant/annotate.js" in html
    assert escape(turn.llm_response) in html  # the reply stays beside the questions
    _, shown = answers_page(walker, url)
    page = walker.refused(
        walker.post(url, {"step": "answers", "shown": shown, "no_change": "on", "observed_B1": "yes"})
    )
    html = walker.body(page)
    assert "Please say whether you wanted this" in html and "Please say whether this happened" in html
    assert "71 answers need attention" in html
    assert not BinaryJudgement.objects.filter(turn=turn).exists()
    assert re.search(r'name="observed_B1" value="yes"[^>]*checked', html)  # the answer given is kept


def test_second_prompts_fit_their_questions():
    assert set(cat.BINARY_WANTED_PROMPTS) == set(cat.BINARY_QUESTION_IDS)
    assert len(set(cat.BINARY_WANTED_PROMPTS.values())) == 36  # no generic prompt repeated
    assert cat.BINARY_QUESTIONS_BY_ID["B8"].wanted == "Did I want its tone to match how I was feeling?"
    assert all(p.startswith("Did I want") and p.endswith("?") for p in cat.BINARY_WANTED_PROMPTS.values())


def test_sampled_questions_are_recorded_and_rotate_evenly_across_turns_and_participants(study, client):
    """k = 8: each saved turn takes the next 8 of the rotation cycle; after 9 turns (72 = 2 x 36) every
    question has been asked exactly twice, across three participants."""
    Study.objects.filter(pk=study.pk).update(binary_sample_size=8)
    asked_per_turn = []
    for n in range(3):
        participant = flow.do_enrol(Study.objects.get(pk=study.pk))
        walker = Walker(client, participant)
        walker.to_chat()
        for number in (1, 2, 3):
            walker.send(f"Participant {n}, message {number}: I feel uneasy.", number)
            walker.reply(number)
            url = walker.url(f"turn/{number}/")
            shown_ids = save_answers(walker, url)
            turn = Turn.objects.get(conversation__participant=participant, turn_number=number)
            stored = list(turn.binary_judgements.order_by("position").values_list("question_id", flat=True))
            assert stored == shown_ids and len(stored) == 8  # what was asked is what was shown, recorded
            assert stored == [q for q in cat.BINARY_QUESTION_IDS if q in stored]
            asked_per_turn.append(stored)
            walker.post(url, {"step": "rewrite", "human_edited": "Mine", "questions": ["general"]})
            names = set(re.findall(r'name="(winner_\d+)"', walker.body(walker.get(url))))
            walker.post(url, {"step": "compare", **dict.fromkeys(names, "A")})
    counts = {qid: sum(qid in turn for turn in asked_per_turn) for qid in cat.BINARY_QUESTION_IDS}
    assert set(counts.values()) == {2}
    # the first window spans all five categories
    assert {cat.BINARY_QUESTIONS_BY_ID[q].category for q in asked_per_turn[0]} == set(cat.BINARY_CATEGORIES)


def test_sampling_keeps_catalogue_order_and_all_when_k_is_zero():
    assert sample_question_ids(5, 0) == list(cat.BINARY_QUESTION_IDS)
    assert sample_question_ids(5, 36) == list(cat.BINARY_QUESTION_IDS)
    picked = sample_question_ids(3, 10)
    assert picked == [q for q in cat.BINARY_QUESTION_IDS if q in picked]
    assert sample_question_ids(0, 8) != sample_question_ids(8, 8)
    assert sample_question_ids(0, 8) == sample_question_ids(36, 8)  # the cycle repeats
    assert sorted(ROTATION_CYCLE) == sorted(cat.BINARY_QUESTION_IDS)


def test_rewrite_is_shown_and_the_golden_reply_starts_from_the_participants_choice(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation, "I keep crying at work and I feel ashamed.")
    url = walker.url("turn/1/")
    save_answers(walker, url, value="na")
    html = walker.body(walker.get(url))
    improved = AlternateResponses.objects.get(turn=turn).llm_improved
    assert improved and "I keep crying at work" in improved
    # the ideal reply starts empty; the participant may start from the rewrite or the original instead
    box = re.compile(r'<textarea name="human_edited"[^>]*>(.*?)</textarea>', re.S)
    assert box.search(html).group(1) == ""
    assert box.search(walker.body(walker.get(url + "?start=rewrite"))).group(1) == escape(improved)
    assert box.search(walker.body(walker.get(url + "?start=original"))).group(1) == escape(turn.llm_response)
    assert box.search(walker.body(walker.get(url + "?start=nonsense"))).group(1) == ""
    refused = walker.refused(walker.post(url, {"step": "rewrite", "human_edited": "  ", "questions": ["general"]}))
    assert "Please write the reply you would have wanted" in walker.body(refused)
    walker.post(
        url, {"step": "rewrite", "human_edited": "  I hear you. That sounds exhausting.  ", "questions": ["general"]}
    )
    assert AlternateResponses.objects.get(turn=turn).human_edited == "I hear you. That sounds exhausting."


def test_pairwise_choice_creates_three_pairs_per_question_all_on_one_page(walker):
    conversation = walker.to_chat()
    walker.send("I feel lost", 1)
    walker.reply(1)
    turn = conversation.turns.get()
    url = walker.url("turn/1/")
    save_answers(walker, url)
    refused = walker.refused(walker.post(url, {"step": "rewrite", "human_edited": "Mine"}))
    assert "Please choose at least one question" in walker.body(refused)
    walker.post(url, {"step": "rewrite", "human_edited": "Mine", "questions": ["PW15", "general", "PW4"]})
    turn.refresh_from_db()
    assert turn.selected_pairwise_questions == ["general", "PW4", "PW15"]
    rows = list(PairwiseComparison.objects.filter(turn=turn).order_by("position"))
    assert len(rows) == 9
    assert [r.question_id for r in rows] == ["general"] * 3 + ["PW4"] * 3 + ["PW15"] * 3
    assert {frozenset((r.response_a, r.response_b)) for r in rows} == {frozenset(p) for p in tf.REPLY_PAIRS}
    # one page shows all nine pairs, the texts in exactly the stored positions
    html = walker.body(walker.get(url))
    texts = tf.reply_texts(turn)
    shown = {}
    for chunk in html.split('<fieldset class="pair')[1:]:
        position = int(re.search(r'name="winner_(\d+)"', chunk).group(1))
        shown[position] = [
            t.strip() for t in re.findall(r'<div class="bubble-text" dir="auto">(.*?)</div>', chunk, re.S)
        ]
    assert shown == {r.position: [escape(texts[r.response_a]), escape(texts[r.response_b])] for r in rows}
    # a repeated choice changes nothing
    walker.post(url, {"step": "rewrite", "human_edited": "Other", "questions": ["general"]})
    assert PairwiseComparison.objects.filter(turn=turn).count() == 9
    missing = walker.refused(walker.post(url, {"step": "compare", "winner_0": "A"}))
    assert "Please choose Reply A or Reply B" in walker.body(missing)
    assert not PairwiseComparison.objects.filter(turn=turn, winner__isnull=False).exists()
    walker.post(url, {"step": "compare", **{f"winner_{r.position}": "AB"[r.position % 2] for r in rows}})
    assert [r.winner for r in PairwiseComparison.objects.filter(turn=turn).order_by("position")] == list("ABABABABA")
    assert Turn.objects.get(pk=turn.pk).annotation_completed_at is not None


def test_answers_can_be_reviewed_and_changed_until_the_next_message(walker):
    conversation = walker.to_chat()
    walker.send("I feel lost", 1)
    walker.reply(1)
    turn = conversation.turns.get()
    url = walker.url("turn/1/")
    review = walker.url("turn/1/review/")
    assert walker.get(review).url == url  # nothing saved yet: nothing to review
    save_answers(walker, url, moods={"mood_Upset": "on", "intensity_Upset": "3"})
    walker.post(url, {"step": "rewrite", "human_edited": "Mine", "questions": ["general"]})
    assert review in walker.body(walker.get(url))  # the compare page links to the review
    walker.post(url, {"step": "compare", "winner_0": "A", "winner_1": "B", "winner_2": "A"})
    # each comparison keeps its own winner (they are stored in one statement)
    assert [c.winner for c in PairwiseComparison.objects.filter(turn=turn).order_by("position")] == ["A", "B", "A"]
    chat = walker.body(walker.get(walker.url("chat/")))
    assert review in chat and "Review or change your answers" in chat
    html = walker.body(walker.get(review))
    assert re.search(r'name="mood_Upset"[^>]*checked', html)
    assert len(re.findall(r'value="yes"[^>]*checked', html)) == 72 and "Mine" in html
    data = {"mood_Proud": "on", **every_answer(list(cat.BINARY_QUESTION_IDS), "no", "na")}
    data.update({"winner_0": "B", "winner_1": "A", "winner_2": "B"})
    done = walker.post(review, data)
    assert done.status_code == 302 and done.url == walker.url("chat/")
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", "intensity")) == [("Proud", None)]
    assert set(turn.binary_judgements.values_list("observed", "preferred")) == {("no", "na")}
    assert turn.binary_judgements.count() == 36
    assert [c.winner for c in PairwiseComparison.objects.filter(turn=turn).order_by("position")] == ["B", "A", "B"]
    # after the next message the answers are final
    walker.send("Another message", 2)
    assert walker.get(review).status_code == 302
    refused = walker.post(review, {**data, "mood_Proud": "", "no_change": "on"})
    assert refused.status_code == 302
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", flat=True)) == ["Proud"]
    assert "Review or change" not in walker.body(walker.get(walker.url("chat/")))


def test_positions_are_randomised_in_both_orders(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    AlternateResponses.objects.create(turn=turn, llm_improved="A rewrite.")
    tf.do_save_rewrite(turn, "My own reply.", list(cat.PAIRWISE_QUESTION_IDS))
    orders = set(PairwiseComparison.objects.filter(turn=turn).values_list("response_a", "response_b"))
    assert len(PairwiseComparison.objects.filter(turn=turn)) == 48
    # 16 draws per pair: the chance of one orientation only is 2 * 3 / 2**16
    assert orders == {p for pair in tf.REPLY_PAIRS for p in (pair, pair[::-1])}


def test_stale_or_repeated_annotation_submission_changes_nothing(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    save_answers(walker, url, moods={"mood_Upset": "on", "intensity_Upset": "3"})
    ids = list(cat.BINARY_QUESTION_IDS)
    again = walker.post(url, {"step": "answers", "mood_Proud": "on", **every_answer(ids)})  # double click / back
    assert again.status_code == 302 and again.url == url
    assert list(MoodTag.objects.filter(turn=turn).values_list("emotion", flat=True)) == ["Upset"]
    assert turn.annotation_started_at is None
    assert Turn.objects.get(pk=turn.pk).annotation_started_at is not None


def test_a_whole_conversation_exports_as_a_valid_canonical_file(walker, tmp_path):
    walker.to_chat()
    for n in (1, 2, 3):
        walker.turn(n)
    walker.finish()
    page = walker.get(walker.current())
    assert walker.participant.completion_code in walker.body(page)
    conversation = Conversation.objects.get()
    assert conversation.status == Conversation.Status.COMPLETE and conversation.completed_at
    out = tmp_path / "out"
    call_command("export", "--out", str(out))
    (path,) = list(out.glob("*.json"))
    doc = cf.load_conversation(path.read_bytes(), source=path.name)
    assert [t.userMessage for t in doc.turns] == [f"Message number {n}: I feel worried." for n in (1, 2, 3)]
    assert all(len(t.annotations.binaryJudgements) == 36 for t in doc.turns)
    assert all(t.annotations.alternateResponses.humanEdited == f"My ideal reply {t.turnNumber}" for t in doc.turns)
    assert doc.conversationWideQuestions.fourBranchScores == dict.fromkeys(cat.FOUR_BRANCHES, 6)
    assert doc.postPanas.totalPositiveAffect == 50
    assert doc.metadata.model == conversation.original_model.alias


# ---------------------------------------------------------------------------
# Resume, idempotency, privacy
# ---------------------------------------------------------------------------


def test_every_step_resumes_from_the_study_link_after_a_closed_tab(study):
    participant = flow.do_enrol(study)
    expected = ["/consent/", "/about-you/", "/feelings-before/", "/topic/", "/chat/"]
    w = Walker(Client(), participant)
    steps = [w.consent, w.profile, w.pre_panas, w.topic]
    for index, suffix in enumerate(expected):
        fresh = Walker(Client(), participant)  # a new browser: no cookies, only the link
        assert fresh.current().endswith(suffix)
        if index < len(steps):
            steps[index]()


def test_pages_of_other_steps_redirect_to_the_current_one(walker):
    walker.consent()
    for suffix in ("consent/", "feelings-before/", "topic/", "chat/", "your-view/", "thank-you/", "turn/1/"):
        response = walker.get(walker.url(suffix))
        assert response.status_code == 302 and response.url.endswith("/about-you/"), suffix
    assert walker.consent().status_code == 302  # a repeated consent is harmless
    assert Consent.objects.count() == 1


def test_opening_a_post_only_address_goes_to_the_current_step_not_a_blank_page(walker, study):
    walker.to_chat()
    walker.send("Are you there?", 1)  # a reply is outstanding: the participant is on the chat page
    for suffix in ("chat/send/", "chat/reply/1/", "chat/finish/"):
        response = walker.get(walker.url(suffix))
        assert response.status_code == 302 and response.url == walker.url("chat/"), suffix
    walker.reply(1)
    opened = walker.get(walker.url("chat/reply/1/"))  # e.g. the address of the paused page, reopened later
    assert opened.status_code == 302 and opened.url == walker.url("turn/1/")
    assert walker.client.get("/s/not-a-token/chat/send/").status_code == 404
    flow.do_withdraw(walker.participant)
    assert "You have withdrawn" in walker.body(walker.get(walker.url("chat/send/")))


def test_double_submitted_topic_creates_one_conversation(walker):
    walker.consent()
    walker.profile()
    walker.pre_panas()
    walker.topic()
    walker.topic("Losing a pet")
    assert Conversation.objects.count() == 1
    assert Conversation.objects.get().topic.subtopic == "Exam pressure"
    assert PanasSurvey.objects.count() == 1


def test_double_submitted_survey_and_panas_do_not_duplicate(walker):
    walker.to_chat()
    for n in (1, 2, 3):
        walker.turn(n)
    walker.finish()
    walker.finish()
    conversation = Conversation.objects.get()
    assert conversation.panas_surveys.count() == 2
    assert conversation.four_branch_ratings.count() == 4


def test_unknown_tokens_and_other_ids_are_404(walker, client, study):
    other = Walker(Client(), flow.do_enrol(study))
    conversation = other.to_chat()
    answered_turn(conversation)
    guesses = [
        "/s/not-a-token/",
        "/s/not-a-token/consent/",
        "/s/not-a-token/chat/",
        "/s/not-a-token/turn/1/",
        "/s/not-a-token/withdraw/",
        f"/s/{other.participant.pseudonym}/",
        f"/s/{conversation.conversation_id}/",
        f"/s/{other.participant.token[:-1]}/",
    ]
    for url in guesses:
        assert client.get(url).status_code == 404, url
    assert client.post("/s/not-a-token/chat/reply/1/").status_code == 404
    # my own token never reaches someone else's turn: turn numbers are only looked up in my conversation
    walker.to_chat()
    assert client.post(walker.url("chat/reply/1/")).status_code == 404
    assert client.get("/join/no-such-study/").status_code == 404


def test_closed_enrolment_and_participants_without_a_study_are_404(client, study):
    Study.objects.filter(pk=study.pk).update(open_enrolment=False)
    assert client.get(f"/join/{study.slug}/").status_code == 404
    orphan = Participant.objects.create(study=None)
    assert client.get(f"/s/{orphan.token}/").status_code == 404


def start_value(html: str) -> str:
    return re.search(r'name="start" value="([^"]+)"', html).group(1)


def test_open_enrolment_makes_one_participant_per_start_page(client, study):
    page = client.get(f"/join/{study.slug}/")
    assert page.status_code == 200 and b"Start" in page.content
    start = start_value(page.content.decode())
    first = client.post(f"/join/{study.slug}/", {"start": start, "choice": "new"})
    second = client.post(f"/join/{study.slug}/", {"start": start, "choice": "new"})  # a double click
    assert first.url == second.url
    assert Participant.objects.count() == 1
    other = Client()
    other_start = start_value(other.get(f"/join/{study.slug}/").content.decode())
    assert other.post(f"/join/{study.slug}/", {"start": other_start}).url != first.url
    # a start page that was altered or has no token makes nobody
    assert client.post(f"/join/{study.slug}/", {"start": "forged"}).url.endswith("?expired=1")
    assert Participant.objects.count() == 2


def test_shared_device_asks_before_resuming_and_defaults_to_someone_new(client, study, monkeypatch):
    from collection import views

    page = client.get(f"/join/{study.slug}/")
    first = client.post(f"/join/{study.slug}/", {"start": start_value(page.content.decode())})
    again = client.get(f"/join/{study.slug}/")  # the next person opens the join link in the same browser
    html = again.content.decode()
    assert again.status_code == 200 and "Is this a new person?" in html
    assert "I&rsquo;m someone new" in html and "Continue as the previous participant" in html
    assert html.index("someone new") < html.index("Continue as the previous")  # new comes first
    # someone new: a new participant, and this browser now belongs to them
    new = client.post(f"/join/{study.slug}/", {"start": start_value(html), "choice": "new"})
    assert new.url != first.url and Participant.objects.count() == 2
    # continuing is possible on purpose, and lands on the remembered participant's current step
    resumed = client.post(f"/join/{study.slug}/", {"choice": "continue"})
    assert resumed.url == new.url
    # after the resume window without activity, only the start page is shown (new by default)
    monkeypatch.setattr(views, "JOIN_RESUME_WINDOW", timedelta(0))  # the window has passed
    html = client.get(f"/join/{study.slug}/").content.decode()
    assert "Is this a new person?" not in html and "Welcome to" in html
    assert client.post(f"/join/{study.slug}/", {"choice": "continue"}).url.endswith("?expired=1")
    assert Participant.objects.count() == 2


def personal_link_shown(html: str) -> str:
    """The study link in the page's "Your personal link" box ('' when there is none)."""
    found = re.search(r'<textarea id="personal-link"[^>]*>([^<]*)</textarea>', html)
    return found.group(1) if found else ""


def test_a_joined_participant_is_shown_their_own_personal_link_to_keep(client, study):
    page = client.get(f"/join/{study.slug}/")
    joined = client.post(f"/join/{study.slug}/", {"start": start_value(page.content.decode())})
    walker = Walker(client, Participant.objects.get())
    walker.token = joined.url.split("/")[2]
    link = f"http://testserver/s/{walker.token}/"
    consent = walker.body(walker.get(walker.url("consent/")))
    assert personal_link_shown(consent) == link
    assert "Your personal link" in consent and 'data-copy="personal-link"' in consent  # and a copy button
    walker.consent()
    assert personal_link_shown(walker.body(walker.get(walker.url("about-you/")))) == link
    # it is theirs only: the join page that the next person on this device sees never shows it
    again = client.get(f"/join/{study.slug}/").content.decode()
    assert "Is this a new person?" in again and walker.token not in again
    # nor do pages that are not about coming back later
    walker.profile()
    assert personal_link_shown(walker.body(walker.get(walker.url("feelings-before/")))) == ""


def test_the_come_back_later_page_shows_the_personal_link(walker):
    OriginalModel.objects.update(active=False)
    walker.consent()
    walker.profile()
    walker.pre_panas()
    page = walker.topic()
    assert page.status_code == 503 and "Please come back later" in walker.body(page)
    assert personal_link_shown(walker.body(page)) == f"http://testserver/s/{walker.token}/"


def test_forms_require_csrf(participant):
    strict = Client(enforce_csrf_checks=True)
    assert strict.post(f"/s/{participant.token}/consent/", {"agree": "on"}).status_code == 403
    assert strict.post(f"/s/{participant.token}/withdraw/", {"confirm": "yes"}).status_code == 403
    participant.refresh_from_db()
    assert participant.withdrawn_at is None


def test_withdrawal_asks_first_then_excludes_everything_from_export(walker, study, tmp_path):
    conversation = walker.to_chat()
    answered_turn(conversation)
    keeper = Walker(Client(), flow.do_enrol(study))
    keeper.to_chat()
    confirm = walker.get(walker.url("withdraw/"))
    assert "Withdraw from the study?" in walker.body(confirm)
    walker.participant.refresh_from_db()
    assert walker.participant.withdrawn_at is None
    assert walker.post(walker.url("withdraw/"), {"confirm": "no"}).url == walker.url()
    walker.post(walker.url("withdraw/"), {"confirm": "yes"})
    walker.participant.refresh_from_db()
    assert walker.participant.withdrawn_at is not None
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.WITHDRAWN
    assert list(exportable_conversations()) == [Conversation.objects.get(participant=keeper.participant)]
    for suffix in ("", "chat/", "turn/1/", "withdraw/"):
        assert "You have withdrawn" in walker.body(walker.get(walker.url(suffix)))
    assert walker.send("still here?", 2).status_code == 409
    out = tmp_path / "export"
    call_command("export", "--out", str(out), "--include-unfinished")  # even with unfinished ones included
    exported = [cf.load_conversation(p.read_bytes()).conversationId for p in out.glob("*.json")]
    assert conversation.conversation_id not in exported and len(exported) == 1


# ---------------------------------------------------------------------------
# Balancing rule
# ---------------------------------------------------------------------------


def test_balancing_picks_the_model_with_fewest_conversations_in_the_category(demo_defaults, study):
    listener, guide = demo_defaults.models
    third = OriginalModel.objects.create(name="offline-third", litellm_model="")
    exam = Topic.objects.get(subtopic="Exam pressure")
    pet = Topic.objects.get(subtopic="Losing a pet")

    def conversation(model: OriginalModel, topic: Topic, status: str = Conversation.Status.COMPLETE) -> None:
        Conversation.objects.create(
            conversation_id=f"conv-{Conversation.objects.count()}", original_model=model, topic=topic, status=status
        )

    conversation(listener, exam)
    conversation(guide, exam)
    conversation(third, pet)  # another category does not count
    conversation(third, pet)
    conversation(third, exam, Conversation.Status.WITHDRAWN)  # withdrawn does not count
    assert conversation_counts("Study") == {listener.pk: 1, guide.pk: 1, third.pk: 0}
    assert choose_original_model(exam) == third
    conversation(third, exam)
    conversation(third, exam)
    # listener and guide now tie on 1: ties are broken at random, so both get picked
    picks = {choose_original_model(exam).pk for _ in range(60)}
    assert picks == {listener.pk, guide.pk}
    OriginalModel.objects.filter(pk__in=[listener.pk]).update(active=False)
    assert choose_original_model(exam) == guide  # inactive models are not in the pool
    OriginalModel.objects.update(active=False)
    with pytest.raises(NoModelAvailable):
        choose_original_model(exam)


def test_an_empty_pool_gives_a_calm_page_and_keeps_the_answers(walker):
    OriginalModel.objects.update(active=False)
    walker.consent()
    walker.profile()
    walker.pre_panas()
    page = walker.topic()
    assert page.status_code == 503 and "Your answers so far are saved" in walker.body(page)
    walker.participant.refresh_from_db()
    assert len(walker.participant.pending_pre_panas) == 20


# ---------------------------------------------------------------------------
# Live model path (local fake provider) and the never-leak scan
# ---------------------------------------------------------------------------

SECRET_MODEL = "acme-frontier-9000"


def test_live_model_streams_through_litellm_and_never_leaks_its_name(walker, settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name=SECRET_MODEL, provider="acme", litellm_model=f"openai/{SECRET_MODEL}", api_base=fake_openai_server.api_base
    )
    walker.to_chat()
    walker.send("I can't stop worrying about the test results.", 1)
    fake_openai_server.fail_next = 1
    failed = walker.reply(1)
    assert failed[-1]["type"] == "error"
    events = walker.reply(1)
    assert "".join(e["text"] for e in events if e["type"] == "delta") == fake_openai_server.reply
    sent = fake_openai_server.requests[-1]
    assert sent["model"] == SECRET_MODEL and sent["stream"] is True
    assert sent["messages"][0]["role"] == "system" and sent["messages"][-1]["content"].startswith("I can't stop")
    walker.annotate(1)
    assert AlternateResponses.objects.get().llm_improved == fake_openai_server.rewrite  # live rewrite too
    assert leaks(walker.responses, [SECRET_MODEL, "acme"]) == []


def test_live_rewrite_failure_falls_back_to_the_offline_rewrite(walker, settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name=SECRET_MODEL, litellm_model=f"openai/{SECRET_MODEL}", api_base=fake_openai_server.api_base
    )
    conversation = walker.to_chat()
    walker.send("Everything hurts today and I am tired.", 1)
    walker.reply(1)
    turn = conversation.turns.get()
    fake_openai_server.fail_next = 1
    alternates = tf.ensure_alternates(turn)
    assert alternates.llm_improved.startswith('When you say "Everything hurts today and I am tired"')


def test_live_models_stay_off_unless_allowed(walker, fake_openai_server):
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name=SECRET_MODEL, litellm_model=f"openai/{SECRET_MODEL}", api_base=fake_openai_server.api_base
    )
    walker.to_chat()
    walker.send("hello, I feel nervous", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    assert fake_openai_server.requests == []  # the offline model answered


def leaks(responses: list[Any], secrets: list[str]) -> list[str]:
    found = []
    for response in responses:
        body = getattr(response, "streamed_body", b"") if getattr(response, "streaming", False) else response.content
        text = body.decode("utf-8", "replace") + "\n" + "\n".join(f"{k}: {v}" for k, v in response.items())
        found += [f"{s!r} in {response.request['PATH_INFO']}" for s in names_found(text, secrets)]
    return found


def test_no_participant_response_ever_contains_a_real_model_name(walker, settings):
    conversation = walker.to_chat()
    # include error paths: a failed reply, a refused message and invalid forms
    settings.ATTUNE_OFFLINE_MODEL_FAILS = True
    walker.send("I feel upset about my exam.", 1)
    walker.reply(1)
    settings.ATTUNE_OFFLINE_MODEL_FAILS = False
    walker.reply(1)
    walker.post(walker.url("turn/1/"), {"step": "answers"})
    walker.annotate(1, moods={"mood_Upset": "on", "intensity_Upset": "6"}, questions=("general", "PW2"))
    walker.send("", 2)
    for n in (2, 3):
        walker.turn(n)
    walker.get(walker.url("turn/3/review/"))
    walker.post(walker.url("turn/3/review/"), {})
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    walker.post(walker.url("feelings-after/"), {})
    walker.finish()
    walker.get(walker.current())
    walker.get(walker.url("withdraw/"))
    secrets = [m.name for m in OriginalModel.objects.exclude(name="")] + [m.alias for m in OriginalModel.objects.all()]
    assert conversation.original_model.name in secrets and len(walker.responses) > 35  # three pages a turn
    assert leaks(walker.responses, [*secrets, "offline-scripted", "litellm"]) == []


# ---------------------------------------------------------------------------
# Setup, invitations, offline model
# ---------------------------------------------------------------------------


def test_ensure_defaults_is_idempotent(db):
    first = ensure_defaults()
    second = ensure_defaults()
    assert first.study == second.study and first.study.open_enrolment
    assert [m.pk for m in first.models] == [m.pk for m in second.models]
    assert all(m.is_offline and m.active for m in second.models)
    assert Topic.objects.filter(in_catalogue=True).count() == 50
    assert second.topics_created == 0


def test_topics_exist_after_migrations_alone(db):
    assert Topic.objects.count() == 50
    assert list(Topic.objects.values_list("category", "subtopic")[:2]) == list(cat.ALL_TOPICS[:2])


def test_invite_command_prints_working_links(study, client, capsys):
    call_command("invite", "--study", study.slug, "--count", "3", "--base-url", "https://attune.example.org/")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    for line in lines:
        pseudonym, link = line.split("\t")
        assert link.startswith("https://attune.example.org/s/")
        assert Participant.objects.get(pseudonym=pseudonym).study == study
        assert client.get(link.removeprefix("https://attune.example.org")).status_code == 302


def test_invite_command_rejects_unknown_study(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("invite", "--study", "nope", "--count", "1")


def test_offline_model_replies_are_varied_and_topic_aware():
    def reply(key: str, n: int, text: str, category: str = "Money") -> str:
        return offline_reply(
            ReplyRequest(key, "", "", [{"role": "user", "content": text}], category, "Debt worries", n)
        )

    texts = [reply("om-1", n, f"Message {n} about my debts, I feel anxious") for n in (1, 2, 3, 4)]
    assert len(set(texts)) == 4
    assert "anxious" in texts[0]
    assert any(line in reply("om-1", 1, "It's hard") for line in _TOPIC_LINES["Money"])
    assert reply("om-1", 1, "same") == reply("om-1", 1, "same")
    assert len({reply(k, 2, "Work is a lot, I'm stressed") for k in ("om-a", "om-b", "om-c", "om-d")}) > 1


def test_a_reply_request_after_withdrawal_sends_the_script_to_the_withdrawn_page(walker):
    conversation = walker.to_chat()
    walker.send("one last thing", 1)
    flow.do_withdraw(walker.participant)
    events = walker.reply(1)
    assert events == [{"type": "redirect", "next": walker.url()}]
    assert Turn.objects.get(conversation=conversation).llm_response == ""
    assert "You have withdrawn" in walker.body(walker.post(walker.url("chat/reply/1/")))


def test_offline_model_never_repeats_its_general_line_on_consecutive_turns():
    from collection.chat_model import _GENERAL_LINES, ReplyRequest, offline_reply

    for subtopic in ("Exam pressure", "A recent break-up", "Debt worries"):
        replies = [
            offline_reply(
                ReplyRequest(
                    model_key="m",
                    litellm_model="",
                    api_base="",
                    category="Study",
                    subtopic=subtopic,
                    turn_number=n,
                    messages=[{"role": "user", "content": f"Message number {n} about it."}],
                )
            )
            for n in range(2, 8)
        ]
        used = [next(line for line in _GENERAL_LINES if line in reply) for reply in replies]
        assert all(a != b for a, b in itertools.pairwise(used))


def test_answers_saved_twice_by_two_requests_that_both_passed_the_step_check_leaves_one_set(walker):
    """A double submit can get past the step check twice (both requests read "answers" first); the second save
    replaces the first's tags instead of failing on the unique (turn, position) and (turn, question) rows."""
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    asked = tf.asked_question_ids(turn)
    answers = dict.fromkeys(asked, ("yes", "no"))
    tf.do_save_answers(turn, [("Upset", 3), ("Nervous", None)], answers, asked)
    tf.do_save_answers(turn, [("Upset", 3), ("Nervous", None)], answers, asked)
    rows = list(MoodTag.objects.filter(turn=turn).order_by("position").values_list("position", "emotion", "intensity"))
    assert rows == [(0, "Upset", 3), (1, "Nervous", None)]
    assert sorted(BinaryJudgement.objects.filter(turn=turn).values_list("question_id", flat=True)) == sorted(asked)
    assert BinaryJudgement.objects.filter(turn=turn).count() == len(asked) == 36


def test_answers_saved_again_are_updated_in_place_and_answers_to_unasked_questions_are_dropped(walker):
    """The answers are written in one upsert: a second save with other values updates the rows (same
    positions), a question asked but left unanswered keeps its earlier answer, and an answer to a question
    the turn did not ask is not stored."""
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    asked = tf.asked_question_ids(turn)[:5]  # as if the study showed five questions this turn
    tf.do_save_answers(turn, [], dict.fromkeys(asked, ("yes", "no")), asked)
    before = dict(BinaryJudgement.objects.filter(turn=turn).values_list("question_id", "position"))
    unasked = next(q for q in cat.BINARY_QUESTION_IDS if q not in asked)
    second = {**dict.fromkeys(asked[:3], ("no", "na")), unasked: ("yes", "yes")}  # asked[3:] left unanswered
    tf.do_save_answers(turn, [], second, asked)
    rows = {
        q: (o, p)
        for q, o, p in BinaryJudgement.objects.filter(turn=turn).values_list("question_id", "observed", "preferred")
    }
    assert set(rows) == set(asked)  # nothing for the unasked question
    assert all(rows[q] == ("no", "na") for q in asked[:3])  # updated in place
    assert all(rows[q] == ("yes", "no") for q in asked[3:])  # not blanked by the later save
    assert dict(BinaryJudgement.objects.filter(turn=turn).values_list("question_id", "position")) == before


# ---------------------------------------------------------------------------
# The suggested rewrite is prepared off the request path
# ---------------------------------------------------------------------------


def test_storing_a_reply_prepares_its_rewrite_before_the_participant_asks(walker, django_capture_on_commit_callbacks):
    conversation = walker.to_chat()
    walker.send("I feel lost since the move.", 1)
    with django_capture_on_commit_callbacks(execute=True):
        walker.reply(1)
    turn = conversation.turns.get()
    improved = AlternateResponses.objects.get(turn=turn).llm_improved
    assert improved and "I feel lost since the move" in improved  # ready before any annotation page was saved


def test_the_rewrite_page_waits_calmly_until_the_rewrite_is_ready(walker, monkeypatch):
    from annotation import tasks, turn_flow

    queued: list[int] = []

    def held_by_the_broker(args: tuple, **options: object) -> None:  # a broker whose worker has not run it yet
        queued.extend(args)

    monkeypatch.setattr(tasks.prepare_rewrite, "apply_async", held_by_the_broker)
    conversation = walker.to_chat()
    turn = answered_turn(conversation, "I keep crying at work and I feel ashamed.")
    url = walker.url("turn/1/")
    save_answers(walker, url, value="na")
    assert queued == [turn.pk]  # the answers leading to the rewrite queue it again, not make it in the request
    assert not AlternateResponses.objects.filter(turn=turn).exclude(llm_improved="").exists()
    waiting = walker.body(walker.get(url))
    assert "still being prepared" in waiting and 'hx-trigger="every 2s"' in waiting
    assert 'name="human_edited"' not in waiting
    assert walker.get(url, HTTP_HX_REQUEST="true").status_code == 204  # polled: not yet

    assert turn_flow.prepare_rewrite(turn.pk) is True
    polled = walker.get(url, HTTP_HX_REQUEST="true")
    assert polled.status_code == 200 and polled["HX-Redirect"] == url
    ready = walker.body(walker.get(url))
    assert 'name="human_edited"' in ready and "still being prepared" not in ready

    improved = AlternateResponses.objects.get(turn=turn).llm_improved
    assert turn_flow.prepare_rewrite(turn.pk) is False  # idempotent: a redelivered task keeps the first rewrite
    assert AlternateResponses.objects.get(turn=turn).llm_improved == improved
    assert AlternateResponses.objects.filter(turn=turn).count() == 1


def test_preparing_a_rewrite_for_a_turn_without_a_reply_does_nothing(walker):
    from annotation import turn_flow

    conversation = walker.to_chat()
    turn, _ = flow.do_add_message(conversation, 1, "Hello")
    assert turn_flow.prepare_rewrite(turn.pk) is False
    assert turn_flow.prepare_rewrite(10**9) is False
    assert not AlternateResponses.objects.filter(turn=turn).exists()


def test_the_waiting_page_continue_button_prepares_the_rewrite_in_the_request(walker, monkeypatch):
    from annotation import tasks

    monkeypatch.setattr(tasks.prepare_rewrite, "delay", lambda pk: None)  # the queue lost it
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    save_answers(walker, url, value="na")
    assert walker.post(url, {"step": "rewrite"}).status_code == 302
    assert AlternateResponses.objects.get(turn=turn).llm_improved


def test_the_chat_page_counts_the_replies_towards_the_minimum(walker, study):
    walker.to_chat()
    page = walker.body(walker.get(walker.url("chat/")))
    assert f"Reply 1 &mdash; you can finish after {study.min_turns}." in page
    walker.turn(1)
    page = walker.body(walker.get(walker.url("chat/")))
    assert f"Reply 2 &mdash; you can finish after {study.min_turns}." in page
    for number in range(2, study.min_turns + 1):
        walker.turn(number)
    page = walker.body(walker.get(walker.url("chat/")))
    assert f"{study.min_turns} replies so far &mdash; you can finish whenever you are ready." in page
