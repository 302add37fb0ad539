"""Where a participant is in the study, and the actions that move them on.

The step is always *derived from what is stored*, never from the session, so a
refresh, the back button, a closed tab or a different device resumes exactly
where the participant left off. Every action is idempotent: submitting the same
step twice finds the work already done and changes nothing (SPEC 1, issue 5
"never lose input").

Conversation status while collecting: ``in_progress`` during the chat and its
per-turn annotation; ``annotating`` once the participant has ended the chat and
is answering the post-chat questions; ``complete`` when those are saved;
``withdrawn`` after withdrawal.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection.assignment import choose_original_model
from collection.models import (
    Consent,
    Conversation,
    ConversationWideAnswers,
    FourBranchRating,
    PanasItemResponse,
    PanasSurvey,
    Participant,
    ParticipantProfile,
    SensitiveProfile,
    Study,
    Topic,
    Turn,
    hash_token,
)
from collection.rate_limits import Clock, SlidingWindowLimiter, WindowLog, window_log
from collection.signals import participant_withdrawn

CONSENT = "consent"
PROFILE = "profile"
PRE_PANAS = "pre_panas"
TOPIC = "topic"
CHAT = "chat"
ANNOTATE = "annotate"
POST_PANAS = "post_panas"
SURVEY = "survey"
DONE = "done"
WITHDRAWN = "withdrawn"

#: The steps the progress indicator shows, in order, with participant-facing names.
PROGRESS_STEPS: tuple[tuple[str, str], ...] = (
    (CONSENT, "About the study"),
    (PROFILE, "About you"),
    (PRE_PANAS, "How you feel"),
    (TOPIC, "Choose a topic"),
    (CHAT, "Chat"),
    (POST_PANAS, "How you feel now"),
    (SURVEY, "Your view"),
    (DONE, "Finished"),
)
_PROGRESS_INDEX = {step: i for i, (step, _) in enumerate(PROGRESS_STEPS)}
_PROGRESS_INDEX[ANNOTATE] = _PROGRESS_INDEX[CHAT]

#: Conversation ids are public in exports; the "conv-" prefix keeps them recognisable.
CONVERSATION_ID_PREFIX = "conv-"


@dataclass(frozen=True)
class Position:
    """The step a participant is on; for chat and annotation, also the conversation and turn."""

    step: str
    conversation: Conversation | None = None
    turn: Turn | None = None

    @property
    def chat(self) -> Conversation:
        """The conversation of a chat, annotation or post-chat step; those steps always have one."""
        if self.conversation is None:
            raise Http404("No conversation at this step.")
        return self.conversation


@dataclass(frozen=True)
class Progress:
    number: int
    total: int
    label: str
    steps: tuple[tuple[str, str, str], ...]  # (step, label, "done"|"current"|"todo")


LINK_GONE = "This study link has expired or was withdrawn by the research team; ask them for a new one."


def access_participant(token: str) -> Participant:
    """The participant owning ``token``; Http404 for anything else (no hint that ids exist).

    Only the token's hash is stored, so the lookup hashes it; the instance
    returned carries the token for the links its pages build. A link past the
    study's ``link_valid_days`` or revoked in the admin is refused.
    """
    participant = (
        Participant.objects.select_related("study").filter(token_hash=hash_token(token), study__isnull=False).first()
    )
    if participant is None:
        raise Http404("No such study link.")
    if not participant.link_usable():
        raise Http404(LINK_GONE)
    participant.token = token
    return participant


def do_issue_link(participant: Participant) -> str:
    """A new study link token for ``participant`` (the old one stops working); shown once by the caller."""
    token = participant.issue_link()
    participant.save(update_fields=["token_hash", "link_issued_at", "link_revoked_at"])
    return token


def do_revoke_links(participants: Any) -> int:
    """Stop the study links of these participants (a queryset) from working; returns how many changed."""
    return int(participants.filter(link_revoked_at__isnull=True).update(link_revoked_at=timezone.now()))


def study_of(participant: Participant | None) -> Study:
    """The study a participant is enrolled in; links without one are refused like unknown links."""
    if participant is None or participant.study is None:
        raise Http404("No such study link.")
    return participant.study


def current_consent(participant: Participant) -> Consent | None:
    return participant.consents.filter(version=study_of(participant).consent_version).first()


def active_conversation(participant: Participant) -> Conversation | None:
    """The participant's conversation in this study (one per participant), if started."""
    return (
        participant.conversations.select_related("topic", "original_model")
        .exclude(status=Conversation.Status.WITHDRAWN)
        .order_by("-started_at")
        .first()
    )


def pre_panas_complete(participant: Participant) -> bool:
    ratings = participant.pending_pre_panas or {}
    return all(item in ratings for item in cat.PANAS_ITEMS)


def locate(participant: Participant) -> Position:
    """The step this participant should be shown now, from stored data only."""
    if participant.is_withdrawn:
        return Position(WITHDRAWN)
    if current_consent(participant) is None:
        return Position(CONSENT)
    if not ParticipantProfile.objects.filter(participant=participant).exists():
        return Position(PROFILE)
    conversation = active_conversation(participant)
    if conversation is None:
        return Position(TOPIC if pre_panas_complete(participant) else PRE_PANAS)
    if conversation.status == Conversation.Status.IN_PROGRESS:
        last = conversation.turns.order_by("-turn_number").first()
        if last is not None and last.llm_response and last.annotation_completed_at is None:
            return Position(ANNOTATE, conversation, last)
        return Position(CHAT, conversation, last)
    if conversation.status == Conversation.Status.ANNOTATING:
        if not conversation.panas_surveys.filter(kind=PanasSurvey.Kind.POST).exists():
            return Position(POST_PANAS, conversation)
        return Position(SURVEY, conversation)
    return Position(DONE, conversation)


def step_url(participant: Participant, position: Position) -> str:
    """Where ``position`` lives; the annotation page is per turn."""
    if position.step == ANNOTATE and position.turn is not None:
        return reverse(
            "collection:annotation:annotate",
            kwargs={"token": participant.token, "turn_number": position.turn.turn_number},
        )
    return reverse(f"collection:{position.step}", kwargs={"token": participant.token})


def progress_for(step: str) -> Progress:
    index = _PROGRESS_INDEX.get(step, len(PROGRESS_STEPS) - 1)
    steps = tuple(
        (name, label, "done" if i < index else "current" if i == index else "todo")
        for i, (name, label) in enumerate(PROGRESS_STEPS)
    )
    return Progress(number=index + 1, total=len(PROGRESS_STEPS), label=PROGRESS_STEPS[index][1], steps=steps)


# ---------------------------------------------------------------------------
# Actions
# ---------------------------------------------------------------------------


def do_enrol(study: Study, platform_id: str = "") -> Participant:
    """A new participant in ``study`` (invitation command and open enrolment)."""
    return Participant.objects.create(study=study, platform_id=platform_id[:128])


def do_record_consent(participant: Participant, sensitive_data_consent: bool) -> Consent:
    """Store consent to the study's current version; a repeat submission keeps the first record."""
    consent, _ = Consent.objects.get_or_create(
        participant=participant,
        version=study_of(participant).consent_version,
        defaults={"sensitive_data_consent": sensitive_data_consent, "consented_at": timezone.now()},
    )
    return consent


def do_save_profile(
    participant: Participant, age_band: str, traits: list[str], goals: list[str], diagnoses: list[str] | None
) -> ParticipantProfile:
    """Save the profile; diagnoses are stored only under explicit sensitive-data consent (SPEC 2.5)."""
    with transaction.atomic():
        profile, _ = ParticipantProfile.objects.update_or_create(
            participant=participant, defaults={"age_band": age_band, "traits": traits, "goals": goals}
        )
        consent = current_consent(participant)
        if diagnoses is not None and consent is not None and consent.sensitive_data_consent:
            SensitiveProfile.objects.update_or_create(participant=participant, defaults={"diagnoses": diagnoses})
    return profile


def do_save_pre_panas(participant: Participant, ratings: dict[str, int]) -> None:
    """Hold the pre-chat ratings until the conversation exists (it needs the topic first)."""
    participant.pending_pre_panas = {item: int(ratings[item]) for item in cat.PANAS_ITEMS}
    participant.save(update_fields=["pending_pre_panas"])


def _new_conversation_id() -> str:
    return CONVERSATION_ID_PREFIX + secrets.token_hex(8)


def write_panas(conversation: Conversation, kind: str, panas: cf.Panas) -> PanasSurvey:
    """Store (or replace) a conversation's PANAS survey: its items and its PA/NA totals.

    The one writer for the participant flow and the importer. The totals are
    the canonical model's: given ones kept, else derived when a side is complete.
    """
    survey, created = PanasSurvey.objects.update_or_create(
        conversation=conversation,
        kind=kind,
        defaults={"total_positive": panas.totalPositiveAffect, "total_negative": panas.totalNegativeAffect},
    )
    if not created:
        survey.item_responses.exclude(item__in=list(panas.items)).delete()
    PanasItemResponse.objects.bulk_create(
        [PanasItemResponse(survey=survey, item=item, rating=rating) for item, rating in panas.items.items()],
        update_conflicts=True,
        unique_fields=["survey", "item"],
        update_fields=["rating"],
    )
    return survey


def do_start_conversation(participant: Participant, topic: Topic, topic_attitude: str) -> Conversation:
    """Create the conversation, assign a model by the balancing rule and move the pre-chat mood in.

    The participant row is locked so two simultaneous submissions create one
    conversation, not two.
    """
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        existing = active_conversation(locked)
        if existing is not None:
            return existing
        model = choose_original_model(topic)
        conversation = Conversation.objects.create(
            conversation_id=_new_conversation_id(),
            participant=locked,
            original_model=model,
            topic=topic,
            provider=model.provider,
            metadata_extra={"study": study_of(locked).slug},
        )
        if locked.pending_pre_panas:
            write_panas(conversation, PanasSurvey.Kind.PRE, cf.Panas(items=locked.pending_pre_panas))
        locked.pending_pre_panas = {}
        locked.save(update_fields=["pending_pre_panas"])
        profile = ParticipantProfile.objects.get(participant=locked)
        profile.topic_attitude = topic_attitude
        profile.responses = {**profile.responses, "topicAttitude": topic_attitude}
        profile.save(update_fields=["topic_attitude", "responses", "updated_at"])
    return conversation


def next_turn_number(conversation: Conversation) -> int:
    last = conversation.turns.order_by("-turn_number").values_list("turn_number", flat=True).first()
    return (last or 0) + 1


def turn_count(conversation: Conversation) -> int:
    return conversation.turns.exclude(llm_response="").count()


class StaleSubmission(Exception):
    """The form was for a turn that is no longer the next one (e.g. an old tab)."""


def do_add_message(conversation: Conversation, turn_number: int, text: str) -> tuple[Turn, bool]:
    """Save the participant's message *before* any model call; the turn number is the idempotency key.

    Returns (turn, created). Re-sending the form for a turn that already exists
    returns that turn unchanged, so a double click never adds a second message.
    """
    expected = next_turn_number(conversation)
    if turn_number < expected:
        return conversation.turns.get(turn_number=turn_number), False
    if turn_number > expected:
        raise StaleSubmission(f"turn {turn_number} is not next ({expected} is)")
    try:
        with transaction.atomic():
            return Turn.objects.create(conversation=conversation, turn_number=turn_number, user_message=text), True
    except IntegrityError:  # a simultaneous identical submission won the race
        return conversation.turns.get(turn_number=turn_number), False


def do_save_reply(turn: Turn, text: str) -> bool:
    """Store the finished reply once; only the first writer wins (conditional update)."""
    changed = Turn.objects.filter(pk=turn.pk, llm_response="").update(llm_response=text, responded_at=timezone.now())
    return changed == 1


def can_finish_chat(conversation: Conversation) -> bool:
    return turn_count(conversation) >= study_of(conversation.participant).min_turns


def chat_is_full(conversation: Conversation) -> bool:
    return turn_count(conversation) >= study_of(conversation.participant).max_turns


def do_finish_chat(conversation: Conversation) -> bool:
    """End the chat (participant's choice, after the minimum number of turns)."""
    if not can_finish_chat(conversation):
        return False
    Conversation.objects.filter(pk=conversation.pk, status=Conversation.Status.IN_PROGRESS).update(
        status=Conversation.Status.ANNOTATING
    )
    return True


def do_save_post_panas(conversation: Conversation, ratings: dict[str, int]) -> None:
    with transaction.atomic():
        write_panas(conversation, PanasSurvey.Kind.POST, cf.Panas(items=ratings))


def do_save_conversation_wide(conversation: Conversation, answers: dict[str, Any]) -> None:
    """Save Q1–Q3, the follow-up, the four-branch ratings and the comment; completes the conversation."""
    with transaction.atomic():
        ConversationWideAnswers.objects.update_or_create(
            conversation=conversation,
            defaults={
                "looking_for": answers["looking_for"],
                "emotion_clarity": answers["emotion_clarity"],
                "model_fit": answers["model_fit"],
                "what_felt_off": answers["what_felt_off"],
            },
        )
        for branch in cat.FOUR_BRANCHES:
            FourBranchRating.objects.update_or_create(
                conversation=conversation, branch=branch, defaults={"rating": int(answers["branches"][branch])}
            )
        Conversation.objects.filter(pk=conversation.pk).update(
            comment=answers.get("comment", ""),
            status=Conversation.Status.COMPLETE,
            completed_at=timezone.now(),
        )


def do_withdraw(participant: Participant) -> None:
    """Mark the participant and every conversation of theirs withdrawn, and announce it.

    The status takes the data out of every surface that reads collected data
    (exports, dataset versions, the API, the research pages, rating); the
    ``participant_withdrawn`` signal has the layers above re-score the runs
    and regenerate the export files that held it (issue 13).
    """
    with transaction.atomic():
        Participant.objects.filter(pk=participant.pk, withdrawn_at__isnull=True).update(withdrawn_at=timezone.now())
        conversations = Conversation.objects.filter(participant=participant)
        pks = list(conversations.values_list("pk", flat=True))
        conversations.update(status=Conversation.Status.WITHDRAWN)
        withdrawn_at = Participant.objects.values_list("withdrawn_at", flat=True).get(pk=participant.pk)
        if pks:
            participant_withdrawn.send(sender=Participant, conversation_pks=pks, withdrawn_at=withdrawn_at)


# The clock of the chat limit; tests replace it to move time instead of waiting for it.
chat_clock: Clock = time.time
_chat_log: tuple[int, WindowLog] | None = None


def _chat_window_log() -> WindowLog:
    """One log per process (Redis-backed when configured), made again in a forked child."""
    global _chat_log
    if _chat_log is None or _chat_log[0] != os.getpid():
        _chat_log = (os.getpid(), window_log(settings.REDIS_URL))
    return _chat_log[1]


def check_chat_rate(participant: Participant) -> bool:
    """True while the participant has sent fewer than the limit in the last 60 seconds; records the message.

    ``ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE`` over a sliding window, shared by every
    web worker through Redis when ``REDIS_URL`` is set.
    """
    limiter = SlidingWindowLimiter(
        _chat_window_log(), settings.ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE, 60.0, "attune:chat-rate", clock=chat_clock
    )
    return limiter.admit(participant.token_hash)  # never reused, unlike a primary key after a rollback
