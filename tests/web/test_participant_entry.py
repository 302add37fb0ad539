"""``study_flow.enter`` (how every participant page starts) places the participant exactly as ``locate`` does,
and its fixed-SQL reads (collection.entry_reads) load exactly the rows and values the ORM's querysets load.

enter reads consent and profile with the participant's own row, and entry_reads skips the ORM's SQL building
(requests stay cheap at a hundred participants); these tests walk one participant through every step and
compare, at each, the place and every field of every object read with what plain querysets give, including a
consent to an older version of the information sheet, which no longer counts.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.http import Http404
from django.test.utils import CaptureQueriesContext

from collection import study_flow as flow
from collection.models import Consent, Conversation, Participant, ParticipantProfile, Study, Turn
from tests.web.test_participant_flow import Walker

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _quick(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0


def both(token: str) -> tuple[flow.Position, flow.Position, int, int]:
    with CaptureQueriesContext(connection) as entered_queries:
        _, entered = flow.enter(token)
    with CaptureQueriesContext(connection) as located_queries:
        located = flow.locate(flow.access_participant(token))
    return entered, located, len(entered_queries), len(located_queries)


def values(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def orm_place(token: str) -> tuple:
    """Where the participant is, read with plain querysets only: the definition enter must agree with."""
    participant = Participant.objects.get(token_hash=flow.hash_token(token))
    study = Study.objects.get(pk=participant.study_id)
    consented = Consent.objects.filter(participant=participant, version=study.consent_version).exists()
    profiled = ParticipantProfile.objects.filter(participant=participant).exists()
    conversation = (
        Conversation.objects.filter(participant=participant)
        .exclude(status=Conversation.Status.WITHDRAWN)
        .order_by("-started_at")
        .first()
    )
    last = Turn.objects.filter(conversation=conversation).order_by("-turn_number").first() if conversation else None
    return participant, study, consented, profiled, conversation, last


def same_place(token: str) -> str:
    entered, located, _, _ = both(token)
    assert entered == located
    participant, study, consented, profiled, conversation, last = orm_place(token)
    read, place = flow.enter(token)
    assert values(read) == values(participant) and values(read.study) == values(study)
    if place.conversation is not None:  # the conversation and last turn read with the participant
        assert values(place.conversation) == values(conversation) and place.conversation.participant is read
        if place.turn is not None:
            assert values(place.turn) == values(last) and place.turn.conversation is place.conversation
    if consented and profiled and not participant.is_withdrawn:
        read_conversation = flow.active_conversation(read)
        assert read_conversation == conversation
        if conversation is not None:
            assert values(read_conversation) == values(conversation) and read_conversation.participant is read
            if last is not None:
                read_last = flow.entry_reads.last_turn(conversation)
                assert values(read_last) == values(last) and read_last.conversation is conversation
    return entered.step


def test_enter_agrees_with_locate_at_every_step(client, participant):
    walker = Walker(client, participant)
    token = participant.token
    assert same_place(token) == flow.CONSENT
    walker.consent()
    assert same_place(token) == flow.PROFILE
    walker.profile()
    assert same_place(token) == flow.PRE_PANAS
    walker.pre_panas()
    assert same_place(token) == flow.TOPIC
    walker.topic()
    assert same_place(token) == flow.CHAT
    walker.send("I feel worried about my exams.", 1)
    walker.reply(1)
    assert same_place(token) == flow.ANNOTATE
    entered, _, entered_count, located_count = both(token)
    assert entered.turn is not None and entered.turn.turn_number == 1
    # consent, profile, conversation and last turn came with the participant (locate asks for each)
    assert entered_count == located_count - 4
    # participant, study, conversation and last turn in one statement; the topic and original model load when used
    assert entered_count == 1
    assert entered.chat is not None
    with CaptureQueriesContext(connection) as lazy:
        assert entered.chat.topic.subtopic and entered.chat.original_model.name
    assert len(lazy) == 2


def test_a_consent_to_an_older_version_sends_the_participant_back_to_consent(client, participant, study):
    walker = Walker(client, participant)
    walker.consent()
    walker.profile()
    study.consent_version = "2.0"
    study.save(update_fields=["consent_version"])
    assert same_place(participant.token) == flow.CONSENT


def test_withdrawn_and_unknown_links(client, participant):
    walker = Walker(client, participant)
    walker.consent()
    flow.do_withdraw(participant)
    assert same_place(participant.token) == flow.WITHDRAWN
    with pytest.raises(Http404):
        flow.enter("not-a-study-link")
