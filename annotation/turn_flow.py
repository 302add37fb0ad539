"""The per-turn annotation a participant gives after each model reply (SPEC 2.1–2.3).

Three pages per turn, in order: *answers* (mood-shift tags and the behaviour
questions, on one page beside the message and reply) → *rewrite* (the improved
rewrite, the participant's own "golden" reply and the preference questions to
answer) → *compare* (every chosen comparison on one page). As with the study
steps, the page is derived from stored rows: mood tags and behaviour-question
rows are written together when the answers page is saved, and comparison rows
(with their randomised A/B positions) when the questions are chosen, so a
refresh shows exactly the same questions and positions.

Until the participant sends their next message, the turn's answers can be
reviewed and changed (``can_review`` / ``do_revise_answers``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core import signing
from django.db import transaction
from django.db.models import Case, CharField, F, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.alternates import improved_reply
from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
from annotation.sampling import sample_question_ids
from attunebench import catalogue as cat
from collection import safety
from collection.models import Conversation, Study, Turn

ANSWERS = "answers"
REWRITE = "rewrite"
COMPARE = "compare"
FINISHED = "finished"

#: Every pair of the three candidate replies is compared once per chosen question.
REPLY_PAIRS: tuple[tuple[str, str], ...] = (
    (cat.RESPONSE_ORIGINAL, cat.RESPONSE_ALTERNATE),
    (cat.RESPONSE_ORIGINAL, cat.RESPONSE_HUMAN),
    (cat.RESPONSE_ALTERNATE, cat.RESPONSE_HUMAN),
)

_positions = random.SystemRandom()


@dataclass(frozen=True)
class AnnotationPosition:
    step: str

    @property
    def key(self) -> str:
        """Identifies the page a form was rendered for (stale or double submissions are ignored)."""
        return self.step


def study_of_turn(turn: Turn) -> Study:
    participant = turn.conversation.participant
    study = participant.study if participant is not None else None
    if study is None:  # participants reach a turn only through a study link
        raise ValueError(f"turn {turn.pk} belongs to no study")
    return study


def asked_question_ids(turn: Turn) -> list[str]:
    """The behaviour questions this turn asks (read only).

    Once saved, the stored rows; before that, the study's next window of the
    rotation (SPEC 2.2 sampling, ``annotation.sampling``). The page carries the
    ids it showed (``shown_token``), so what is saved is what was shown.
    """
    stored = [j.question_id for j in turn.binary_judgements.all()]  # in position order (the model's ordering)
    if stored:
        return stored
    study = study_of_turn(turn)
    asked_before = (
        BinaryJudgement.objects.filter(turn__conversation__participant__study=study).count()
        if 0 < study.binary_sample_size < len(cat.BINARY_QUESTION_IDS)
        else 0  # everything is asked: no need to count
    )
    return sample_question_ids(asked_before, study.binary_sample_size)


def same_text(first: str, second: str) -> bool:
    """Two replies a participant could not tell apart: equal once runs of whitespace are ignored."""
    return " ".join(first.split()) == " ".join(second.split())


def skipped_pairs(turn: Turn, question_id: str) -> list[dict[str, str]]:
    """The comparisons of ``question_id`` that were skipped because both texts were identical."""
    return [s for s in turn.skipped_comparisons if s.get("questionId") == question_id]


def compare_questions(turn: Turn) -> list[str]:
    """The chosen questions that have at least one comparison to ask (the others were all identical pairs)."""
    return [q for q in turn.selected_pairwise_questions if len(skipped_pairs(turn, q)) < len(REPLY_PAIRS)]


def answers_saved(turn: Turn) -> bool:
    """The answers page is saved: every asked question has both answers."""
    rows = list(turn.binary_judgements.all())
    return bool(rows) and all(j.observed is not None and j.preferred is not None for j in rows)


def locate_annotation(turn: Turn) -> AnnotationPosition:
    """The annotation page ``turn`` is on, from stored rows only."""
    if turn.annotation_completed_at is not None or turn.skipped_for_wellbeing:
        return AnnotationPosition(FINISHED)
    if not answers_saved(turn):
        return AnnotationPosition(ANSWERS)
    alternates = turn_alternates(turn)
    if alternates is None or not alternates.human_edited.strip() or not turn.selected_pairwise_questions:
        return AnnotationPosition(REWRITE)
    if PairwiseComparison.objects.filter(turn=turn, winner__isnull=True).exists():
        return AnnotationPosition(COMPARE)
    return AnnotationPosition(FINISHED)


def can_review(turn: Turn) -> bool:
    """A turn's saved answers may be changed until the participant sends the next message (or ends the chat)."""
    return (
        answers_saved(turn)
        and turn.conversation.status == Conversation.Status.IN_PROGRESS
        and not Turn.objects.filter(conversation_id=turn.conversation_id, turn_number__gt=turn.turn_number).exists()
    )


_SHOWN_SALT = "attune.annotation.shown"


def shown_token(turn: Turn, asked: list[str]) -> str:
    """A signed note of when the answers page of ``turn`` was shown and which questions it asked.

    (A refreshed page carries the time of the copy the participant answers.)

    Showing a page writes nothing; the note reaches the database with the
    participant's answers (``do_save_answers``), and the signature keeps it
    from being forged or moved to another turn.
    """
    return signing.dumps(
        {"turn": turn.pk, "at": timezone.now().timestamp(), "asked": asked}, salt=_SHOWN_SALT, compress=True
    )


def _read_shown(turn: Turn, shown: str) -> dict[str, object] | None:
    try:
        note = signing.loads(shown, salt=_SHOWN_SALT)
    except signing.BadSignature:
        return None
    return note if isinstance(note, dict) and note.get("turn") == turn.pk else None


def questions_shown(turn: Turn, shown: str) -> list[str]:
    """The questions the submitted page showed: stored rows win, then the page's signed note, else a fresh sample."""
    stored = [j.question_id for j in turn.binary_judgements.all()]  # in position order (the model's ordering)
    if stored:
        return stored
    note = _read_shown(turn, shown)
    asked = note.get("asked") if note else None
    if isinstance(asked, list) and asked and all(qid in cat.BINARY_QUESTIONS_BY_ID for qid in asked):
        return [qid for qid in cat.BINARY_QUESTION_IDS if qid in set(asked)]
    return asked_question_ids(turn)


def _started_at(turn: Turn, shown: str) -> datetime:
    """When the answers page of ``turn`` was first shown: its valid ``shown_token``, else now."""
    started = timezone.now()
    note = _read_shown(turn, shown)
    if note is not None and isinstance(note.get("at"), int | float):
        started = min(started, datetime.fromtimestamp(float(note["at"]), tz=UTC))  # type: ignore[arg-type]
    return started


def do_start_annotation(turn: Turn, shown: str = "") -> None:
    """Record when the participant first saw the annotation for this turn (for timing analyses).

    ``shown`` is the page's ``shown_token``; without a valid one for this turn
    (an old tab, a tampered form) the time of the answer stands in. The first
    record is kept.
    """
    started = _started_at(turn, shown)
    Turn.objects.filter(pk=turn.pk, annotation_started_at__isnull=True).update(annotation_started_at=started)


def _write_answers(
    turn: Turn,
    tags: list[tuple[str, int | None]],
    answers: dict[str, tuple[str, str]],
    asked: list[str],
    marked: bool = False,
) -> None:
    """Replace the mood tags and store the behaviour answers (inside the caller's transaction, turn locked;
    ``marked``: the caller has already set the turn's ``mood_answered``)."""
    if not marked:
        Turn.objects.filter(pk=turn.pk).update(mood_answered=True)  # from now on no tags means "no change"
    MoodTag.objects.filter(turn=turn).delete()
    MoodTag.objects.bulk_create(
        [
            MoodTag(turn=turn, position=i, emotion=emotion, intensity=intensity)
            for i, (emotion, intensity) in enumerate(tags)
        ]
    )
    # Two statements whatever the number of questions: answered rows are inserted or, when the page is
    # saved again, updated in place (one INSERT .. ON CONFLICT on Postgres and SQLite alike); asked rows
    # without an answer are inserted only if missing, so an earlier answer is never blanked.
    position = {qid: i for i, qid in enumerate(asked)}
    BinaryJudgement.objects.bulk_create(
        [
            BinaryJudgement(
                turn=turn,
                position=position[qid],
                question_id=qid,
                observed=observed,
                preferred=preferred,
            )
            for qid, (observed, preferred) in answers.items()
            if qid in position  # an answer to a question this turn did not ask is not stored
        ],
        update_conflicts=True,
        unique_fields=["turn", "question_id"],
        update_fields=["observed", "preferred"],
    )
    BinaryJudgement.objects.bulk_create(
        [BinaryJudgement(turn=turn, position=i, question_id=qid) for i, qid in enumerate(asked) if qid not in answers],
        ignore_conflicts=True,
    )


def do_save_answers(
    turn: Turn,
    tags: list[tuple[str, int | None]],
    answers: dict[str, tuple[str, str]],
    asked: list[str],
    shown: str = "",
) -> None:
    """Store the answers page: mood tags (empty = "no change") and every asked question's two answers, and
    when the page was first shown (``do_start_annotation``).

    The asked questions are recorded as the turn's judgement rows. A double
    submit leaves one set of rows: the turn's row lock makes a second identical
    request wait for the first (on SQLite the immediate transaction serialises
    writers the same way), and rows already there are updated, not re-inserted.
    The improved reply is not made here (a model call would hold this request):
    it is prepared off the request path once the reply is stored
    (``annotation.tasks.prepare_rewrite``); the rewrite page waits for it, and
    the answers view queues it again if it is not there yet
    (``tasks.queue_rewrite_if_missing``).
    """
    with transaction.atomic():
        # One UPDATE locks the turn's row (a second identical request waits here), marks its mood as answered
        # (from now on no tags means "no change") and records when the page was first shown (the first
        # record is kept; ``shown``: the page's ``shown_token``, as ``do_start_annotation``).
        Turn.objects.filter(pk=turn.pk).update(
            mood_answered=True,
            annotation_started_at=Coalesce(F("annotation_started_at"), Value(_started_at(turn, shown))),
        )
        _write_answers(turn, tags, answers, asked, marked=True)
        safety.do_screen_annotation(turn, tags, answers)


def do_revise_answers(
    turn: Turn, tags: list[tuple[str, int | None]], answers: dict[str, tuple[str, str]], winners: dict[int, str]
) -> bool:
    """Change a turn's saved answers (mood, behaviour answers, comparison winners) while ``can_review`` holds.

    Returns False, changing nothing, once the next message exists (checked under the turn's lock).
    """
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if not can_review(locked):
            return False
        asked = list(locked.binary_judgements.values_list("question_id", flat=True))
        revised = {q: a for q, a in answers.items() if q in asked}
        _write_answers(locked, tags, revised, asked)
        safety.do_screen_annotation(locked, tags, revised)
        for position, winner in winners.items():
            PairwiseComparison.objects.filter(turn=locked, position=position, winner__isnull=False).update(
                winner=winner
            )
    return True


def turn_alternates(turn: Turn) -> AlternateResponses | None:
    """The turn's rewrite row, or None before one is made.

    Read through the one-to-one accessor, so Django keeps the row (or its absence) on this turn instance:
    a rewrite or compare request asks for it two or three times (where the turn is, the rewrite, the
    replies to compare) and pays one query. Each write that changes the row (``ensure_alternates``,
    ``do_save_rewrite``) sets it on the caller's turn again.
    """
    try:
        return turn.alternates
    except AlternateResponses.DoesNotExist:
        return None


def prepared_rewrite(turn: Turn) -> AlternateResponses | None:
    """The turn's rewrite row when its improved reply exists (read only; None when not yet prepared)."""
    alternates = turn_alternates(turn)
    return alternates if alternates is not None and alternates.llm_improved else None


def prepare_rewrite(turn_pk: int) -> bool:
    """Make the suggested rewrite of a turn's reply unless it exists; True when this call made it.

    Idempotent (a second call, or a race with the page's continue button, keeps the first rewrite). A turn
    without a reply, or one that no longer exists (its participant withdrew), has nothing to rewrite.
    """
    turn = (
        Turn.objects.select_related("conversation__participant__study", "conversation__original_model")
        .filter(pk=turn_pk)
        .first()
    )
    if turn is None or not turn.llm_response:
        return False
    if prepared_rewrite(turn) is not None:
        return False
    ensure_alternates(turn)
    return True


def ensure_alternates(turn: Turn) -> AlternateResponses:
    """The turn's rewrite row, generating the improved reply the first time it is needed (an action: POST only).

    Generation happens outside any transaction (a live call may take seconds);
    the conditional update keeps the first rewrite if two requests race.
    """
    alternates, _ = AlternateResponses.objects.get_or_create(turn=turn)
    if not alternates.llm_improved:
        text = improved_reply(turn)
        AlternateResponses.objects.filter(pk=alternates.pk, llm_improved="").update(
            llm_improved=text, improved_generated_at=timezone.now()
        )
        alternates.refresh_from_db()
    turn.alternates = alternates  # later reads in this request see the row as it is now
    return alternates


def do_save_rewrite(turn: Turn, golden: str, question_ids: list[str]) -> None:
    """Store the participant's own reply and the chosen questions, creating their comparisons.

    Each chosen question compares every pair of replies, in randomised A/B positions.
    Once questions are chosen the comparisons exist, so a repeat submission changes nothing.
    A pair whose two replies have the same text (say, the participant kept the
    suggested rewrite as their ideal reply) is never asked: no comparison row is
    made, and the turn records it in ``skipped_comparisons``. When nothing is
    left to ask, the turn's annotation is complete at once.
    """
    ordered = [qid for qid in cat.PAIRWISE_QUESTION_IDS if qid in question_ids]
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.selected_pairwise_questions:
            return  # already chosen: a repeat submission changes nothing
        AlternateResponses.objects.filter(turn=locked).update(human_edited=golden)
        # The caller's copy of the row, when it has one, is the row but for the ideal reply just saved (the
        # suggested rewrite never changes once made): no need to read it again.
        known = turn._state.fields_cache.get("alternates")
        if known is not None and known.llm_improved:
            known.human_edited = golden
            locked.alternates = known
        texts = reply_texts(locked)  # with the ideal reply just saved
        saved = turn_alternates(locked)
        if saved is not None:
            turn.alternates = saved  # the caller's turn sees the ideal reply too, as after ensure_alternates
        rows: list[PairwiseComparison] = []
        skipped: list[dict[str, str]] = []
        for question_id in ordered:
            for first, second in REPLY_PAIRS:
                if same_text(texts[first], texts[second]):
                    skipped.append(
                        {"questionId": question_id, "responseA": first, "responseB": second, "reason": "identical"}
                    )
                    continue
                a, b = (first, second) if _positions.random() < 0.5 else (second, first)
                rows.append(
                    PairwiseComparison(
                        turn=locked, position=len(rows), question_id=question_id, response_a=a, response_b=b
                    )
                )
        PairwiseComparison.objects.bulk_create(rows)
        locked.selected_pairwise_questions = ordered
        locked.skipped_comparisons = skipped
        fields = ["selected_pairwise_questions", "skipped_comparisons"]
        if not rows and locked.annotation_completed_at is None:
            locked.annotation_completed_at = timezone.now()
            locked.completeness = cat.TURN_COMPLETE
            fields += ["annotation_completed_at", "completeness"]
        locked.save(update_fields=fields)


def do_save_comparisons(turn: Turn, winners: dict[int, str], open_positions: set[int] | None = None) -> None:
    """Store winners by comparison position; completes the turn's annotation when none is left open.

    ``open_positions``: the comparisons still without a winner, when the caller has just read them (the page
    it answers lists them); None reads them here.
    """
    with transaction.atomic():
        if winners:  # one statement for all of them (a turn can have nine comparisons)
            chosen = Case(*(When(position=p, then=Value(w)) for p, w in winners.items()), output_field=CharField())
            PairwiseComparison.objects.filter(turn=turn, position__in=list(winners)).update(winner=chosen)
        if open_positions is not None:
            left_open = not open_positions <= set(winners)
        else:
            left_open = PairwiseComparison.objects.filter(turn=turn, winner__isnull=True).exists()
        if not left_open:
            Turn.objects.filter(pk=turn.pk, annotation_completed_at__isnull=True).update(
                annotation_completed_at=timezone.now(), completeness=cat.TURN_COMPLETE
            )


def reply_texts(turn: Turn) -> dict[str, str]:
    """Label -> text of the three candidate replies."""
    alternates = turn_alternates(turn)
    return {
        cat.RESPONSE_ORIGINAL: turn.llm_response,
        cat.RESPONSE_ALTERNATE: alternates.llm_improved if alternates else "",
        cat.RESPONSE_HUMAN: alternates.human_edited if alternates else "",
    }
