"""Where a participant is in the study, and the actions that move them on.

The step is always *derived from what is stored*, never from the session, so a
refresh, the back button, a closed tab or a different device resumes exactly
where the participant left off. Every action is idempotent: submitting the same
step twice finds the work already done and changes nothing, so no input is
ever lost (SPEC 1).

Conversation status while collecting: ``in_progress`` during the chat and its
per-turn annotation; ``annotating`` once the participant has ended the chat and
is answering the post-chat questions; ``complete`` when those are saved;
``withdrawn`` after withdrawal.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Field
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection import entry_reads, quotas, safety
from collection.assignment import choose_original_model
from collection.completeness import do_note_first_reply, do_refresh_conversation_completeness
from collection.models import (
    IDENTITY_UNSCREENED,
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
from collection.signals import participant_withdrawn, reply_stored

logger = logging.getLogger("attune.participant")

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
STOPPED = "stopped"  # stopped for their wellbeing after a safety message: data kept, wellbeing code given

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
    return _entrant(token).participant


def enter(token: str) -> tuple[Participant, Position]:
    """``access_participant`` and ``locate`` together, as every participant page starts.

    The same answer as calling the two in turn, in two queries fewer: whether the participant has consented
    to the study's current version and has a profile come with the participant's own row.
    """
    found = _entrant(token)
    return found.participant, _position(found.participant, found.consented, found.profiled, found)


def _entrant(token: str) -> entry_reads.Entrant:
    found = entry_reads.entrant(hash_token(token))
    if found is None:
        raise Http404("No such study link.")
    if not found.participant.link_usable():
        raise Http404(LINK_GONE)
    found.participant.token = token
    return found


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
    return entry_reads.active_conversation(participant)


def pre_panas_complete(participant: Participant) -> bool:
    ratings = participant.pending_pre_panas or {}
    return all(item in ratings for item in cat.PANAS_ITEMS)


def locate(participant: Participant) -> Position:
    """The step this participant should be shown now, from stored data only."""
    return _position(participant)


def _position(
    participant: Participant,
    consented: bool | None = None,
    profiled: bool | None = None,
    read: entry_reads.Entrant | None = None,
) -> Position:
    """``locate``, given what is already known of consent and profile (None: ask the database), and of the
    conversation and its last turn (``read``, the entry's row: None asks the database)."""
    if participant.is_withdrawn:
        return Position(WITHDRAWN)
    if participant.stopped_at is not None:
        return Position(STOPPED)
    if not (consented if consented is not None else current_consent(participant) is not None):
        return Position(CONSENT)
    if not (profiled if profiled is not None else ParticipantProfile.objects.filter(participant=participant).exists()):
        return Position(PROFILE)
    conversation = read.conversation if read is not None else active_conversation(participant)
    if conversation is None:
        return Position(TOPIC if pre_panas_complete(participant) else PRE_PANAS)
    if conversation.status == Conversation.Status.IN_PROGRESS:
        last = read.last if read is not None else entry_reads.last_turn(conversation)
        if last is not None and last.awaits_annotation:
            # A safety panel waiting for the participant's choice comes before any question about the reply.
            if participant.safety_hold:
                return Position(CHAT, conversation, last)
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


def do_enrol(study: Study) -> Participant:
    """A new participant in ``study`` (invitation command; open enrolment goes through do_open_enrol,
    platform entry through ``collection.recruitment.do_platform_enrol``)."""
    return Participant.objects.create(study=study)


class EnrolmentRefused(Exception):
    """Open enrolment does not take this visitor now; ``str()`` is the calm sentence shown to them."""


class StudyFull(EnrolmentRefused):
    """The study has reached its ``max_participants``."""


class StudyNotOpen(EnrolmentRefused):
    """The study is a draft or closed: nobody new may join."""


class GroupFull(EnrolmentRefused):
    """The participant's group has reached its quota."""


class UnknownGroup(EnrolmentRefused):
    """The join link names a group the study does not have."""


class TopicFull(Exception):
    """The chosen topic reached its quota while the participant was choosing; ``str()`` is the calm sentence."""


class EnrolmentThrottled(EnrolmentRefused):
    """Too many people joined from this address, or this study, in the last hour."""

    retry_after = 600  # seconds suggested to the visitor (Retry-After)


STUDY_CLOSED_MESSAGE = (
    "This study is not taking new participants at the moment. Thank you for your interest; nothing has been recorded."
)
STUDY_FULL_MESSAGE = (
    "This study has all the participants it needs, so it is not taking anyone new. Thank you for your interest."
)
ENROL_THROTTLED_MESSAGE = (
    "A lot of people are joining this study just now. Please try again in a few minutes; nothing has been recorded."
)


def study_is_full(study: Study) -> bool:
    """True once the study has ``max_participants`` participants (withdrawn ones still count: the cap is on places)."""
    return study.max_participants is not None and study.participants.count() >= study.max_participants


def check_group(study: Study, group: str) -> None:
    """Raise UnknownGroup unless ``group`` is blank or one of the study's groups."""
    if group and group not in study.group_names:
        raise UnknownGroup(quotas.UNKNOWN_GROUP_MESSAGE)


def do_open_enrol(study: Study, token: str = "", group: str = "") -> Participant:
    """A participant who joined through the study's open link; refuses once the study is full.

    The study row is locked while counting, so simultaneous joins cannot pass the cap together.
    A study that is not open (draft or closed) and a group whose quota is reached refuse too.
    ``token`` is the (server-made, signed) token of the start page that was posted: repeated or
    simultaneous posts of one start page get the participant the first one made, not a second.
    """
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        existing = Participant.objects.filter(token_hash=hash_token(token)).first() if token else None
        if existing is not None:
            if existing.study_id != study.pk:
                raise Http404("No such study link.")
            existing.token = token  # only the hash is stored
            return existing
        if not locked.is_open:
            raise StudyNotOpen(STUDY_CLOSED_MESSAGE)
        check_group(locked, group)
        if study_is_full(locked):
            raise StudyFull(STUDY_FULL_MESSAGE)
        if group and quotas.group_is_full(locked, group):
            raise GroupFull(quotas.GROUP_FULL_MESSAGE)
        participant = Participant(study=locked, group=group)
        if token:
            participant.token, participant.token_hash = token, hash_token(token)
        participant.save()
        return participant


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
    conversation, not two; the study row is locked while the topic's quota is
    checked, so simultaneous starts cannot over-fill it (raises TopicFull). The
    model comes from the study's pool when it has one (``collection.assignment``).
    """
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        existing = active_conversation(locked)
        if existing is not None:
            return existing
        study = Study.objects.select_for_update().get(pk=study_of(locked).pk)
        if topic.pk in quotas.full_topic_ids(study):
            raise TopicFull(quotas.TOPIC_FULL_MESSAGE)
        model = choose_original_model(topic, study, locked.group)
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
    """Turns the model has answered (the minimum to finish counts these)."""
    return conversation.turns.exclude(llm_response="").count()


def turns_sent(conversation: Conversation) -> int:
    """Every turn the participant has sent, answered or not: the maximum counts these."""
    return conversation.turns.count()


class StaleSubmission(Exception):
    """The form was for a turn that is no longer the next one (e.g. an old tab)."""


class TurnRefused(Exception):
    """A new message is not taken now; ``str()`` is the calm sentence shown to the participant."""


class ReplyOutstanding(TurnRefused):
    """The previous message has no finished reply yet (it is being written, or it failed and awaits a retry)."""


class AnnotationOutstanding(TurnRefused):
    """The previous reply has not been annotated yet."""


class ChatFull(TurnRefused):
    """The conversation has reached the study's ``max_turns``."""


REPLY_OUTSTANDING_MESSAGE = (
    "The model has not finished replying to your last message yet. Please wait for its reply (or press "
    "\u201cTry again\u201d if it could not be fetched); your new message is kept here."
)
ANNOTATION_OUTSTANDING_MESSAGE = (
    "Please answer the questions about the model\u2019s last reply first. Your new message is kept here."
)
CHAT_FULL_MESSAGE = "This chat has reached its length limit. Please finish the chat below."


def check_can_send(conversation: Conversation, last: Turn | None) -> None:
    """Raise a :class:`TurnRefused` unless a new message may follow ``last`` (the latest turn, if any).

    One unanswered turn at a time: the latest reply must exist and be
    annotated before the next message, and ``max_turns`` counts every turn sent,
    answered or not.
    """
    if last is not None and not last.llm_response:
        raise ReplyOutstanding(REPLY_OUTSTANDING_MESSAGE)
    if last is not None and last.awaits_annotation:
        raise AnnotationOutstanding(ANNOTATION_OUTSTANDING_MESSAGE)
    if turns_sent(conversation) >= study_of(conversation.participant).max_turns:
        raise ChatFull(CHAT_FULL_MESSAGE)


def do_add_message(conversation: Conversation, turn_number: int, text: str) -> tuple[Turn, bool]:
    """Save the participant's message *before* any model call; the turn number is the idempotency key.

    Returns (turn, created). Re-sending the form for a turn that already exists
    returns that turn unchanged, so a double click never adds a second message.
    A new turn is taken only under a lock on the conversation row and only when
    :func:`check_can_send` passes, so simultaneous posts (two tabs, a script)
    can never open a second unanswered turn or pass ``max_turns``; raises
    :class:`TurnRefused` otherwise, having saved nothing.
    """
    with transaction.atomic():
        # Postgres: the row lock queues simultaneous sends. SQLite: every transaction already holds the
        # write lock from its start (transaction_mode IMMEDIATE), which serialises them the same way.
        Conversation.objects.select_for_update().only("pk").get(pk=conversation.pk)
        last = entry_reads.last_turn(conversation)
        expected = (last.turn_number if last else 0) + 1
        if turn_number < expected:
            return conversation.turns.get(turn_number=turn_number), False
        if turn_number > expected:
            raise StaleSubmission(f"turn {turn_number} is not next ({expected} is)")
        check_can_send(conversation, last)
        try:
            with transaction.atomic():
                turn = Turn.objects.create(conversation=conversation, turn_number=turn_number, user_message=text)
        except IntegrityError:  # SQLite without the row lock: a simultaneous identical submission won the race
            return conversation.turns.get(turn_number=turn_number), False
        return turn, True


def do_save_reply(
    turn: Turn,
    text: str,
    identity_screen: str = IDENTITY_UNSCREENED,
    identity_leaks: list[str] | None = None,
    answered_by: str = "",
) -> bool:
    """Store the finished reply once; only the first writer wins (conditional update).

    The turn then awaits its annotation, and its conversation is no longer empty.
    ``identity_screen`` and ``identity_leaks`` record what the identity screen
    did to the reply (``collection.identity_guard``); callers that did not screen
    it leave it ``unscreened``. ``answered_by`` is the live model whose text this
    is (the fallback's when the provider failed); blank for the offline model.
    """
    with transaction.atomic():
        changed = Turn.objects.filter(pk=turn.pk, llm_response="").update(
            llm_response=text,
            responded_at=timezone.now(),
            completeness=cat.TURN_ANNOTATION_UNFINISHED,
            identity_screen=identity_screen,
            identity_leaks=list(identity_leaks or []),
            answered_by=answered_by,
        )
        if changed:
            do_note_first_reply(turn.conversation_id)
            reply_stored.send(sender=Turn, turn_pk=turn.pk)
    return changed == 1


def can_finish_chat(conversation: Conversation) -> bool:
    return turn_count(conversation) >= study_of(conversation.participant).min_turns


def chat_is_full(conversation: Conversation) -> bool:
    """True once the participant has sent ``max_turns`` messages, whether or not all were answered."""
    return turns_sent(conversation) >= study_of(conversation.participant).max_turns


def finish_is_open(conversation: Conversation) -> bool:
    """The participant may end the chat now: the minimum number of turns answered, and no reply outstanding."""
    return can_finish_chat(conversation) and not conversation.turns.filter(llm_response="").exists()


def do_finish_chat(conversation: Conversation) -> bool:
    """End the chat (participant's choice, after the minimum number of turns, with no reply outstanding)."""
    if not finish_is_open(conversation):
        return False
    Conversation.objects.filter(pk=conversation.pk, status=Conversation.Status.IN_PROGRESS).update(
        status=Conversation.Status.ANNOTATING
    )
    return True


def do_save_post_panas(conversation: Conversation, ratings: dict[str, int]) -> None:
    with transaction.atomic():
        write_panas(conversation, PanasSurvey.Kind.POST, cf.Panas(items=ratings))


def do_save_conversation_wide(conversation: Conversation, answers: dict[str, Any]) -> None:
    """Save Q1–Q3, the follow-up, the four-branch ratings and the comment; completes the conversation.

    Q1 "Other" in the participant's words is kept in the conversation's metadata
    (``cat.Q1_OTHER_TEXT_KEY``), so ``q1_lookingFor`` stays the listed strings (SPEC 2.4).
    """
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
        extra = {k: v for k, v in conversation.metadata_extra.items() if k != cat.Q1_OTHER_TEXT_KEY}
        if answers.get("looking_for_other") and cat.Q1_OTHER in answers["looking_for"]:
            extra[cat.Q1_OTHER_TEXT_KEY] = answers["looking_for_other"]
        Conversation.objects.filter(pk=conversation.pk).update(
            metadata_extra=extra,
            comment=answers.get("comment", ""),
            status=Conversation.Status.COMPLETE,
            completed_at=timezone.now(),
        )
        # The participant's own words in the closing survey are screened as their messages are.
        if conversation.participant is not None:
            written = [answers.get("comment", ""), answers.get("looking_for_other", "")]
            safety.do_screen_free_text(conversation.participant, written)
        do_refresh_conversation_completeness(conversation.pk)


def do_withdraw(participant: Participant) -> None:
    """Mark the participant and every conversation of theirs withdrawn, and announce it.

    The status takes the data out of every surface that reads collected data
    (exports, dataset versions, the API, the research pages, rating); the
    ``participant_withdrawn`` signal has the layers above re-score the runs
    and regenerate the export files that held it.
    """
    with transaction.atomic():
        Participant.objects.filter(pk=participant.pk, withdrawn_at__isnull=True).update(withdrawn_at=timezone.now())
        conversations = Conversation.objects.filter(participant=participant)
        pks = list(conversations.values_list("pk", flat=True))
        conversations.update(status=Conversation.Status.WITHDRAWN)
        withdrawn_at = Participant.objects.values_list("withdrawn_at", flat=True).get(pk=participant.pk)
        if pks:
            participant_withdrawn.send(sender=Participant, conversation_pks=pks, withdrawn_at=withdrawn_at)


# The clocks of the chat and enrolment limits; tests replace them to move time instead of waiting for it.
chat_clock: Clock = time.time
enrol_clock: Clock = time.time
_window_log: tuple[int, WindowLog] | None = None


def _shared_window_log() -> WindowLog:
    """One log per process (Redis-backed when configured), made again in a forked child."""
    global _window_log
    if _window_log is None or _window_log[0] != os.getpid():
        _window_log = (os.getpid(), window_log(settings.REDIS_URL))
    return _window_log[1]


def check_chat_rate(participant: Participant) -> bool:
    """True while the participant has sent fewer than the limit in the last 60 seconds; records the message.

    ``ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE`` over a sliding window, shared by every
    web worker through Redis when ``REDIS_URL`` is set.
    """
    limiter = SlidingWindowLimiter(
        _shared_window_log(), settings.ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE, 60.0, "attune:chat-rate", clock=chat_clock
    )
    return limiter.admit(participant.token_hash)  # never reused, unlike a primary key after a rollback


def check_enrolment_rate(study: Study, address: str) -> None:
    """Record one open-enrolment join; raise EnrolmentThrottled when the address or the study is over its rate.

    ``ATTUNE_ENROL_PER_ADDRESS_PER_HOUR`` per client address and
    ``ATTUNE_ENROL_PER_STUDY_PER_HOUR`` per study, each over a sliding hour.
    The address is checked first, so one address filling the study's hour is
    stopped at its own limit.
    """
    log = _shared_window_log()
    per_address = SlidingWindowLimiter(
        log, settings.ATTUNE_ENROL_PER_ADDRESS_PER_HOUR, 3600.0, "attune:enrol-address", clock=enrol_clock
    )
    per_study = SlidingWindowLimiter(
        log, settings.ATTUNE_ENROL_PER_STUDY_PER_HOUR, 3600.0, "attune:enrol-study", clock=enrol_clock
    )
    if not per_address.admit(f"{study.pk}:{address}") or not per_study.admit(str(study.pk)):
        raise EnrolmentThrottled(ENROL_THROTTLED_MESSAGE)


# ---------------------------------------------------------------------------
# The study's live-model budget
# ---------------------------------------------------------------------------

LIVE_BUDGET_MESSAGE = (
    "The study cannot fetch more replies just now. Your message is saved. The research team has been told; "
    "please try again later with the same link."
)


def _column(name: str) -> str:
    field = Study._meta.get_field(name)
    assert isinstance(field, Field) and field.column, f"Study.{name} is not a column"
    return field.column


@functools.cache
def _claim_sql() -> str:
    """The call budget's conditional update, as a fixed SQL string built once per process (every live reply
    runs it; the ORM rebuilt it each time)."""
    q = connection.ops.quote_name
    used, budget = (q(_column(name)) for name in ("live_calls_used", "live_call_budget"))
    return (
        f"UPDATE {q(Study._meta.db_table)} SET {used} = {used} + 1"
        f" WHERE {q(_column('id'))} = %s AND ({budget} IS NULL OR {used} < {budget})"
    )


def claim_live_call(study: Study) -> bool:
    """Count one live model call against the study's budgets; False (nothing counted) once either is spent.

    The dollar budget (``live_spend_budget_usd``, collection.live_spend) is
    checked first; then the call budget by one conditional update, so
    simultaneous calls can never pass the call budget together.
    """
    from collection.live_spend import spend_allows_call  # imports the chat model module: only when calling

    if not spend_allows_call(study):
        logger.error("study %s has spent its live-model dollar budget; a live call was refused", study.slug)
        return False
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(), [study.pk])
        claimed = cursor.rowcount
    if not claimed:
        logger.error("study %s has spent its live-model budget; a participant's reply was not fetched", study.slug)
    return claimed == 1
