"""A participant mid-chat, made through the same actions the participant pages call, for benches and tests
that need replies stored (each stored reply queues its suggested rewrite, as on the real site)."""

from __future__ import annotations

from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.chat_model import build_request, offline_reply
from collection.models import Conversation, Topic, Turn
from collection.setup import ensure_defaults


def chatting_conversation() -> Conversation:
    """A new participant of the demo study, consented, profiled and in a conversation on the first topic."""
    study = ensure_defaults().study
    participant = flow.do_enrol(study)
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "35-44", [], [], None)
    topic = Topic.objects.order_by("pk").first()
    if topic is None:
        raise RuntimeError("the demo study has no topics: ensure_defaults() installed none")
    return flow.do_start_conversation(participant, topic, cat.TOPIC_ATTITUDE_OPTIONS[0])


def store_reply(conversation: Conversation, text: str) -> Turn:
    """Send ``text`` as the conversation's next message and store the offline model's reply to it: the reply's
    commit queues the turn's rewrite (``collection.signals.reply_stored``)."""
    turn, _ = flow.do_add_message(conversation, flow.next_turn_number(conversation), text)
    flow.do_save_reply(turn, offline_reply(build_request(conversation, turn)))
    return Turn.objects.get(pk=turn.pk)
