"""Instructed-response attention checks ("For this question, choose 'No'"), placed in the instrument itself.

A study asks ``Study.attention_checks`` of them per participant: one among the
closing survey's ratings, the rest one per turn among the behaviour questions
of the first turns' answers pages. The instruction is fixed by the row it sits
on (turn or participant), so a refreshed page asks the same thing.

Answers go to ``AttentionCheck`` only, never to an answer table: they are not
data, are never scored and never appear in an export. The quality summary
(``annotation.quality``) flags participants who fail more than the study allows.
"""

from __future__ import annotations

from attunebench import catalogue as cat
from collection.models import AttentionCheck, Participant, Study, Turn

#: Survey checks ask for a number on the 1–7 rating scale; these middle values are never the easy extremes.
SURVEY_VALUES: tuple[str, ...] = ("2", "3", "5", "6")


def _study_checks(participant: Participant | None) -> int:
    study = participant.study if participant is not None else None
    return study.attention_checks if study is not None else 0


def turn_carries_check(checks: int, turn_number: int) -> bool:
    """The placement rule: of a study's ``checks``, turns 1 … checks−1 carry one each, the last is the survey's."""
    return 1 <= turn_number <= checks - 1


def checks_met(study: Study, turns: int) -> int:
    """How many of the study's checks a participant meets who annotates ``turns`` turns and finishes:
    the survey's one, and those of the turns that carry one."""
    wanted = study.attention_checks
    if wanted < 1:
        return 0
    return 1 + sum(turn_carries_check(wanted, number) for number in range(1, turns + 1))


def placement_warning(study: Study) -> str | None:
    """Why some participants would meet fewer checks than the study asks for, or None when all are met.

    A participant may finish after the fewest turns, and the per-turn checks sit on the first turns, so
    checks beyond ``min_turns`` + 1 are missed by whoever stops there (beyond ``max_turns`` + 1, by everyone).
    """
    wanted = study.attention_checks
    surely = checks_met(study, study.min_turns)
    if surely >= wanted:
        return None
    where = "one in the closing survey and one among the behaviour questions of each of the first"
    at_most = checks_met(study, study.max_turns)
    if at_most < wanted:
        return (
            f"The study asks for {wanted} attention checks, but only {at_most} can ever be asked ({where} "
            f"{study.max_turns} turns, the most turns). Lower the attention checks to {at_most}, or raise "
            f"the most turns and the fewest turns to {wanted - 1}."
        )
    return (
        f"The study asks for {wanted} attention checks, placed {where} {wanted - 1} turns, but a participant who "
        f"finishes after the fewest turns ({study.min_turns}) meets only {surely}. Raise the fewest turns to "
        f"{wanted - 1}, or lower the attention checks to {surely}."
    )


def answers_check(turn: Turn) -> str | None:
    """The answer this turn's answers page instructs (a ``YES_NO_NA`` value), or None when it asks no check.

    Turns 1 … n−1 carry one each (n = the study's number; the last goes to the survey).
    """
    participant = turn.conversation.participant
    if not turn_carries_check(_study_checks(participant), turn.turn_number):
        return None
    return cat.YES_NO_NA[(turn.pk or 0) % len(cat.YES_NO_NA)]


def survey_check(participant: Participant) -> str | None:
    """The rating the closing survey's check instructs ("2" … "6"), or None when the study asks none."""
    if _study_checks(participant) < 1:
        return None
    return SURVEY_VALUES[(participant.pk or 0) % len(SURVEY_VALUES)]


def instruction(place: str, instructed: str) -> str:
    """The words of the check, as the participant reads them."""
    shown = cat.YES_NO_NA_LABELS[instructed] if place == AttentionCheck.Place.ANSWERS else instructed
    return f"To show you are reading carefully, please choose \u2018{shown}\u2019 for this question."


def do_record_check(participant: Participant, turn: Turn | None, instructed: str, given: str) -> None:
    """Store a check's answer (an unanswered check is a failed one). The first answer stands: a repeated
    or concurrent submission of the same page changes nothing.

    One statement, INSERT ... ON CONFLICT DO NOTHING: the table's unique constraints (one check per turn,
    one survey check per participant) decide whether an answer is already stored.
    """
    place = AttentionCheck.Place.ANSWERS if turn is not None else AttentionCheck.Place.SURVEY
    check = AttentionCheck(
        participant=participant, turn=turn, place=place, instructed=instructed, given=given, passed=given == instructed
    )
    AttentionCheck.objects.bulk_create([check], ignore_conflicts=True)
