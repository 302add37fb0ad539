"""The per-turn annotation a participant gives after each model reply (SPEC 2.1–2.3).

Sub-steps, in order: mood-shift tags → behaviour questions (one page per
category) → the improved rewrite and the participant's own "golden" reply →
choosing pairwise questions → one comparison page per chosen question. As with
the study steps, the sub-step is derived from stored rows: behaviour-question
rows are created (unanswered) when the mood step is saved, and comparison rows
(with their randomised A/B positions) when the questions are chosen, so a
refresh shows exactly the same questions and positions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core import signing
from django.db import transaction
from django.utils import timezone

from annotation.alternates import improved_reply
from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
from annotation.sampling import pages_by_category, sample_question_ids
from attunebench import catalogue as cat
from collection.models import Turn

MOOD = "mood"
BINARY = "binary"
REWRITE = "rewrite"
CHOOSE = "choose"
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
    page: int = 0  # behaviour page or comparison question index, 0-based
    page_count: int = 1

    @property
    def key(self) -> str:
        """Identifies the sub-step a form was rendered for (stale or double submissions are ignored)."""
        return f"{self.step}:{self.page}"


def binary_pages(turn: Turn) -> list[tuple[str, list[cat.BinaryQuestion]]]:
    asked = [j.question_id for j in turn.binary_judgements.all()]
    return pages_by_category(asked)


def same_text(first: str, second: str) -> bool:
    """Two replies a participant could not tell apart: equal once runs of whitespace are ignored."""
    return " ".join(first.split()) == " ".join(second.split())


def skipped_pairs(turn: Turn, question_id: str) -> list[dict[str, str]]:
    """The comparisons of ``question_id`` that were skipped because both texts were identical."""
    return [s for s in turn.skipped_comparisons if s.get("questionId") == question_id]


def compare_questions(turn: Turn) -> list[str]:
    """The chosen questions that have at least one comparison to ask (the others were all identical pairs)."""
    return [q for q in turn.selected_pairwise_questions if len(skipped_pairs(turn, q)) < len(REPLY_PAIRS)]


def locate_annotation(turn: Turn) -> AnnotationPosition:
    """The annotation sub-step ``turn`` is on, from stored rows only."""
    if turn.annotation_completed_at is not None:
        return AnnotationPosition(FINISHED)
    judgements = {j.question_id: j for j in turn.binary_judgements.all()}
    if not judgements:
        return AnnotationPosition(MOOD)
    pages = pages_by_category(list(judgements))
    for index, (_, questions) in enumerate(pages):
        if any(judgements[q.id].observed is None or judgements[q.id].preferred is None for q in questions):
            return AnnotationPosition(BINARY, index, len(pages))
    alternates = AlternateResponses.objects.filter(turn=turn).first()
    if alternates is None or not alternates.human_edited.strip():
        return AnnotationPosition(REWRITE)
    if not turn.selected_pairwise_questions:
        return AnnotationPosition(CHOOSE)
    selected = compare_questions(turn)
    open_questions = set(
        PairwiseComparison.objects.filter(turn=turn, winner__isnull=True).values_list("question_id", flat=True)
    )
    for index, question_id in enumerate(selected):
        if question_id in open_questions:
            return AnnotationPosition(COMPARE, index, len(selected))
    return AnnotationPosition(FINISHED)


_SHOWN_SALT = "attune.annotation.shown"


def shown_token(turn: Turn) -> str:
    """A signed note of when the first annotation page of ``turn`` was shown, carried by its form.

    (A refreshed page carries the time of the copy the participant answers.)

    Showing a page writes nothing; the time reaches the database with the
    participant's first answer (``do_start_annotation``), and the signature keeps
    it from being forged or moved to another turn.
    """
    return signing.dumps({"turn": turn.pk, "at": timezone.now().timestamp()}, salt=_SHOWN_SALT, compress=True)


def do_start_annotation(turn: Turn, shown: str = "") -> None:
    """Record when the participant first saw the annotation for this turn (for timing analyses).

    ``shown`` is the page's ``shown_token``; without a valid one for this turn
    (an old tab, a tampered form) the time of the answer stands in. The first
    record is kept.
    """
    started = timezone.now()
    try:
        note = signing.loads(shown, salt=_SHOWN_SALT)
    except signing.BadSignature:
        note = None
    if isinstance(note, dict) and note.get("turn") == turn.pk and isinstance(note.get("at"), int | float):
        started = min(started, datetime.fromtimestamp(note["at"], tz=UTC))
    Turn.objects.filter(pk=turn.pk, annotation_started_at__isnull=True).update(annotation_started_at=started)


def do_save_mood(turn: Turn, tags: list[tuple[str, int | None]], binary_sample_size: int) -> None:
    """Replace the turn's mood tags (empty = "no change") and set up its behaviour questions.

    A double submit must leave one set of rows and answer normally: the turn's
    row lock makes a second identical request wait for the first and then
    replace its tags (on SQLite the immediate transaction serialises writers the
    same way), and questions already set up are skipped rather than re-inserted.
    """
    with transaction.atomic():
        Turn.objects.select_for_update().get(pk=turn.pk)
        Turn.objects.filter(pk=turn.pk).update(mood_answered=True)  # from now on no tags means "no change"
        MoodTag.objects.filter(turn=turn).delete()
        MoodTag.objects.bulk_create(
            [
                MoodTag(turn=turn, position=i, emotion=emotion, intensity=intensity)
                for i, (emotion, intensity) in enumerate(tags)
            ]
        )
        asked = sample_question_ids(turn.conversation.conversation_id, turn.turn_number, binary_sample_size)
        existing = set(BinaryJudgement.objects.filter(turn=turn).values_list("question_id", flat=True))
        BinaryJudgement.objects.bulk_create(
            [
                BinaryJudgement(turn=turn, position=i, question_id=qid)
                for i, qid in enumerate(asked)
                if qid not in existing
            ],
            ignore_conflicts=True,
        )


def do_save_binary_answers(turn: Turn, answers: dict[str, tuple[str, str]]) -> None:
    """Store (observed, preferred) for the questions on one page; after the last page, prepare the rewrite.

    The improved reply is made here, in the answer that leads to the rewrite
    page, so that showing that page only reads (no row created, no model called).
    """
    with transaction.atomic():
        for question_id, (observed, preferred) in answers.items():
            BinaryJudgement.objects.filter(turn=turn, question_id=question_id).update(
                observed=observed, preferred=preferred
            )
    if locate_annotation(turn).step == REWRITE:
        ensure_alternates(turn)


def prepared_rewrite(turn: Turn) -> AlternateResponses | None:
    """The turn's rewrite row when its improved reply exists (read only; None when not yet prepared)."""
    alternates = AlternateResponses.objects.filter(turn=turn).first()
    return alternates if alternates is not None and alternates.llm_improved else None


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
    return alternates


def do_save_golden_reply(turn: Turn, text: str) -> None:
    AlternateResponses.objects.filter(turn=turn).update(human_edited=text)


def do_select_pairwise_questions(turn: Turn, question_ids: list[str]) -> None:
    """Store the chosen questions and create their comparisons with randomised A/B positions.

    A pair whose two replies have the same text (say, the participant kept the
    suggested rewrite as their ideal reply) is never asked: no comparison row is
    made, and the turn records it in ``skipped_comparisons``. When nothing is
    left to ask, the turn's annotation is complete at once.
    """
    ordered = [qid for qid in cat.PAIRWISE_QUESTION_IDS if qid in question_ids]
    texts = reply_texts(turn)
    with transaction.atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.selected_pairwise_questions:
            return  # already chosen: a repeat submission changes nothing
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
            fields.append("annotation_completed_at")
        locked.save(update_fields=fields)


def do_save_comparisons(turn: Turn, winners: dict[int, str]) -> None:
    """Store winners by comparison position; completes the turn's annotation when none is left open."""
    with transaction.atomic():
        for position, winner in winners.items():
            PairwiseComparison.objects.filter(turn=turn, position=position).update(winner=winner)
        if not PairwiseComparison.objects.filter(turn=turn, winner__isnull=True).exists():
            Turn.objects.filter(pk=turn.pk, annotation_completed_at__isnull=True).update(
                annotation_completed_at=timezone.now(), completeness=cat.TURN_COMPLETE
            )


def reply_texts(turn: Turn) -> dict[str, str]:
    """Label -> text of the three candidate replies."""
    alternates = AlternateResponses.objects.filter(turn=turn).first()
    return {
        cat.RESPONSE_ORIGINAL: turn.llm_response,
        cat.RESPONSE_ALTERNATE: alternates.llm_improved if alternates else "",
        cat.RESPONSE_HUMAN: alternates.human_edited if alternates else "",
    }
