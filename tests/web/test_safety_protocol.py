"""The distress protocol through the participant pages and the research side, independent of the model.

The study's model is the offline scripted one, which says nothing about safety: whatever the participant
sees here comes from Attune's own screen. The safety contact's email goes to a real local SMTP server.
"""

from __future__ import annotations

import json
import socket

import pytest
from django.core.cache import cache
from django.test import Client

from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Participant, SafetyEvent
from collection.study_flow import do_withdraw
from tests.web.test_participant_flow import Walker

pytestmark = [pytest.mark.django_db]

URGENT = (
    "Honestly I think everyone would be better off without me. I have pills saved up and I might take them tonight."
)
CONCERN = "I feel so hopeless lately, like nothing is ever going to get better."
BENIGN = "This exam is killing me, but I think I'll pass if I keep revising."


@pytest.fixture(autouse=True)
def _quick_and_clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()


@pytest.fixture
def walker(client, participant) -> Walker:
    walker = Walker(client, participant)
    walker.to_chat()
    return walker


def send(walker: Walker, text: str, number: int = 1) -> dict:
    response = walker.send(text, number)
    assert response.status_code == 200
    return response.json()


def test_an_urgent_message_shows_the_panel_under_it_before_any_question(walker):
    sent = send(walker, URGENT)
    panel = sent["safety_html"]
    assert "Before we go on" in panel and "Samaritans" in panel  # the study's resources
    for choice in ("pause", "stop", "continue"):
        assert f'value="{choice}"' in panel
    event = SafetyEvent.objects.get()
    assert (event.level, event.source, event.shown) == ("urgent", "message", "panel")
    assert {"means", "timeframe"} <= set(event.signals)
    assert URGENT not in json.dumps(event.signals)  # the log keeps rule ids, not words
    assert walker.reply(1)[-1]["type"] == "done"
    # the questions about this reply wait for a choice: the study link shows the chat with the panel
    assert walker.current().endswith("/chat/")
    page = walker.body(walker.get(walker.url("chat/")))
    assert page.index("pills saved up") < page.index("Before we go on") and 'name="message"' not in page
    response = walker.post(walker.url(f"support/{event.pk}/"), {"choice": "continue"})
    assert response.status_code == 302
    assert "/turn/1/" in walker.current()
    event.refresh_from_db()
    assert event.choice == "continue" and event.chosen_at is not None


def test_stopping_gives_the_wellbeing_code_and_keeps_the_data(walker, study):
    study.wellbeing_completion_code = "WELL-123"
    study.save(update_fields=["wellbeing_completion_code"])
    send(walker, URGENT)
    walker.reply(1)
    event = SafetyEvent.objects.get()
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "stop"})
    assert walker.current().endswith("/stopped/")
    page = walker.body(walker.get(walker.url("stopped/")))
    assert "WELL-123" in page and "does not cost you your payment" in page
    participant = Participant.objects.get(pk=walker.participant.pk)
    assert participant.stopped_at is not None and participant.withdrawn_at is None
    assert flow.locate(participant).step == flow.STOPPED
    # a second click (another tab) records nothing more
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "continue"})
    event.refresh_from_db()
    assert event.choice == "stop"


def test_pausing_says_how_to_come_back_and_changes_nothing(walker):
    send(walker, URGENT)
    walker.reply(1)
    event = SafetyEvent.objects.get()
    response = walker.post(walker.url(f"support/{event.pk}/"), {"choice": "pause"})
    page = walker.body(walker.get(response.url))
    assert "Take all the time you need" in page and walker.participant.token in page  # their personal link
    assert Participant.objects.get(pk=walker.participant.pk).stopped_at is None
    assert "/turn/1/" in walker.current()  # back later: the questions about that reply, at their own pace


def test_a_concern_shows_the_resources_once_without_interrupting(walker):
    sent = send(walker, CONCERN)
    assert "free and confidential" in sent["safety_html"] and "Before we go on" not in sent["safety_html"]
    walker.reply(1)
    assert "/turn/1/" in walker.current()  # nothing waits for a choice
    walker.annotate(1)
    second = send(walker, CONCERN + " Still.", 2)
    assert second["safety_html"]  # a second event is logged and shown live
    walker.reply(2)
    walker.annotate(2)
    page = walker.body(walker.get(walker.url("chat/")))
    assert page.count("free and confidential") == 1  # the chat page shows the resources once
    assert SafetyEvent.objects.filter(level="concern").count() == 2


def test_a_benign_message_and_an_idiom_log_nothing(walker):
    assert send(walker, BENIGN)["safety_html"] == ""
    assert not SafetyEvent.objects.exists()


def test_the_research_team_sees_the_flag_the_log_and_the_csv(walker, study, researcher):
    send(walker, URGENT)
    research = Client()
    research.force_login(researcher)
    monitoring = research.get(f"/research/studies/{study.slug}/").content.decode()
    assert 'data-figure="safety">1 urgent' in monitoring
    quality = research.get(f"/research/quality/{study.slug}/").content.decode()
    assert "data-safety-flag>urgent" in quality
    log = research.get(f"/research/studies/{study.slug}/safety/").content.decode()
    assert "means" in log and "pills" not in log
    csv_text = research.get(f"/research/studies/{study.slug}/safety/?format=csv").content.decode()
    assert csv_text.splitlines()[0].startswith("at,level,source,signals") and ",urgent,message," in csv_text
    api = research.get(f"/api/studies/{study.slug}/safety-events/").json()
    assert [row["level"] for row in api] == ["urgent"] and api[0]["choice"] == ""
    assert research.get(f"/api/studies/{study.slug}/monitoring/").json()["safety"] == {
        "urgent": 1,
        "concern": 0,
        "participants": 1,
    }
    # a flagged conversation is never excluded for it, and a withdrawn participant leaves the log
    do_withdraw(walker.participant)
    assert research.get(f"/api/studies/{study.slug}/safety-events/").json() == []


def test_the_safety_contact_is_emailed_through_a_real_smtp_server(
    walker, study, settings, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    from aiosmtpd.controller import Controller

    received: list = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append(envelope)
            return "250 OK"

    with socket.socket() as probe:  # a free local port for the SMTP server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
        study.safety_contact_email = "safety@example.org"
        study.save(update_fields=["safety_contact_email"])
        with capture(execute=True):  # as after each request's commit
            send(walker, CONCERN)  # concern does not notify unless the study asks
        walker.reply(1)
        walker.annotate(1)
        with capture(execute=True):
            send(walker, URGENT, 2)
    finally:
        controller.stop()
    assert len(received) == 1
    message = received[0].content.decode()
    assert received[0].rcpt_tos == ["safety@example.org"]
    assert "urgent safety signal" in message and study.slug in message
    assert "pills" not in message and "hopeless" not in message  # no words the participant wrote
    event = SafetyEvent.objects.get(level="urgent")
    assert event.notified_at is not None and event.notify_error == ""


def test_an_unreachable_mail_server_is_recorded_on_the_event_not_swallowed(
    walker, study, settings, caplog, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    study.safety_contact_email = "safety@example.org"
    study.save(update_fields=["safety_contact_email"])
    with django_capture_on_commit_callbacks(execute=True):
        assert send(walker, URGENT)["safety_html"]  # the participant is never held up by the mail server
    event = SafetyEvent.objects.get()
    assert event.notified_at is None and "ConnectionRefusedError" in event.notify_error
    assert "could not email the safety contact" in caplog.text


def test_the_screen_command_prints_one_json_line_per_message(tmp_path):
    import io

    from django.core.management import CommandError, call_command

    messages = tmp_path / "messages.txt"
    messages.write_text(f"{URGENT}\n{CONCERN}\n{BENIGN}\n", encoding="utf-8")
    out = io.StringIO()
    call_command("safety", "screen", str(messages), stdout=out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["level"] for r in records] == ["urgent", "concern", "none"]
    assert records[0]["detections"] and records[2]["detections"] == []
    with pytest.raises(CommandError, match="no such file"):
        call_command("safety", "screen", str(tmp_path / "missing.txt"))


def test_the_participants_own_annotations_are_signals_too(walker):
    """A feeling tagged Distressed at 7 on a calm message: a concern, logged once, resources on the chat page."""
    send(walker, "We talked about the holidays and who hosts this year.")
    walker.reply(1)
    walker.annotate(1, moods={"mood_Distressed": "on", "intensity_Distressed": "7"})
    event = SafetyEvent.objects.get()
    assert (event.level, event.source, event.signals) == ("concern", "annotation", ["high_distress_tag"])
    page = walker.body(walker.get(walker.url("chat/")))
    assert page.count("free and confidential") == 1


def test_the_closing_surveys_own_words_are_screened_too(walker, study):
    from tests.web.test_participant_flow import survey_answers

    for number in range(1, study.min_turns + 1):
        walker.turn(number)
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    walker.post(walker.url("feelings-after/"), dict.fromkeys(cat.PANAS_ITEMS, "4"))
    walker.post(walker.url("your-view/"), survey_answers(comment="I have decided to end my life tonight."))
    event = SafetyEvent.objects.get()
    assert (event.level, event.source, event.shown, event.turn) == ("urgent", "free_text", "resources", None)
    page = walker.body(walker.get(walker.url("thank-you/")))
    assert "free and confidential" in page
    assert Participant.objects.get(pk=walker.participant.pk).safety_hold is False  # no panel after the study


def test_a_choice_is_taken_only_on_a_panel_that_was_shown(walker):
    """A concern showed resources, not a panel: a crafted 'stop' on it changes nothing."""
    send(walker, CONCERN)
    event = SafetyEvent.objects.get()
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "stop"})
    event.refresh_from_db()
    participant = Participant.objects.get(pk=walker.participant.pk)
    assert event.choice == "" and participant.stopped_at is None and participant.safety_hold is False


def test_the_questions_about_a_flagged_reply_can_be_skipped_without_penalty(walker, study):
    """'Continue without the questions about this reply': straight back to the chat, the turn recorded as
    skipped for wellbeing, the choice in the safety log, and nothing about it in quality control."""
    from annotation.quality import participant_quality
    from collection.models import AttentionCheck, Turn

    sent = send(walker, URGENT)
    assert 'value="skip"' in sent["safety_html"]
    walker.reply(1)
    event = SafetyEvent.objects.get()
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "skip"})
    assert walker.current().endswith("/chat/")  # no questions about that reply
    event.refresh_from_db()
    assert event.choice == "skip" and event.chosen_at is not None
    skipped = Turn.objects.get(turn_number=1)
    assert skipped.skipped_for_wellbeing and skipped.annotation_completed_at is None
    assert not skipped.binary_judgements.exists() and not AttentionCheck.objects.filter(turn=skipped).exists()
    page = walker.body(walker.get(walker.url("chat/")))
    assert "You chose to go on without the questions about this reply" in page and 'name="message"' in page
    # the study goes on as usual, and the skipped turn still counts towards the minimum to finish
    for number in range(2, study.min_turns + 1):
        walker.turn(number)
    # every message "short" for this check: the flag counts the answered turns only, never the skipped one
    study.quality_min_message_chars = 1000
    study.save(update_fields=["quality_min_message_chars"])
    flags = participant_quality(Participant.objects.get(pk=walker.participant.pk), study).flags
    assert flags and all(entry.get("turn") != 1 for flag in flags for entry in flag.evidence)
    short = next(flag for flag in flags if flag.kind == "short_messages")
    assert short.summary.startswith(f"{study.min_turns - 1} of {study.min_turns - 1} messages")
    response = walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    assert response.status_code == 302 and "feelings-after" in walker.current()


def test_skipping_is_refused_once_the_questions_are_answered(walker):
    """A skip chosen after the answers were saved (a second tab) is logged, but changes nothing about the turn."""
    from collection.models import Turn

    send(walker, URGENT)
    walker.reply(1)
    event = SafetyEvent.objects.get()
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "continue"})
    walker.annotate(1)
    walker.post(walker.url(f"support/{event.pk}/"), {"choice": "skip"})
    event.refresh_from_db()
    assert event.choice == "continue"  # the first choice stands
    assert not Turn.objects.get(turn_number=1).skipped_for_wellbeing
