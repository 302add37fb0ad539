"""Participant pages: parse and authorise, call one study_flow action, redirect (post/redirect/get).

Every page is reached by the participant's secret token; an unknown token is a
404. A request for a step other than the participant's current one is
redirected to the current step, which is what makes refresh, back button and
double submission safe. Nothing here ever renders the original model's real
identity: the participant only sees "Model".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any

from django.core.cache import cache
from django.db import connections
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.assignment import NoModelAvailable
from collection.chat_model import (
    CALM_FAILURE_MESSAGE,
    PARTICIPANT_FACING_NAME,
    ChatModelError,
    build_request,
    reply_slot,
    stream_reply,
)
from collection.forms import ConsentForm, MessageForm, PanasForm, ProfileForm, SurveyForm, TopicForm
from collection.models import Conversation, Participant, Study, Turn

logger = logging.getLogger("attune.participant")

#: How long one reply may hold its generation lock (a crashed worker frees it after this).
REPLY_LOCK_SECONDS = 180

PANAS_INTRO = (
    "Below are words that describe feelings. For each one, choose how much you feel this way "
    "right now, from 1 (very slightly or not at all) to 7 (extremely). There are no right or wrong answers."
)


def page_context(participant: Participant, step: str, **extra: Any) -> dict[str, Any]:
    """What every participant page needs: the study, the token for links, progress."""
    return {
        "participant": participant,
        "study": participant.study,
        "token": participant.token,
        "progress": flow.progress_for(step),
        "model_name": PARTICIPANT_FACING_NAME,
        **extra,
    }


def render_withdrawn(request: HttpRequest, participant: Participant) -> HttpResponse:
    return render(
        request,
        "participant/withdrawn.html",
        {"participant": participant, "study": participant.study, "token": participant.token, "hide_withdraw": True},
    )


Handler = Callable[..., HttpResponse]


def participant_step(step: str) -> Callable[[Handler], Handler]:
    """Resolve the token, and send the participant to their current step unless it is ``step``."""

    def decorator(view: Handler) -> Handler:
        @wraps(view)
        @never_cache
        def wrapper(request: HttpRequest, token: str, **kwargs: Any) -> HttpResponse:
            participant = flow.access_participant(token)
            position = flow.locate(participant)
            if position.step == flow.WITHDRAWN:
                return render_withdrawn(request, participant)
            if position.step != step:
                return redirect(flow.step_url(participant, position))
            return view(request, participant, position, **kwargs)

        return wrapper

    return decorator


@never_cache
def resume(request: HttpRequest, token: str) -> HttpResponse:
    """The study link itself: always lands on the step the participant is on."""
    participant = flow.access_participant(token)
    position = flow.locate(participant)
    if position.step == flow.WITHDRAWN:
        return render_withdrawn(request, participant)
    return redirect(flow.step_url(participant, position))


@never_cache
def join(request: HttpRequest, slug: str) -> HttpResponse:
    """Open enrolment: a start page, and on POST a new participant (remembered in the session)."""
    study = get_object_or_404(Study, slug=slug, active=True, open_enrolment=True)
    session_key = f"attune-join-{study.pk}"
    known = request.session.get(session_key)
    if known:
        participant = Participant.objects.filter(token=known, study=study, withdrawn_at__isnull=True).first()
        if participant is not None:
            return redirect("collection:resume", token=participant.token)
    if request.method == "POST":
        participant = flow.do_enrol(study)
        request.session[session_key] = participant.token
        return redirect("collection:resume", token=participant.token)
    return render(request, "participant/join.html", {"study": study, "hide_withdraw": True})


@participant_step(flow.CONSENT)
def consent(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    form = ConsentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        flow.do_record_consent(participant, form.cleaned_data["sensitive"])
        return redirect("collection:resume", token=participant.token)
    return render(
        request,
        "participant/consent.html",
        page_context(participant, flow.CONSENT, form=form, research_only=cat.RESEARCH_ONLY_STATEMENT),
    )


@participant_step(flow.PROFILE)
def profile(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    consent_record = flow.current_consent(participant)
    ask = bool(consent_record and consent_record.sensitive_data_consent)
    form = ProfileForm(request.POST or None, ask_diagnoses=ask)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        flow.do_save_profile(
            participant,
            data["age_band"],
            list(data["traits"]),
            list(data["goals"]),
            list(data["diagnoses"]) if ask else None,
        )
        return redirect("collection:resume", token=participant.token)
    return render(request, "participant/profile.html", page_context(participant, flow.PROFILE, form=form))


def _panas_page(
    request: HttpRequest,
    participant: Participant,
    step: str,
    title: str,
    intro: str,
    save: Callable[[dict[str, int]], None],
) -> HttpResponse:
    form = PanasForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        save(form.ratings())
        return redirect("collection:resume", token=participant.token)
    return render(
        request, "participant/panas.html", page_context(participant, step, form=form, title=title, intro=intro)
    )


@participant_step(flow.PRE_PANAS)
def pre_panas(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    return _panas_page(
        request,
        participant,
        flow.PRE_PANAS,
        "How do you feel right now?",
        PANAS_INTRO,
        lambda ratings: flow.do_save_pre_panas(participant, ratings),
    )


@participant_step(flow.TOPIC)
def topic(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    form = TopicForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            flow.do_start_conversation(participant, form.cleaned_data["topic"], form.cleaned_data["attitude"])
        except NoModelAvailable:
            logger.error(
                "study %s has no active original model; participant cannot start", flow.study_of(participant).slug
            )
            return render(request, "participant/not_ready.html", page_context(participant, flow.TOPIC), status=503)
        return redirect("collection:resume", token=participant.token)
    return render(request, "participant/topic.html", page_context(participant, flow.TOPIC, form=form))


def _chat_context(
    participant: Participant,
    conversation: Conversation,
    form: MessageForm | None,
    failed: bool = False,
    notice: str = "",
) -> dict[str, Any]:
    turns = list(conversation.turns.order_by("turn_number"))
    pending = turns[-1] if turns and not turns[-1].llm_response else None
    study = flow.study_of(participant)
    answered = sum(1 for t in turns if t.llm_response)
    full = answered >= study.max_turns
    if form is None and pending is None and not full:
        form = MessageForm(initial={"turn_number": flow.next_turn_number(conversation)})
    return page_context(
        participant,
        flow.CHAT,
        conversation=conversation,
        turns=turns,
        pending=pending,
        form=form,
        failed=failed,
        notice=notice,
        answered=answered,
        can_finish=answered >= study.min_turns and pending is None,
        full=full,
        reply_url=reverse(
            "collection:chat_reply", kwargs={"token": participant.token, "turn_number": pending.turn_number}
        )
        if pending
        else "",
        draft_key=f"chat-{conversation.conversation_id}-{flow.next_turn_number(conversation)}",
    )


@participant_step(flow.CHAT)
def chat(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    failed = request.GET.get("reply") == "failed"
    return render(request, "participant/chat.html", _chat_context(participant, position.chat, None, failed))


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


RATE_LIMIT_MESSAGE = (
    "You are sending messages very quickly. Please wait a minute and send again; your message is still here."
)


@never_cache
@require_POST
def chat_send(request: HttpRequest, token: str) -> HttpResponse:
    """Save the participant's message (before any model call), then hand over to the reply stream."""
    participant = flow.access_participant(token)
    position = flow.locate(participant)
    if position.step != flow.CHAT:
        target = reverse("collection:resume", kwargs={"token": token})
        return JsonResponse({"redirect": target}, status=409) if _wants_json(request) else redirect(target)
    conversation = position.chat
    form = MessageForm(request.POST)

    def refuse(message: str, status: int) -> HttpResponse:
        if _wants_json(request):
            return JsonResponse({"error": message}, status=status)
        if message and not form.errors:
            form.add_error("message", message)
        return render(request, "participant/chat.html", _chat_context(participant, conversation, form), status=status)

    if not form.is_valid():
        errors = form.errors.get("message") or ["Please try sending again."]
        return refuse(str(errors[0]), 400)
    turn_number = form.cleaned_data["turn_number"]
    is_new = turn_number == flow.next_turn_number(conversation)
    if is_new and flow.chat_is_full(conversation):
        return refuse("This chat has reached its length limit. Please finish the chat below.", 400)
    if is_new and not flow.check_chat_rate(participant):
        return refuse(RATE_LIMIT_MESSAGE, 429)
    try:
        turn, _ = flow.do_add_message(conversation, turn_number, form.cleaned_data["message"])
    except flow.StaleSubmission:
        target = reverse("collection:resume", kwargs={"token": token})
        return JsonResponse({"redirect": target}, status=409) if _wants_json(request) else redirect(target)
    if _wants_json(request):
        return JsonResponse(
            {
                "turn_number": turn.turn_number,
                "reply_url": reverse("collection:chat_reply", kwargs={"token": token, "turn_number": turn.turn_number}),
                "has_reply": bool(turn.llm_response),
            }
        )
    return redirect("collection:chat", token=token)


def _event(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload) + "\n").encode()


def _reply_events(participant: Participant, conversation: Conversation, turn: Turn) -> Iterator[bytes]:
    """NDJSON events: delta*, then done or error. The reply is saved only when complete."""
    next_url = reverse("collection:resume", kwargs={"token": participant.token})
    if turn.llm_response:
        yield _event({"type": "delta", "text": turn.llm_response})
        yield _event({"type": "done", "next": next_url})
        return
    lock_key = f"attune:reply-lock:{turn.pk}"
    if not cache.add(lock_key, 1, timeout=REPLY_LOCK_SECONDS):
        yield _event({"type": "busy"})  # another request is already producing this reply
        return
    try:
        with reply_slot() as granted:
            if not granted:
                logger.warning(
                    "no free reply slot in this process for turn %s: refused, the participant may retry", turn.pk
                )
                yield _event({"type": "error", "message": CALM_FAILURE_MESSAGE})
                return
            reply_request = build_request(conversation, turn)
            release_database_connections()
            parts: list[str] = []
            try:
                for chunk in stream_reply(reply_request):
                    parts.append(chunk)
                    yield _event({"type": "delta", "text": chunk})
            except ChatModelError as exc:
                yield _event({"type": "error", "message": str(exc)})
                return
        flow.do_save_reply(turn, "".join(parts).strip())  # takes a connection again, for this write only
        yield _event({"type": "done", "next": next_url})
    finally:
        cache.delete(lock_key)


def release_database_connections() -> None:
    """Give this thread's database connections back (to the pool, or closed) before a long wait on a provider.

    A hundred replies streaming must not hold a hundred Postgres connections
    (``max_connections`` is 100 by default); the next query opens one again.
    A connection inside a transaction is left alone: closing it would abort the
    transaction (the test suite wraps each test in one).
    """
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


@never_cache
@require_POST
def chat_reply(request: HttpRequest, token: str, turn_number: int) -> HttpResponseBase:
    """Produce (or re-send) the model's reply to one saved message, streaming when the client can read it."""
    participant = flow.access_participant(token)
    position = flow.locate(participant)
    streaming = "application/x-ndjson" in request.headers.get("Accept", "")
    if position.step == flow.WITHDRAWN:
        if streaming:  # the chat script follows this to the withdrawn page
            return StreamingHttpResponse(
                iter([_event({"type": "redirect", "next": reverse("collection:resume", kwargs={"token": token})})]),
                content_type="application/x-ndjson",
            )
        return render_withdrawn(request, participant)
    conversation = position.conversation
    if conversation is None or position.step not in (flow.CHAT, flow.ANNOTATE):
        raise Http404("No such message.")
    turn = get_object_or_404(Turn, conversation=conversation, turn_number=turn_number)
    events = _reply_events(participant, conversation, turn)
    if streaming:
        response = StreamingHttpResponse(events, content_type="application/x-ndjson")
        response["X-Accel-Buffering"] = "no"  # let reverse proxies pass chunks through at once
        return response
    outcome = [json.loads(line) for line in events][-1]
    if outcome["type"] == "error":
        return redirect(reverse("collection:chat", kwargs={"token": token}) + "?reply=failed")
    return redirect("collection:resume", token=token)


@never_cache
@require_POST
def chat_finish(request: HttpRequest, token: str) -> HttpResponse:
    participant = flow.access_participant(token)
    position = flow.locate(participant)
    if position.step == flow.CHAT:
        flow.do_finish_chat(position.chat)
    return redirect("collection:resume", token=token)


@participant_step(flow.POST_PANAS)
def post_panas(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    return _panas_page(
        request,
        participant,
        flow.POST_PANAS,
        "How do you feel now, after the chat?",
        PANAS_INTRO,
        lambda ratings: flow.do_save_post_panas(position.chat, ratings),
    )


@participant_step(flow.SURVEY)
def survey(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    form = SurveyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        flow.do_save_conversation_wide(position.chat, form.answers())
        return redirect("collection:resume", token=participant.token)
    return render(request, "participant/survey.html", page_context(participant, flow.SURVEY, form=form))


@participant_step(flow.DONE)
def done(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    return render(request, "participant/done.html", page_context(participant, flow.DONE, hide_withdraw=False))


@never_cache
def withdraw(request: HttpRequest, token: str) -> HttpResponse:
    """A confirmation page, then withdrawal on POST (works from every step, including after finishing)."""
    participant = flow.access_participant(token)
    if participant.is_withdrawn:
        return render_withdrawn(request, participant)
    if request.method == "POST":
        if request.POST.get("confirm") == "yes":
            flow.do_withdraw(participant)
            return redirect("collection:withdraw", token=token)
        return redirect("collection:resume", token=token)
    position = flow.locate(participant)
    return render(
        request,
        "participant/withdraw.html",
        page_context(participant, position.step, back_url=flow.step_url(participant, position), hide_withdraw=True),
    )
