"""Showing a page writes nothing and calls no model: every write is a POST (post/redirect/get)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.core import signing
from django.core.management import call_command
from django.utils import timezone

from annotation import turn_flow as tf
from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
from collection.models import OriginalModel, Turn
from scoring.models import EvaluatedModel
from tests.web.test_participant_flow import SECRET_MODEL, Walker, answered_turn


def snapshot(turn: Turn) -> tuple:
    """Row counts of everything an annotation page could write, and the turn's own stamps."""
    fresh = Turn.objects.get(pk=turn.pk)
    return (
        Turn.objects.count(),
        MoodTag.objects.count(),
        BinaryJudgement.objects.count(),
        AlternateResponses.objects.count(),
        PairwiseComparison.objects.count(),
        fresh.annotation_started_at,
        fresh.annotation_completed_at,
        list(AlternateResponses.objects.values_list("llm_improved", flat=True)),
    )


@pytest.fixture
def walker(client, participant) -> Walker:
    return Walker(client, participant)


def save_answers(walker: Walker, url: str) -> None:
    """Save the answers page (mood "no change" and every behaviour question) as a browser would."""
    html = walker.body(walker.get(url))
    ids = sorted(set(re.findall(r'name="observed_(B\d+)"', html)))
    shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
    data = {"step": "answers", "shown": shown, "no_change": "on"}
    data.update({**{f"observed_{q}": "yes" for q in ids}, **{f"preferred_{q}": "no" for q in ids}})
    assert walker.post(url, data).status_code == 302


def test_the_first_annotation_page_writes_nothing_and_the_answer_records_when_it_was_shown(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    before = snapshot(turn)
    first = walker.get(url)
    walker.get(url)  # a refresh too
    assert first.status_code == 200 and snapshot(turn) == before
    assert Turn.objects.get(pk=turn.pk).annotation_started_at is None
    shown = re.search(r'name="shown" value="([^"]+)"', walker.body(first)).group(1)
    ids = sorted(set(re.findall(r'name="observed_(B\d+)"', walker.body(first))))
    answers = {**{f"observed_{q}": "yes" for q in ids}, **{f"preferred_{q}": "no" for q in ids}}
    walker.post(url, {"step": "answers", "shown": shown, "no_change": "on", **answers})
    page_time = datetime.fromtimestamp(signing.loads(shown, salt=tf._SHOWN_SALT)["at"], tz=UTC)
    started = Turn.objects.get(pk=turn.pk).annotation_started_at
    assert abs(started - page_time) < timedelta(milliseconds=1)  # the page's time, carried by the answer


def signed_note(turn_pk: int, at: datetime, salt: str = tf._SHOWN_SALT) -> str:
    return signing.dumps({"turn": turn_pk, "at": at.timestamp()}, salt=salt, compress=True)


def test_a_shown_time_is_kept_only_when_signed_for_this_turn(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    other_turn = Turn.objects.create(conversation=conversation, turn_number=99, user_message="x")
    third_turn = Turn.objects.create(conversation=conversation, turn_number=98, user_message="y")
    hour_ago = timezone.now() - timedelta(hours=1)
    tf.do_start_annotation(turn, signed_note(turn.pk, hour_ago))
    assert abs(Turn.objects.get(pk=turn.pk).annotation_started_at - hour_ago) < timedelta(milliseconds=1)
    tf.do_start_annotation(other_turn, signed_note(turn.pk, hour_ago))  # signed, but for another turn
    tf.do_start_annotation(third_turn, signed_note(third_turn.pk, hour_ago, salt="forged"))
    for stamped in Turn.objects.filter(pk__in=[other_turn.pk, third_turn.pk]):
        assert stamped.annotation_started_at > hour_ago + timedelta(minutes=30)  # the answer's own time
    tf.do_start_annotation(turn, "")  # a later answer keeps the first record
    assert abs(Turn.objects.get(pk=turn.pk).annotation_started_at - hour_ago) < timedelta(milliseconds=1)


def test_the_rewrite_is_made_by_the_saved_answers_and_the_page_only_reads(walker, settings, fake_openai_server):
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    OriginalModel.objects.update(active=False)
    OriginalModel.objects.create(
        name=SECRET_MODEL, litellm_model=f"openai/{SECRET_MODEL}", api_base=fake_openai_server.api_base
    )
    conversation = walker.to_chat()
    walker.send("Everything is too much this week.", 1)
    assert walker.reply(1)[-1]["type"] == "done"
    turn = conversation.turns.get()
    url = walker.url("turn/1/")
    calls_before_rewrite = len(fake_openai_server.requests)
    save_answers(walker, url)  # the answers page's POST prepares the live rewrite: one call
    assert len(fake_openai_server.requests) == calls_before_rewrite + 1
    assert AlternateResponses.objects.get(turn=turn).llm_improved == fake_openai_server.rewrite
    before = snapshot(turn)
    for _ in range(2):
        page = walker.get(url)
        assert page.status_code == 200 and "A suggested rewrite" in walker.body(page)
    assert snapshot(turn) == before
    assert len(fake_openai_server.requests) == calls_before_rewrite + 1  # no model call on GET


def test_a_rewrite_not_yet_made_is_made_by_a_continue_button_not_by_the_page(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    save_answers(walker, url)
    AlternateResponses.objects.filter(turn=turn).delete()  # as an interrupted request or older version left it
    before = snapshot(turn)
    page = walker.get(url)
    assert page.status_code == 200 and "Continue" in walker.body(page)
    assert snapshot(turn) == before and not AlternateResponses.objects.filter(turn=turn).exists()
    assert walker.post(url, {"step": "rewrite"}).status_code == 302
    assert AlternateResponses.objects.get(turn=turn).llm_improved.startswith("When you say")
    assert "A suggested rewrite" in walker.body(walker.get(url))


def test_an_unstamped_finished_annotation_is_completed_by_a_post_not_by_the_page(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    save_answers(walker, url)
    walker.post(url, {"step": "rewrite", "human_edited": "My ideal reply", "questions": ["general"]})
    PairwiseComparison.objects.filter(turn=turn).update(winner="A")  # answered, completion not stamped
    before = snapshot(turn)
    page = walker.get(url)
    assert page.status_code == 200 and "Continue" in walker.body(page)
    assert snapshot(turn) == before and before[6] is None
    done = walker.post(url, {"step": "finished"})
    assert done.status_code == 302 and done.url == walker.url("chat/")  # straight on to the next step
    assert Turn.objects.get(pk=turn.pk).annotation_completed_at is not None
    assert walker.current().endswith("/chat/")


@pytest.mark.django_db
def test_the_run_launcher_page_writes_nothing_and_migrate_repairs_the_baselines(client, researcher):
    EvaluatedModel.objects.filter(name="baseline:lexicon").delete()
    before = EvaluatedModel.objects.count()
    client.force_login(researcher)
    assert client.get("/research/runs/").status_code == 200
    assert EvaluatedModel.objects.count() == before
    call_command("migrate", verbosity=0)
    assert EvaluatedModel.objects.filter(name="baseline:lexicon", kind=EvaluatedModel.Kind.OFFLINE).exists()


def test_a_reply_written_before_the_rewrite_was_made_is_still_saved(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    save_answers(walker, url)
    AlternateResponses.objects.filter(turn=turn).delete()
    assert (
        walker.post(
            url, {"step": "rewrite", "human_edited": "What I wanted to hear", "questions": ["general"]}
        ).status_code
        == 302
    )
    alternates = AlternateResponses.objects.get(turn=turn)
    assert alternates.human_edited == "What I wanted to hear" and alternates.llm_improved


def test_an_answers_form_shown_again_with_errors_keeps_its_first_time(walker):
    conversation = walker.to_chat()
    answered_turn(conversation)
    url = walker.url("turn/1/")
    shown = re.search(r'name="shown" value="([^"]+)"', walker.body(walker.get(url))).group(1)
    refused = walker.post(url, {"step": "answers", "shown": shown})  # nothing ticked: shown again with an error
    assert refused.status_code == 302 and refused.url == url  # post/redirect/get
    again = walker.get(url)
    assert "Please tick at least one feeling" in walker.body(again)
    assert re.search(r'name="shown" value="([^"]+)"', walker.body(again)).group(1) == shown
