"""The per-turn annotation page: one URL per turn that always shows the turn's current sub-step.

Each form carries the key of the sub-step it was rendered for; a submission for
any other sub-step (double click, an old tab, the back button) changes nothing
and simply shows the current sub-step again.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from annotation import turn_flow as tf
from annotation.forms import BinaryPageForm, ChooseQuestionsForm, CompareForm, GoldenReplyForm, MoodForm
from annotation.models import PairwiseComparison
from attunebench import catalogue as cat
from collection import page_safety as ps
from collection import study_flow as flow
from collection.models import Participant, Turn
from collection.views import bound_form, page_context, render_withdrawn, stale_page

SECTIONS: tuple[tuple[str, str], ...] = (
    (tf.MOOD, "Your feelings"),
    (tf.BINARY, "What the reply did"),
    (tf.REWRITE, "Your ideal reply"),
    (tf.CHOOSE, "Comparing replies"),
)
_SECTION_OF = {
    tf.MOOD: tf.MOOD,
    tf.BINARY: tf.BINARY,
    tf.REWRITE: tf.REWRITE,
    tf.CHOOSE: tf.CHOOSE,
    tf.COMPARE: tf.CHOOSE,
}


#: Where the ideal reply may start from (``?start=`` on the rewrite page; the script does the same without a reload).
START_CHOICES = ("empty", "original", "rewrite")


def _form_for(
    turn: Turn,
    where: tf.AnnotationPosition,
    data: Any,
    participant: Participant,
    start: str = "",
    extra: dict[str, Any] | None = None,
) -> Any:
    """The form for the current sub-step; what its template needs goes into ``extra``."""
    form, context = _form_and_context(turn, where, data, participant, start)
    if extra is not None:
        extra.update(context)
    return form


def _form_and_context(
    turn: Turn, where: tf.AnnotationPosition, data: Any, participant: Participant, start: str
) -> tuple[Any, dict[str, Any]]:
    if where.step == tf.MOOD:
        return MoodForm(data), {}
    if where.step == tf.BINARY:
        category, questions = tf.binary_pages(turn)[where.page]
        return BinaryPageForm(data, questions=questions), {"category_label": cat.BINARY_CATEGORY_LABELS[category]}
    if where.step == tf.REWRITE:
        alternates = tf.prepared_rewrite(turn)
        if alternates is None:  # the view shows the continue page until it is prepared
            raise RuntimeError(f"turn {turn.pk}: the rewrite page was asked for before its rewrite was made")
        start = start if start in START_CHOICES else "empty"
        begin = {"empty": "", "original": turn.llm_response, "rewrite": alternates.llm_improved}[start]
        initial = {"human_edited": alternates.human_edited or begin}
        return GoldenReplyForm(data, initial=initial), {
            "start": start,
            "improved": alternates.llm_improved,
            "draft_key": f"golden-{turn.conversation.conversation_id}-{turn.turn_number}",
        }
    if where.step == tf.CHOOSE:
        return ChooseQuestionsForm(data, initial={"questions": ["general"]}), {}
    question_id = tf.compare_questions(turn)[where.page]
    comparisons = list(PairwiseComparison.objects.filter(turn=turn, question_id=question_id).order_by("position"))
    form = CompareForm(data, comparisons=comparisons)
    texts = tf.reply_texts(turn)
    pairs = [
        (i + 1, texts[c.response_a], texts[c.response_b], form[f"winner_{c.position}"])
        for i, c in enumerate(comparisons)
    ]
    skipped = [SKIPPED_NOTES[frozenset((s["responseA"], s["responseB"]))] for s in tf.skipped_pairs(turn, question_id)]
    return form, {
        "question_text": cat.PAIRWISE_QUESTIONS.get(question_id, question_id),
        "pairs": pairs,
        "skipped_notes": skipped,
    }


#: Why a pair is missing from a comparison page (its two replies had the same text).
SKIPPED_NOTES: dict[frozenset[str], str] = {
    frozenset((cat.RESPONSE_ORIGINAL, cat.RESPONSE_ALTERNATE)): "the model\u2019s reply and the suggested rewrite",
    frozenset((cat.RESPONSE_ORIGINAL, cat.RESPONSE_HUMAN)): "the model\u2019s reply and your ideal reply",
    frozenset((cat.RESPONSE_ALTERNATE, cat.RESPONSE_HUMAN)): "the suggested rewrite and your ideal reply",
}


def _save(turn: Turn, where: tf.AnnotationPosition, form: Any, participant: Participant, shown: str) -> None:
    if where.step == tf.MOOD:
        tf.do_start_annotation(turn, shown)
        tf.do_save_mood(turn, form.cleaned_data["tags"], flow.study_of(participant).binary_sample_size)
    elif where.step == tf.BINARY:
        tf.do_save_binary_answers(turn, form.answers())
    elif where.step == tf.REWRITE:
        tf.do_save_golden_reply(turn, form.cleaned_data["human_edited"].strip())
    elif where.step == tf.CHOOSE:
        tf.do_select_pairwise_questions(turn, list(form.cleaned_data["questions"]))
    else:
        tf.do_save_comparisons(turn, form.winners())


def _sections(step: str) -> list[tuple[str, str, str]]:
    section = _SECTION_OF.get(step, tf.CHOOSE)
    sections = []
    reached = True
    for key, label in SECTIONS:
        state = "current" if key == section else "done" if reached else "todo"
        if key == section:
            reached = False
        sections.append((key, label, state))
    return sections


@never_cache
def annotate(request: HttpRequest, token: str, turn_number: int) -> HttpResponse:
    """Show the turn's current sub-step (GET only reads) or save it (POST, then redirect)."""
    participant = flow.access_participant(token)
    position = flow.locate(participant)
    if position.step == flow.WITHDRAWN:
        return render_withdrawn(request, participant)
    turn = position.turn
    posted = request.method == "POST"
    fresh = posted and ps.claim(request)  # False for a repeat of a post already seen (a double click)
    if position.step != flow.ANNOTATE or turn is None or turn.turn_number != turn_number:
        if fresh:  # a post from a tab the study has moved past: say so, keep its text
            return stale_page(request, participant, position)
        return redirect(flow.step_url(participant, position))
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
            return redirect("collection:resume", token=token)
        return _continue_page(request, participant, turn, where)
    if where.step == tf.REWRITE and tf.prepared_rewrite(turn) is None:  # the suggested rewrite is not made yet
        if not posted:
            return _continue_page(request, participant, turn, where)
        tf.ensure_alternates(turn)
        if "human_edited" not in request.POST:  # the continue button; a reply already written is saved below
            return redirect(request.path)
    extra: dict[str, Any] = {}
    form = bound_form(
        request, lambda data: _form_for(turn, where, data, participant, request.GET.get("start", ""), extra)
    )
    if posted:
        if not form.is_valid():
            return ps.bounce(request, form)  # post/redirect/get: the page shows the answers and errors again
        _save(turn, where, form, participant, request.POST.get("shown", ""))
        return redirect(request.path)
    if where.step == tf.MOOD:  # a form shown again with errors keeps the time it was first shown
        extra["shown"] = (form.data.get("shown") if form.is_bound else "") or tf.shown_token(turn)
    return render(
        request,
        f"participant/annotate_{where.step}.html",
        page_context(
            participant, flow.ANNOTATE, turn=turn, where=where, form=form, sections=_sections(where.step), **extra
        ),
    )


def _continue_page(
    request: HttpRequest, participant: Participant, turn: Turn, where: tf.AnnotationPosition
) -> HttpResponse:
    return render(
        request,
        "participant/annotate_continue.html",
        page_context(participant, flow.ANNOTATE, turn=turn, where=where, sections=_sections(where.step)),
    )
