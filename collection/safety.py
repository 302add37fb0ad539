"""The distress protocol: what the platform does when a participant may be at risk, whatever the model says.

Participants talk about what weighs on them, and the model under study is the
last thing to rely on when one of them is in crisis. So every message is
screened by Attune itself (``attunebench.safety``, offline rules) as soon as it
is saved, before the reply is shown:

- ``urgent`` (intent, plan, means or timeframe; harm to others): a calm panel
  under the message with the study's support resources and three choices:
  pause (come back later with the personal link), stop (with the study's
  wellbeing completion code, so nobody loses pay for stopping) or continue.
  The questions about that reply wait until they have chosen.
- ``concern`` (hopelessness, passive thoughts of death, being harmed): the
  resources appear under the message once, without interrupting.

A deployment may add a moderation model (``collection.safety_model``): it can only add detections, and
when it fails the offline screen stands alone. Either way a ``SafetyEvent`` is logged for the research team (never the
participant's words: those stay in the turn), the conversation is flagged on
the study's pages, and the safety contact is emailed (urgent always, concern
when the study asks) once the event is committed. Flagged conversations are
never excluded because of it. Nothing here diagnoses or alarms: the wording
is the study's resources and plain choices.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from attunebench.safety import Screening, annotation_screening
from collection import safety_model
from collection.models import Conversation, Participant, SafetyEvent, Study, Turn

NOT_SENT_YET = "not sent yet: the task queue was unreachable; a worker sends it when the queue is back"
logger = logging.getLogger("attune.safety")


class SafetyChoiceRefused(Exception):
    """The choice cannot be recorded (another event, or already chosen); ``str()`` says why."""


def _should_notify(study: Study | None, level: str) -> bool:
    if study is None or not study.safety_contact_email:
        return False
    return level == SafetyEvent.Level.URGENT or study.safety_notify_concern


def do_record_screening(
    participant: Participant, screening: Screening, source: str, turn: Turn | None = None
) -> SafetyEvent | None:
    """Log what the screen found (nothing for ``none``) and queue the safety contact's email after commit."""
    if screening.level == "none":
        return None
    level = SafetyEvent.Level(screening.level)
    # The panel and its choices follow a chat message; elsewhere (the closing survey) the resources are shown.
    panel = level == SafetyEvent.Level.URGENT and source == SafetyEvent.Source.MESSAGE and turn is not None
    with transaction.atomic():
        event = SafetyEvent.objects.create(
            study_id=participant.study_id,
            participant=participant,
            turn=turn,
            level=level,
            source=source,
            signals=sorted({d.signal for d in screening.detections}),
            shown=SafetyEvent.Shown.PANEL if panel else SafetyEvent.Shown.RESOURCES,
        )
        hold = panel
        Participant.objects.filter(pk=participant.pk).update(
            safety_flagged=True, **({"safety_hold": True} if hold else {})
        )
        participant.safety_flagged = True
        participant.safety_hold = participant.safety_hold or hold
        logger.warning(
            "safety: %s signal (%s) from participant %s in study %s; event %s",
            level,
            ", ".join(event.signals),
            participant.pseudonym,
            participant.study.slug if participant.study else "-",
            event.pk,
        )
        if _should_notify(participant.study, level):
            event_pk = event.pk
            transaction.on_commit(lambda: _queue_notification(event_pk))
    return event


def _queue_notification(event_pk: int) -> None:
    """Queue the safety contact's email; when the queue cannot take it, say so on the event and in the log."""
    from collection.task_queue import enqueue
    from collection.tasks import notify_safety_contact

    try:
        if not enqueue(notify_safety_contact, event_pk):  # kept: a worker sends it when the broker is back
            SafetyEvent.objects.filter(pk=event_pk, notified_at__isnull=True).update(notify_error=NOT_SENT_YET)
    except Exception as exc:  # the task itself failed in this process (no broker): the flag still stands
        SafetyEvent.objects.filter(pk=event_pk).update(notify_error=f"not queued: {type(exc).__name__}"[:300])
        logger.error("safety: could not queue the safety contact's email for event %s: %s", event_pk, exc)


def do_screen_message(turn: Turn) -> SafetyEvent | None:
    """Screen a chat message just saved; called before the reply is shown."""
    participant = turn.conversation.participant
    if participant is None:  # imported conversations have no one to look after
        return None
    return do_record_screening(participant, safety_model.screen(turn.user_message), SafetyEvent.Source.MESSAGE, turn)


def do_screen_annotation(
    turn: Turn, tags: list[tuple[str, int | None]], answers: dict[str, tuple[str, str]]
) -> SafetyEvent | None:
    """The participant's own answers about a reply as signals: a distress tag at 6 or 7, or wanting to be
    pointed to safety help (B18, preferred). Logged (and the resources shown on the chat page) like a
    concern found in a message; one event per turn, however often the page is sent."""
    participant = turn.conversation.participant
    screening = annotation_screening(tags, answers)
    if participant is None or screening.level == "none":  # the usual case asks the database nothing
        return None
    if SafetyEvent.objects.filter(turn=turn, source=SafetyEvent.Source.ANNOTATION).exists():
        return None
    return do_record_screening(participant, screening, SafetyEvent.Source.ANNOTATION, turn)


def do_screen_free_text(participant: Participant, texts: list[str], turn: Turn | None = None) -> SafetyEvent | None:
    """Screen the participant's free-text answers in their own voice (the closing survey's comment and own
    words); concern and urgent alike are logged, flagged and emailed, and the thank-you page shows the
    resources. The ideal reply is not screened: it is written in the model's voice, to the participant."""
    joined = "\n".join(t for t in texts if t and t.strip())
    if not joined:
        return None
    return do_record_screening(participant, safety_model.screen(joined), SafetyEvent.Source.FREE_TEXT, turn)


def events_by_turn(conversation: Conversation, turns: Sequence[Turn] | None = None) -> dict[int, SafetyEvent]:
    """What the chat page shows under each flagged message (by turn id): every urgent panel, and the resources
    for the first concern only, so they appear once without interrupting. No query for an unflagged participant.

    ``turns``, the conversation's turns in order when the caller has them: the events are then read by turn id
    and put in that order here, without joining and ordering the turns in the database.
    """
    shown: dict[int, SafetyEvent] = {}
    if conversation.participant is None or not conversation.participant.safety_flagged:
        return shown
    concern_shown = False
    events: Iterable[SafetyEvent]
    if turns is None:
        events = SafetyEvent.objects.filter(turn__conversation=conversation, turn__isnull=False).order_by(
            "turn__turn_number", "created_at"
        )
    else:
        order = {turn.pk: turn.turn_number for turn in turns}
        found = SafetyEvent.objects.filter(turn_id__in=list(order))
        events = sorted(found, key=lambda event: (order[event.turn_id or 0], event.created_at))
    for event in events:
        assert event.turn_id is not None
        if event.level == SafetyEvent.Level.URGENT:
            shown[event.turn_id] = event
        elif not concern_shown and event.turn_id not in shown:
            shown[event.turn_id] = event
            concern_shown = True
    return shown


def do_choose(participant: Participant, event_id: int, choice: str) -> SafetyEvent:
    """Record the participant's choice on an urgent panel; stopping ends their part in the study, data kept;
    skipping lets them go on without the questions about that reply.

    Claimed with a conditional update, so a double click or a second tab records one choice only.
    """
    if choice not in SafetyEvent.Choice.values:
        raise SafetyChoiceRefused("Please choose to pause, stop or continue.")
    now = timezone.now()
    with transaction.atomic():
        panels = SafetyEvent.objects.filter(participant=participant, shown=SafetyEvent.Shown.PANEL)
        claimed = panels.filter(pk=event_id, choice="").update(choice=choice, chosen_at=now)
        event = panels.filter(pk=event_id).first()
        if event is None:
            raise SafetyChoiceRefused("This message is not yours to answer.")
        if claimed:  # the panel is answered: nothing waits for it any more
            still_open = panels.filter(choice="").exists()
            Participant.objects.filter(pk=participant.pk).update(safety_hold=still_open)
        if claimed and choice == SafetyEvent.Choice.STOP:
            Participant.objects.filter(pk=participant.pk, stopped_at__isnull=True).update(stopped_at=now)
        if claimed and choice == SafetyEvent.Choice.SKIP and event.turn_id is not None:
            # Going on without the questions about that reply costs the participant nothing: the turn needs
            # no annotation and quality control leaves it out (annotation.quality).
            Turn.objects.filter(pk=event.turn_id, annotation_completed_at__isnull=True).update(
                skipped_for_wellbeing=True
            )
    return event


def wellbeing_code(participant: Participant) -> str:
    """The code a participant who stopped for their wellbeing is given: the study's, else their own."""
    study = participant.study
    return (study.wellbeing_completion_code if study else "") or participant.completion_code


def support_resources(study: Study | Any) -> list[tuple[str, str]]:
    """(country, resources) pairs to show, the study's crisis resources first."""
    pairs: list[tuple[str, str]] = [("", str(getattr(study, "crisis_resources", "") or ""))]
    extra = getattr(study, "support_resources", None) or {}
    if isinstance(extra, dict):
        pairs += [(str(country), str(text)) for country, text in sorted(extra.items()) if str(text).strip()]
    return [(country, text) for country, text in pairs if text.strip()]
