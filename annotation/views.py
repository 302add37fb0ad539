"""The per-turn annotation pages: one URL per turn that always shows the turn's current page, and a review page.

Each form carries the key of the page it was rendered for; a submission for any
other page (double click, an old tab, the back button) changes nothing and
simply shows the current page again. Three pages per turn (answers, rewrite,
compare): with the chat page, at most four page loads per turn.
"""

from __future__ import annotations

from typing import Any

from django.db.models import prefetch_related_objects
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from annotation import turn_flow as tf
from annotation.forms import AnswersForm, CompareForm, ReviewForm, RewriteForm
from annotation.models import MoodTag, PairwiseComparison
from annotation.page_times import do_record_page_time, page_stamp
from annotation.tasks import queue_rewrite_if_missing
from attunebench import catalogue as cat
from collection import attention
from collection import page_safety as ps
from collection import study_flow as flow
from collection.models import Participant, Turn
from collection.views import bound_form, page_context, render_withdrawn, stale_page, to_current_step

SECTIONS: tuple[tuple[str, str], ...] = (
    (tf.ANSWERS, "Your feelings and what the reply did"),
    (tf.REWRITE, "Your ideal reply"),
    (tf.COMPARE, "Comparing replies"),
)


#: Where the ideal reply may start from (``?start=`` on the rewrite page; the script does the same without a reload).
START_CHOICES = ("empty", "original", "rewrite")

#: Why a pair is missing from the comparison page (its two replies had the same text).
SKIPPED_NOTES: dict[frozenset[str], str] = {
    frozenset((cat.RESPONSE_ORIGINAL, cat.RESPONSE_ALTERNATE)): "the model\u2019s reply and the suggested rewrite",
    frozenset((cat.RESPONSE_ORIGINAL, cat.RESPONSE_HUMAN)): "the model\u2019s reply and your ideal reply",
    frozenset((cat.RESPONSE_ALTERNATE, cat.RESPONSE_HUMAN)): "the suggested rewrite and your ideal reply",
}


def _skipped_notes(turn: Turn) -> list[str]:
    """One line per pair of identical replies that was never asked (the same pair for every question)."""
    notes: list[str] = []
    for s in turn.skipped_comparisons:
        note = SKIPPED_NOTES[frozenset((s["responseA"], s["responseB"]))]
        if note not in notes:
            notes.append(note)
    return notes


def _questions(ids: list[str]) -> list[cat.BinaryQuestion]:
    return [cat.BINARY_QUESTIONS_BY_ID[qid] for qid in ids]


def _saved_answers(turn: Turn) -> dict[str, str]:
    """The turn's stored answers as form data (to show them again for review or after a partial save)."""
    initial: dict[str, str] = {}
    # mood tags are written with the answers, which mark the mood answered first: none before that
    for tag in MoodTag.objects.filter(turn=turn) if turn.mood_answered else ():
        initial[f"mood_{tag.emotion}"] = "on"
        if tag.intensity:
            initial[f"intensity_{tag.emotion}"] = str(tag.intensity)
    for j in turn.binary_judgements.all():
        if j.observed:
            initial[f"observed_{j.question_id}"] = j.observed
        if j.preferred:
            initial[f"preferred_{j.question_id}"] = j.preferred
    if any(k.startswith("observed_") for k in initial) and not any(k.startswith("mood_") for k in initial):
        initial["no_change"] = "on"  # answers saved with no mood tag: "no change" was chosen
    return initial


def _pairs(turn: Turn, form: Any, comparisons: list[PairwiseComparison]) -> list[tuple[str, list[Any]]]:
    """[(question text, [(number, text A, text B, field)])] grouped by question, in the order chosen."""
    texts = tf.reply_texts(turn)
    groups: list[tuple[str, list[Any]]] = []
    current = None
    for c in comparisons:
        if c.question_id != current:
            current = c.question_id
            groups.append((cat.PAIRWISE_QUESTIONS.get(c.question_id, c.question_id), []))
        pairs = groups[-1][1]
        pairs.append((len(pairs) + 1, texts[c.response_a], texts[c.response_b], form[f"winner_{c.position}"]))
    return groups


def _form_for(turn: Turn, where: tf.AnnotationPosition, request: HttpRequest, data: Any) -> tuple[Any, dict[str, Any]]:
    """The form for the current page (bound to ``data``: a post, or a refused post kept for this GET),
    plus what its template needs (each page's ``page_stamp``: when it was first shown, for its page time)."""
    form, context = _page_form(turn, where, request, data)
    stamp = data.get("page_stamp", "") if data is not None else ""
    context["page_stamp"] = stamp or page_stamp(turn, where.step)
    return form, context


def _page_form(turn: Turn, where: tf.AnnotationPosition, request: HttpRequest, data: Any) -> tuple[Any, dict[str, Any]]:
    if where.step == tf.ANSWERS:
        shown = data.get("shown", "") if data is not None else ""
        asked = tf.questions_shown(turn, shown) if data is not None else tf.asked_question_ids(turn)
        stored = _saved_answers(turn) if data is None else None
        check = attention.answers_check(turn)  # no query for a turn without a check
        if check is not None and turn.attention_checks.exists():  # already answered: not asked again
            check = None
        form = AnswersForm(data, initial=stored or None, questions=_questions(asked), attention=check)
        # a form shown again with errors keeps the time it was first shown
        return form, {"shown": shown or tf.shown_token(turn, asked)}
    if where.step == tf.REWRITE:
        alternates = tf.prepared_rewrite(turn)
        if alternates is None:  # the view shows the continue page until it is prepared
            raise RuntimeError(f"turn {turn.pk}: the rewrite page was asked for before its rewrite was made")
        start = request.GET.get("start", "")
        start = start if start in START_CHOICES else "empty"
        begin = {"empty": "", "original": turn.llm_response, "rewrite": alternates.llm_improved}[start]
        initial = {"human_edited": alternates.human_edited or begin, "questions": ["general"]}
        return RewriteForm(data, initial=initial), {
            "start": start,
            "improved": alternates.llm_improved,
            "draft_key": f"golden-{turn.conversation.conversation_id}-{turn.turn_number}",
        }
    comparisons = list(PairwiseComparison.objects.filter(turn=turn).order_by("position"))
    compare = CompareForm(data, comparisons=comparisons)
    return compare, {"groups": _pairs(turn, compare, comparisons), "skipped_notes": _skipped_notes(turn)}


def _save(turn: Turn, where: tf.AnnotationPosition, form: Any, request: HttpRequest) -> None:
    do_record_page_time(turn, where.step, request.POST.get("page_stamp", ""))
    if where.step == tf.ANSWERS:
        shown = request.POST.get("shown", "")
        if form.attention is not None and turn.conversation.participant is not None:
            attention.do_record_check(turn.conversation.participant, turn, form.attention, form.attention_answer())
        # also records when the page was first shown (``shown``), as do_start_annotation does
        tf.do_save_answers(turn, form.cleaned_data["tags"], form.answers(), [q.id for q in form.questions], shown)
        turn.refresh_from_db(fields=["binary_judgements"])  # drops the view's prefetched copy: reads see the saved
        queue_rewrite_if_missing(turn)
    elif where.step == tf.REWRITE:
        tf.do_save_rewrite(turn, form.cleaned_data["human_edited"].strip(), list(form.cleaned_data["questions"]))
    else:
        open_positions = {c.position for c in form.comparisons if c.winner is None}  # as the page was read
        tf.do_save_comparisons(turn, form.winners(), open_positions)


def _sections(step: str) -> list[tuple[str, str, str]]:
    sections = []
    reached = True
    for key, label in SECTIONS:
        state = "current" if key == step else "done" if reached else "todo"
        if key == step:
            reached = False
        sections.append((key, label, state))
    return sections


def _review_url(participant: Participant, turn: Turn) -> str:
    return reverse("collection:annotation:review", kwargs={"token": participant.token, "turn_number": turn.turn_number})


@never_cache
def annotate(request: HttpRequest, token: str, turn_number: int) -> HttpResponse:
    """Show the turn's current page (GET only reads) or save it (POST, then redirect)."""
    participant, position = flow.enter(token)
    if position.step == flow.WITHDRAWN:
        return render_withdrawn(request, participant)
    turn = position.turn
    posted = request.method == "POST"
    fresh = posted and ps.claim(request)  # False for a repeat of a post already seen (a double click)
    if position.step != flow.ANNOTATE or turn is None or turn.turn_number != turn_number:
        if fresh:  # a post from a tab the study has moved past: say so, keep its text
            return stale_page(request, participant, position)
        return redirect(flow.step_url(participant, position))
    # Where the turn is, and which questions a page asked, both read its answers: read them once
    # (``_save`` drops this copy after saving the answers, so what is read next is what was saved).
    prefetch_related_objects([turn], "binary_judgements")
    where = tf.locate_annotation(turn)
    if posted and request.POST.get("step") != where.key:
        if fresh:
            return stale_page(request, participant, position)
        return redirect(request.path)  # a repeated submission: nothing to change
    # Two states a page cannot show without writing (left by an interrupted request or an older
    # version): a continue button makes the write a POST of its own.
    if where.step == tf.FINISHED:  # all answers stored but completion not yet stamped
        if posted:
            tf.do_save_comparisons(turn, {})
            return to_current_step(token)
        return _continue_page(request, participant, turn, where)
    polling = not posted and request.headers.get("HX-Request") == "true"
    if where.step == tf.REWRITE and tf.prepared_rewrite(turn) is None:  # the suggested rewrite is not made yet
        if polling:  # the waiting page checks back: nothing to change yet
            return HttpResponse(status=204)
        if not posted:
            return _preparing_page(request, participant, turn, where)
        tf.ensure_alternates(turn)
        if "human_edited" not in request.POST:  # the continue button; a reply already written is saved below
            return redirect(request.path)
    if polling:  # ready (or moved on): the waiting page loads this page in full
        response = HttpResponse(status=200)
        response["HX-Redirect"] = request.path
        return response
    extra: dict[str, Any] = {}

    def make(data: Any) -> Any:
        form, context = _form_for(turn, where, request, data)
        extra.update(context)
        return form

    form = bound_form(request, make)
    if posted:
        if not form.is_valid():
            return ps.bounce(request, form)  # post/redirect/get: the page shows the answers and errors again
        _save(turn, where, form, request)
        if where.step == tf.COMPARE:  # the turn's last page: straight on to the step after it
            return to_current_step(token)
        return redirect(request.path)
    if where.step != tf.ANSWERS:
        extra["review_url"] = _review_url(participant, turn)
    return render(
        request,
        f"participant/annotate_{where.step}.html",
        page_context(
            participant, flow.ANNOTATE, turn=turn, where=where, form=form, sections=_sections(where.step), **extra
        ),
    )


@never_cache
def review(request: HttpRequest, token: str, turn_number: int) -> HttpResponse:
    """Review and change a turn's saved answers, until the participant sends their next message.

    GET only reads; POST saves and returns to wherever the participant was (the
    turn's next annotation page, or the chat).
    """
    participant, position = flow.enter(token)
    if position.step == flow.WITHDRAWN:
        return render_withdrawn(request, participant)
    turn = position.turn
    if position.step not in (flow.ANNOTATE, flow.CHAT) or turn is None or turn.turn_number != turn_number:
        return redirect(flow.step_url(participant, position))
    if not tf.can_review(turn):  # nothing saved yet, or the chat has moved on
        return redirect(flow.step_url(participant, position))
    back = flow.step_url(participant, position)
    comparisons = list(PairwiseComparison.objects.filter(turn=turn, winner__isnull=False).order_by("position"))
    asked = tf.asked_question_ids(turn)
    initial = _saved_answers(turn)
    initial.update({f"winner_{c.position}": c.winner or "" for c in comparisons})
    form = bound_form(
        request,
        lambda data: ReviewForm(
            data, initial=None if data is not None else initial, questions=_questions(asked), comparisons=comparisons
        ),
    )
    if request.method == "POST":
        if not form.is_valid():
            return ps.bounce(request, form)  # post/redirect/get, as on every participant page
        tf.do_revise_answers(turn, form.cleaned_data["tags"], form.answers(), form.winners())
        return redirect(back)
    return render(
        request,
        "participant/annotate_review.html",
        page_context(
            participant,
            flow.ANNOTATE,
            turn=turn,
            form=form,
            groups=_pairs(turn, form, comparisons),
            golden=tf.reply_texts(turn)[cat.RESPONSE_HUMAN],
            back_url=back,
        ),
    )


def _preparing_page(
    request: HttpRequest, participant: Participant, turn: Turn, where: tf.AnnotationPosition
) -> HttpResponse:
    """The calm wait while the suggested rewrite is prepared off the request path (annotation.tasks)."""
    return render(
        request,
        "participant/annotate_preparing.html",
        page_context(participant, flow.ANNOTATE, turn=turn, where=where, sections=_sections(where.step)),
    )


def _continue_page(
    request: HttpRequest, participant: Participant, turn: Turn, where: tf.AnnotationPosition
) -> HttpResponse:
    return render(
        request,
        "participant/annotate_continue.html",
        page_context(participant, flow.ANNOTATE, turn=turn, where=where, sections=_sections(where.step)),
    )
