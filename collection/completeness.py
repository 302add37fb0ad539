"""Completeness of conversations and turns: the one rule, applied where the state changes.

A turn's state moves ``no_reply`` → ``annotation_unfinished`` (its reply is stored,
``study_flow.do_save_reply``) → ``complete`` (its annotation is finished,
``annotation.turn_flow``). A conversation is ``empty`` until its first reply,
``unfinished`` after it, and ``complete`` once the participant has finished it
(post-chat answers saved) with every turn complete. Database constraints keep a
state from ever claiming more than the rows hold, so exports and dataset
versions can trust it (SPEC 3.1 completeness). Imported conversations take the
state their file declares (absent means complete), except that a conversation
without any replied turn is ``empty`` and a turn without a reply ``no_reply``.
"""

from __future__ import annotations

from attunebench import catalogue as cat
from collection.models import Conversation


def conversation_state(conversation: Conversation) -> str:
    """What ``conversation``'s completeness is by the stored rows (one query)."""
    states = set(conversation.turns.values_list("completeness", flat=True))
    if not states - {cat.TURN_NO_REPLY}:
        return cat.CONVERSATION_EMPTY
    finished = conversation.source == Conversation.Source.IMPORTED or conversation.completed_at is not None
    closed = conversation.status in (Conversation.Status.COMPLETE, Conversation.Status.WITHDRAWN)
    if finished and closed and states == {cat.TURN_COMPLETE}:
        return cat.CONVERSATION_COMPLETE
    return cat.CONVERSATION_UNFINISHED


def do_refresh_conversation_completeness(conversation_id: int) -> str:
    """Store the completeness the rows of one conversation give it, and return it."""
    conversation = Conversation.objects.get(pk=conversation_id)
    state = conversation_state(conversation)
    if state != conversation.completeness:
        Conversation.objects.filter(pk=conversation_id).update(completeness=state)
    return state


def do_note_first_reply(conversation_id: int) -> None:
    """An empty conversation becomes unfinished with its first stored reply (conditional: one query)."""
    Conversation.objects.filter(pk=conversation_id, completeness=cat.CONVERSATION_EMPTY).update(
        completeness=cat.CONVERSATION_UNFINISHED
    )
