"""One unanswered turn at a time, and ``max_turns`` over every turn sent.

The finding: a participant could send turn after turn without waiting (20 turns
against a limit of 12, 20 model calls in parallel, 19 turns never annotated but
the chat still completable). Now a message is taken only when the previous
reply exists and is annotated, the maximum counts every turn sent, and a chat
with a reply outstanding cannot be finished. The refusals are calm and keep the
participant's words; simultaneous posts are serialised by a row lock.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client

from collection import study_flow as flow
from collection.models import Conversation, Participant, Study, Turn
from tests.web.test_participant_flow import Walker


@pytest.fixture(autouse=True)
def _quick_and_clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    settings.ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE = 1000
    cache.clear()


@pytest.fixture
def walker(client, participant) -> Walker:
    return Walker(client, participant)


def test_no_second_message_while_the_reply_is_still_to_come(walker):
    walker.to_chat()
    assert walker.send("First: I feel tense.", 1).status_code == 200  # the reply is not fetched yet
    refused = walker.send("Second, before any reply", 2)
    assert refused.status_code == 409
    assert refused.json()["error"].startswith("The model has not finished replying to your last message yet.")
    assert "your new message is kept here" in refused.json()["error"]
    # without JavaScript the refusal redirects (post/redirect/get) to the chat page, which comes back with
    # the words still in the box and the reply button
    refused_form = walker.send("Second, before any reply", 2, as_json=False)
    assert refused_form.status_code == 302
    page = walker.client.get(refused_form.url)
    html = walker.body(page)
    assert page.status_code == 200
    assert "has not finished replying" in html and "Second, before any reply</textarea>" in html
    assert "Get the reply" in html
    assert list(Turn.objects.values_list("turn_number", flat=True)) == [1]


def test_no_second_message_after_a_failed_reply_until_the_retry_succeeds(walker, settings):
    walker.to_chat()
    settings.ATTUNE_OFFLINE_MODEL_FAILS = True
    walker.send("My week was awful.", 1)
    assert walker.reply(1)[-1]["type"] == "error"
    assert walker.send("Hello? Anyone?", 2).status_code == 409
    assert Turn.objects.count() == 1
    settings.ATTUNE_OFFLINE_MODEL_FAILS = False
    assert walker.reply(1)[-1]["type"] == "done"
    walker.annotate(1)
    assert walker.send("Hello? Anyone?", 2).status_code == 200
    assert Turn.objects.count() == 2


def test_the_action_itself_refuses_while_the_reply_is_unannotated(walker):
    conversation = walker.to_chat()
    walker.send("first", 1)
    walker.reply(1)
    with pytest.raises(flow.AnnotationOutstanding):
        flow.do_add_message(conversation, 2, "second")
    walker.annotate(1)
    turn, created = flow.do_add_message(conversation, 2, "second")
    assert created and turn.turn_number == 2


def test_max_turns_counts_turns_without_a_reply(walker, study):
    Study.objects.filter(pk=study.pk).update(min_turns=1, max_turns=1)
    conversation = walker.to_chat()
    walker.send("only one", 1)  # no reply yet
    assert flow.turns_sent(conversation) == 1 and flow.turn_count(conversation) == 0
    assert flow.chat_is_full(conversation)
    walker.reply(1)
    walker.annotate(1)
    refused = walker.send("one more", 2)
    assert refused.status_code == 400 and refused.json()["error"].startswith("This chat has reached its length limit")
    assert Turn.objects.count() == 1


def test_a_chat_with_a_reply_outstanding_cannot_be_finished(walker, study):
    Study.objects.filter(pk=study.pk).update(min_turns=1)
    conversation = walker.to_chat()
    walker.turn(1)
    walker.send("a second message, never answered", 2)
    assert "Finish the chat" not in walker.body(walker.get(walker.url("chat/")))
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IN_PROGRESS
    walker.reply(2)
    walker.annotate(2)
    walker.post(walker.url("chat/finish/"), {"confirm": "yes"})
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.ANNOTATING


def _post_together(token: str, numbers: list[int]) -> list[int]:
    """One browser per post, all released at once; returns the status codes."""
    barrier = threading.Barrier(len(numbers))

    def send(number: int) -> int:
        try:
            barrier.wait(timeout=30)
            response = Client().post(
                f"/s/{token}/chat/send/",
                {"message": f"parallel {number}", "turn_number": number},
                HTTP_ACCEPT="application/json",
            )
            return response.status_code
        finally:
            connection.close()  # each thread's own connection

    with ThreadPoolExecutor(max_workers=len(numbers)) as pool:
        return list(pool.map(send, numbers))


@pytest.mark.django_db(transaction=True)
def test_parallel_posts_open_exactly_one_turn(demo_defaults):
    """Twenty posts at once (each guessing a turn number, several the same) make one turn, on either database."""
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        # The test database in memory has table locks without a busy wait; the SQLite file of a real
        # deployment serialises writers (IMMEDIATE transactions, 30 s wait) and is walked by
        # test_concurrent_participants.py. Run with DATABASE_URL for the Postgres row lock.
        pytest.skip("threads need a database server (DATABASE_URL); the in-memory test database has no busy wait")
    participant = flow.do_enrol(demo_defaults.study)
    walker = Walker(Client(), participant)
    conversation = walker.to_chat()

    statuses = _post_together(participant.token, [1, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
    assert list(Turn.objects.filter(conversation=conversation).values_list("turn_number", flat=True)) == [1]
    assert all(status in (200, 409) for status in statuses)
    assert statuses.count(200) == 4  # every post of turn 1 gets the one turn back

    walker.reply(1)
    walker.annotate(1)
    statuses = _post_together(participant.token, [2] * 6 + [3] * 6)
    assert list(
        Turn.objects.filter(conversation=conversation).order_by("turn_number").values_list("turn_number", flat=True)
    ) == [1, 2]
    assert Participant.objects.count() == 1
