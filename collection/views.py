"""Participant pages: parse and authorise, call one study_flow action, redirect (post/redirect/get).

Every page is reached by the participant's secret token; an unknown token is a
404. A request for a step other than the participant's current one is
redirected to the current step, which is what makes refresh, back button and
double submission safe. Nothing here ever renders the original model's real
identity: the participant only sees "Model".
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from functools import wraps
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import connections
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    JsonResponse,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from collection import attention, quotas, recruitment, safety
from collection import page_safety as ps
from collection import study_flow as flow
from collection.assignment import NoModelAvailable
from collection.chat_model import (
    CALM_FAILURE_MESSAGE,
    PARTICIPANT_FACING_NAME,
    ChatModelError,
    build_request,
    reply_slot,
)
from collection.client_ip import client_ip
from collection.forms import ConsentForm, MessageForm, PanasForm, ProfileForm, SurveyForm, TopicForm
from collection.identity_guard import GuardedReply, identity_scanner
from collection.live_spend import do_record_calls
from collection.models import Conversation, Participant, SafetyEvent, Study, Turn, hash_token, new_token
from collection.time_estimate import study_time_estimate

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
        "form_nonce": ps.new_nonce(),
        **extra,
    }


def personal_link(request: HttpRequest, participant: Participant) -> str:
    """The participant's own study link, in full, for them to keep and come back by.

    Someone who joined through the open join link has no other copy (their
    browser offers to continue for only ``JOIN_RESUME_WINDOW``). Only the
    participant's own pages show it, and they are reached by this very link.
    """
    return request.build_absolute_uri(reverse("collection:resume", kwargs={"token": participant.token}))


def bound_form(request: HttpRequest, make: Callable[[Any], Any]) -> Any:
    """The page's form: bound to the post, to a refused post kept for this GET (with its errors), or empty."""
    if request.method == "POST":
        return make(request.POST)
    data, errors = ps.bounced(request)
    form = make(data)
    if data is not None:
        ps.restore_errors(form, errors)
    return form


def stale_page(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    """A post from a page the study has moved past (another tab went ahead): say so and keep its text."""
    return ps.render_stale(
        request,
        page_context(participant, position.step, hide_withdraw=False),
        reverse("collection:resume", kwargs={"token": participant.token}),
    )


def render_withdrawn(request: HttpRequest, participant: Participant) -> HttpResponse:
    return render(
        request,
        "participant/withdrawn.html",
        {
            "participant": participant,
            "study": participant.study,
            "token": participant.token,
            "hide_withdraw": True,
            "screened_out": participant.screened_out_at is not None,
            "platform_return": participant.from_platform,
        },
    )


Handler = Callable[..., HttpResponse]


def participant_step(step: str) -> Callable[[Handler], Handler]:
    """Resolve the token, and send the participant to their current step unless it is ``step``."""

    def decorator(view: Handler) -> Handler:
        @wraps(view)
        @never_cache
        def wrapper(request: HttpRequest, token: str, **kwargs: Any) -> HttpResponse:
            participant, position = flow.enter(token)
            note_seen(request, participant)
            if position.step == flow.WITHDRAWN:
                return render_withdrawn(request, participant)
            fresh = request.method == "POST" and ps.claim(request)
            if position.step != step:
                if fresh:  # not a double click: a post from a tab the study has moved past
                    return stale_page(request, participant, position)
                return redirect(flow.step_url(participant, position))
            return view(request, participant, position, **kwargs)

        return wrapper

    return decorator


@never_cache
def resume(request: HttpRequest, token: str) -> HttpResponse:
    """The study link itself: always lands on the step the participant is on."""
    participant, position = flow.enter(token)
    note_seen(request, participant)
    if position.step == flow.WITHDRAWN:
        return render_withdrawn(request, participant)
    return redirect(flow.step_url(participant, position))


def to_current_step(token: str) -> HttpResponse:
    """After a saved form: straight to the step the study link would now send the participant to.

    The step is derived exactly as ``resume`` derives it (``flow.enter`` and ``flow.step_url``), in this
    request, so the browser skips the study link's own redirect (a whole request less per form). The
    withdrawn page lives at the study link itself, so a withdrawn participant is sent there.
    """
    return redirect(current_step_url(token))


def current_step_url(token: str) -> str:
    """The address of the step the study link would send the participant to now (see ``to_current_step``)."""
    participant, position = flow.enter(token)
    if position.step == flow.WITHDRAWN:
        return reverse("collection:resume", kwargs={"token": token})
    return flow.step_url(participant, position)


def post_only(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A participant action that only answers POST; opening its address sends the participant on instead.

    These addresses end up in the address bar (the paused page is shown at a
    reply address; a reopened tab or a bookmark opens them with GET): the
    participant then lands on their current step, never on a blank 405 page.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, token: str, **kwargs: Any) -> HttpResponseBase:
        if request.method in ("GET", "HEAD"):
            return resume(request, token)
        if request.method != "POST":
            return HttpResponseNotAllowed(["GET", "POST"])
        return view(request, token, **kwargs)

    return wrapper


#: How long a browser that joined a study offers "Continue as the previous participant" after its last page;
#: after that a shared device starts someone new by default (the previous person still has their own link).
JOIN_RESUME_WINDOW = timedelta(minutes=30)
JOIN_SALT = "attune.join"
#: How long a join page's Start button stays valid (its participant is made once, by the first post).
JOIN_PAGE_SECONDS = 3600


def _join_session_key(study: Study) -> str:
    return f"attune-join-{study.pk}"


def _remembered(request: HttpRequest, study: Study) -> Participant | None:
    """The participant this browser joined as, if they are still within the resume window and unfinished."""
    entry = request.session.get(_join_session_key(study))
    if not isinstance(entry, dict):
        return None
    try:
        seen = datetime.fromisoformat(str(entry.get("seen")))
    except ValueError:
        return None
    if timezone.now() - seen > JOIN_RESUME_WINDOW:
        return None
    token = str(entry.get("token") or "")
    participant = Participant.objects.filter(
        token_hash=hash_token(token), study=study, withdrawn_at__isnull=True, link_revoked_at__isnull=True
    ).first()
    if participant is None or flow.locate(participant).step == flow.DONE:
        return None
    participant.token = token  # only the hash is stored; the browser's session holds the link
    return participant


def _remember(request: HttpRequest, participant: Participant) -> None:
    request.session[_join_session_key(flow.study_of(participant))] = {
        "token": participant.token,
        "seen": timezone.now().isoformat(),
    }


def note_seen(request: HttpRequest, participant: Participant) -> None:
    """Keep a joined browser's resume window open while its participant is using it (no write when unjoined)."""
    key = _join_session_key(flow.study_of(participant))
    entry = request.session.get(key)
    if not isinstance(entry, dict) or entry.get("token") != participant.token:
        return
    try:
        seen = datetime.fromisoformat(str(entry.get("seen")))
    except ValueError:
        seen = None
    if seen is None or timezone.now() - seen > timedelta(minutes=1):
        _remember(request, participant)


@never_cache
def join(request: HttpRequest, slug: str) -> HttpResponse:
    """Open enrolment: a start page, and on POST a new participant (remembered in this browser's session).

    On a shared device the next person must never land in someone else's
    study: a browser that joined recently is asked "Continue as the previous
    participant" or "I'm someone new" (new is the first choice, and after
    ``JOIN_RESUME_WINDOW`` without activity only the start page is shown). The
    start page carries the new participant's token, signed, so a double click
    or two simultaneous posts make one participant, not two.
    """
    study = get_object_or_404(Study, slug=slug, open_enrolment=True)
    previous = _remembered(request, study)
    group = str((request.POST if request.method == "POST" else request.GET).get("group", ""))[:40].strip()
    if request.method == "POST":
        choice = request.POST.get("choice", "new")
        if choice == "continue" and previous is not None:
            _remember(request, previous)
            return to_current_step(previous.token)
        try:
            token = signing.loads(request.POST.get("start", ""), salt=JOIN_SALT, max_age=JOIN_PAGE_SECONDS)
        except signing.BadSignature:
            # an expired or altered start page: show a fresh one, nothing made
            return redirect(request.path + "?expired=1" + (f"&group={quote(group)}" if group else ""))
        try:
            if not Participant.objects.filter(token_hash=hash_token(str(token)), study=study).exists():  # repeat: free
                flow.check_enrolment_rate(study, client_ip(request))
            participant = flow.do_open_enrol(study, str(token), group)
        except flow.UnknownGroup as refusal:
            return _join_closed(request, study, str(refusal), 400)
        except flow.EnrolmentThrottled as refusal:
            response = _join_closed(request, study, str(refusal), 429)
            response["Retry-After"] = str(refusal.retry_after)
            return response
        except (flow.StudyFull, flow.StudyNotOpen, flow.GroupFull) as refusal:
            return _join_closed(request, study, str(refusal), 403)
        _remember(request, participant)
        return to_current_step(participant.token)
    if previous is None:
        closed = join_refusal(study, group)
        if closed is not None:
            return _join_closed(request, study, closed[0], closed[1])
    return render(
        request,
        "participant/join.html",
        {
            "study": study,
            "hide_withdraw": True,
            "previous": previous,
            "expired": request.GET.get("expired") == "1",
            "start": signing.dumps(new_token(), salt=JOIN_SALT),
            "group": group,
        },
    )


def join_refusal(study: Study, group: str) -> tuple[str, int] | None:
    """Why the start page must not be offered (calm sentence, status), or None: not open, full, or a bad group."""
    if not study.is_open:
        return flow.STUDY_CLOSED_MESSAGE, 403
    if group and group not in study.group_names:
        return quotas.UNKNOWN_GROUP_MESSAGE, 400
    if flow.study_is_full(study):
        return flow.STUDY_FULL_MESSAGE, 403
    if group and quotas.group_is_full(study, group):
        return quotas.GROUP_FULL_MESSAGE, 403
    return None


def _join_closed(request: HttpRequest, study: Study, message: str, status: int) -> HttpResponse:
    context = {"study": study, "message": message, "hide_withdraw": True}
    return render(request, "participant/join_closed.html", context, status=status)


@participant_step(flow.CONSENT)
def consent(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    form = bound_form(request, ConsentForm)
    if request.method == "POST":
        if not form.is_valid():
            return ps.bounce(request, form)
        flow.do_record_consent(participant, form.cleaned_data["sensitive"])
        return to_current_step(participant.token)
    return render(
        request,
        "participant/consent.html",
        page_context(
            participant,
            flow.CONSENT,
            form=form,
            personal_link=personal_link(request, participant),
            time_estimate=study_time_estimate(flow.study_of(participant)),
        ),
    )


@participant_step(flow.PROFILE)
def profile(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    consent_record = flow.current_consent(participant)
    ask = bool(consent_record and consent_record.sensitive_data_consent)
    form = bound_form(request, lambda data: ProfileForm(data, ask_diagnoses=ask))
    if request.method == "POST":
        if not form.is_valid():
            return ps.bounce(request, form)
        data = form.cleaned_data
        flow.do_save_profile(
            participant,
            data["age_band"],
            list(data["traits"]),
            list(data["goals"]),
            list(data["diagnoses"]) if ask else None,
        )
        return to_current_step(participant.token)
    context = page_context(participant, flow.PROFILE, form=form, personal_link=personal_link(request, participant))
    return render(request, "participant/profile.html", context)


def _panas_page(
    request: HttpRequest,
    participant: Participant,
    step: str,
    title: str,
    intro: str,
    save: Callable[[dict[str, int]], None],
) -> HttpResponse:
    form = bound_form(request, PanasForm)
    if request.method == "POST":
        if not form.is_valid():
            return ps.bounce(request, form)
        save(form.ratings())
        return to_current_step(participant.token)
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
    study = flow.study_of(participant)
    form = bound_form(request, lambda data: TopicForm(data, study=study))
    if not form.has_topics():
        context = page_context(participant, flow.TOPIC, message=quotas.ALL_TOPICS_FULL_MESSAGE)
        return render(request, "participant/topics_full.html", context)
    if request.method == "POST":
        if not form.is_valid():
            return ps.bounce(request, form)
        try:
            flow.do_start_conversation(participant, form.cleaned_data["topic"], form.cleaned_data["attitude"])
        except flow.TopicFull as refusal:
            form.add_error("topic", str(refusal))
            return ps.bounce(request, form)
        except NoModelAvailable:
            logger.error(
                "study %s has no active original model; participant cannot start", flow.study_of(participant).slug
            )
            context = page_context(participant, flow.TOPIC, personal_link=personal_link(request, participant))
            return render(request, "participant/not_ready.html", context, status=503)
        return to_current_step(participant.token)
    return render(request, "participant/topic.html", page_context(participant, flow.TOPIC, form=form))


def _chat_context(
    participant: Participant,
    conversation: Conversation,
    form: MessageForm | None,
    failed: bool = False,
    notice: str = "",
) -> dict[str, Any]:
    turns = list(conversation.turns.order_by("turn_number"))
    flagged = safety.events_by_turn(conversation, turns)
    for turn in turns:
        turn.safety_event = flagged.get(turn.pk)  # type: ignore[attr-defined]
    pending = turns[-1] if turns and not turns[-1].llm_response else None
    study = flow.study_of(participant)
    answered = sum(1 for t in turns if t.llm_response)
    full = len(turns) >= study.max_turns  # every turn sent counts towards the maximum
    # While a support panel waits for its choice, its three buttons are the only way on.
    awaiting_choice = bool(turns) and bool(
        (event := flagged.get(turns[-1].pk)) and event.level == SafetyEvent.Level.URGENT and not event.choice
    )
    next_number = turns[-1].turn_number + 1 if turns else 1  # as flow.next_turn_number, from the turns read
    if form is None and pending is None and not full and not awaiting_choice:
        form = MessageForm(initial={"turn_number": next_number})
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
        can_finish=answered >= study.min_turns and pending is None and not awaiting_choice,
        resources=safety.support_resources(study) if flagged else [],
        full=full,
        reply_url=reverse(
            "collection:chat_reply", kwargs={"token": participant.token, "turn_number": pending.turn_number}
        )
        if pending
        else "",
        draft_key=f"chat-{conversation.conversation_id}-{next_number}",
        # the last turn's answers can be changed until the next message is sent
        review_url=reverse(
            "collection:annotation:review", kwargs={"token": participant.token, "turn_number": turns[-1].turn_number}
        )
        if turns and turns[-1].annotation_completed_at and pending is None
        else "",
    )


@participant_step(flow.CHAT)
def chat(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    failed = request.GET.get("reply") == "failed"
    data, errors = ps.bounced(request)
    form = None
    if data is not None:
        form = MessageForm(data)
        ps.restore_errors(form, errors)
    return render(request, "participant/chat.html", _chat_context(participant, position.chat, form, failed))


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


RATE_LIMIT_MESSAGE = (
    "You are sending messages very quickly. Please wait a minute and send again; your message is still here."
)


STALE_MESSAGE = (
    "This page was out of date: the study has moved on in another tab or window, so this message was not sent. "
    "It is still in the box if you want to copy it."
)


@never_cache
@post_only
def chat_send(request: HttpRequest, token: str) -> HttpResponse:
    """Save the participant's message (before any model call), then hand over to the reply stream."""
    participant, position = flow.enter(token)
    fresh = ps.claim(request)
    resume_url = reverse("collection:resume", kwargs={"token": token})

    def stale() -> HttpResponse:
        if _wants_json(request):
            return JsonResponse({"stale": True, "error": STALE_MESSAGE, "redirect": resume_url}, status=409)
        return stale_page(request, participant, position)

    def moved_on() -> HttpResponse:
        return JsonResponse({"redirect": resume_url}, status=409) if _wants_json(request) else redirect(resume_url)

    if position.step != flow.CHAT:
        # the script never posts one message twice, so from it a message for a moved-on study is always stale
        if position.step != flow.WITHDRAWN and (fresh or _wants_json(request)):
            return stale()
        return moved_on()
    conversation = position.chat
    form = MessageForm(request.POST)

    def refuse(message: str, status: int) -> HttpResponse:
        if _wants_json(request):
            return JsonResponse({"error": message}, status=status)
        if message and not form.errors:
            form.add_error("message", message)
        return ps.bounce(request, form, reverse("collection:chat", kwargs={"token": token}))

    if not form.is_valid():
        errors = form.errors.get("message") or ["Please try sending again."]
        return refuse(str(errors[0]), 400)
    turn_number = form.cleaned_data["turn_number"]
    # the chat step's position holds the conversation's last turn (entering read it): the next number follows it
    last = position.turn
    is_new = turn_number == (last.turn_number + 1 if last is not None else 1)
    if is_new:  # refused before the rate limit counts it; do_add_message checks again under the lock
        try:
            flow.check_can_send(conversation, position.turn)
        except flow.TurnRefused as refusal:
            return refuse(str(refusal), 400 if isinstance(refusal, flow.ChatFull) else 409)
        if not flow.check_chat_rate(participant):
            return refuse(RATE_LIMIT_MESSAGE, 429)
    try:
        turn, created = flow.do_add_message(conversation, turn_number, form.cleaned_data["message"])
    except flow.TurnRefused as refusal:
        return refuse(str(refusal), 400 if isinstance(refusal, flow.ChatFull) else 409)
    except flow.StaleSubmission:
        return stale() if fresh or _wants_json(request) else moved_on()
    if not created and not same_message(turn.user_message, form.cleaned_data["message"]):
        return stale()  # another tab sent a different message for this turn first: this one was not saved
    event = safety.do_screen_message(turn) if created else None
    if _wants_json(request):
        return JsonResponse(
            {
                "safety_html": safety_panel_html(request, participant, event),
                "turn_number": turn.turn_number,
                "reply_url": reverse("collection:chat_reply", kwargs={"token": token, "turn_number": turn.turn_number}),
                "has_reply": bool(turn.llm_response),
            }
        )
    return redirect("collection:chat", token=token)


def same_message(stored: str, sent: str) -> bool:
    """A repeat of the stored message (a double click), as opposed to a different one from another tab."""
    return stored.strip() == sent.strip()


def _event(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload) + "\n").encode()


def _reply_events(participant: Participant, conversation: Conversation, turn: Turn) -> Iterator[bytes]:
    """NDJSON events: delta*, then done or error. The reply is saved only when complete.

    A ``restart`` event (the reply named a model and is being asked again) tells the
    client to clear the reply text it has shown so far; deltas then start afresh.
    """
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
            # The study's live-model budget is spent before the provider is called, never after.
            if reply_request.litellm_model and not flow.claim_live_call(flow.study_of(participant)):
                yield _event({"type": "error", "message": flow.LIVE_BUDGET_MESSAGE})
                return
            # Screened before it is shown: names held back, a leaking reply asked again or masked (identity_guard).
            guarded = GuardedReply(reply_request, identity_scanner(conversation.original_model))
            release_database_connections()
            # Sent at once, so the response starts (headers and all) while the screen still holds words back.
            yield _event({"type": "start"})
            try:
                for kind, text in guarded.events():
                    yield _event({"type": "delta", "text": text} if kind == "delta" else {"type": kind})
            except ChatModelError as exc:
                yield _event({"type": "error", "message": str(exc)})
                return
            finally:  # every live call is counted towards the study's spend, failed or not; none starts after
                calls = guarded.record.close()
                if calls:
                    do_record_calls(flow.study_of(participant), turn, calls)
        # takes a connection again, for this write only
        flow.do_save_reply(turn, guarded.text, guarded.outcome, guarded.leaks, guarded.record.answered_by)
        # Straight to the step the saved reply leads to (its annotation), not through the study link's redirect;
        # a link that stopped working while the reply streamed keeps the study link, which says so.
        with contextlib.suppress(Http404):
            next_url = current_step_url(participant.token)
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
@post_only
def chat_reply(request: HttpRequest, token: str, turn_number: int) -> HttpResponseBase:
    """Produce (or re-send) the model's reply to one saved message, streaming when the client can read it."""
    participant, position = flow.enter(token)
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
    # Nearly always the latest turn, which entering already read: one query fewer on every reply.
    latest = position.turn
    if latest is not None and latest.conversation_id == conversation.pk and latest.turn_number == turn_number:
        turn = latest
    else:
        turn = get_object_or_404(Turn, conversation=conversation, turn_number=turn_number)
    events = _reply_events(participant, conversation, turn)
    if streaming:
        response = StreamingHttpResponse(events, content_type="application/x-ndjson")
        response["X-Accel-Buffering"] = "no"  # let reverse proxies pass chunks through at once
        return response
    outcome = [json.loads(line) for line in events][-1]
    if outcome == {"type": "error", "message": flow.LIVE_BUDGET_MESSAGE}:  # a calm page, not a failed-reply retry
        context = page_context(
            participant,
            flow.CHAT,
            message=flow.LIVE_BUDGET_MESSAGE,
            hide_withdraw=False,
            personal_link=personal_link(request, participant),
        )
        return render(request, "participant/paused.html", context, status=503)
    if outcome["type"] == "error":
        return redirect(reverse("collection:chat", kwargs={"token": token}) + "?reply=failed")
    if outcome["type"] == "done":  # where the saved reply leads, as the streaming page's continue link
        return redirect(outcome["next"])
    return redirect("collection:resume", token=token)


UNSENT_MESSAGE = (
    "Your message has not been sent yet, so the chat is not finished. "
    "Please send it, or clear the box, and then finish the chat. Your text is still in the box."
)


def unsent_message(request: HttpRequest) -> str:
    """Words in the message box that came with a press of "Finish the chat": typed, never sent."""
    return str(request.POST.get("message", "")).strip()


def refuse_finish(request: HttpRequest, participant: Participant) -> HttpResponse:
    """Back to the chat with the unsent words in the box and a calm note saying what to do with them."""
    form = MessageForm(request.POST)
    form.add_error("message", UNSENT_MESSAGE)
    return ps.bounce(request, form, reverse("collection:chat", kwargs={"token": participant.token}))


@participant_step(flow.CHAT)
def chat_finish(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    """End the chat: never while the message box holds unsent words, and only after "Finish the chat?".

    The Finish button belongs to the message form, so whatever is in the box comes with it, even
    without JavaScript: finishing then would throw those words away for good, so the chat page comes
    back with them still in the box. An empty box leads to the question page (GET); only its "Yes"
    ends the chat, which cannot be undone.
    """
    if request.method == "POST" and unsent_message(request):
        return refuse_finish(request, participant)
    if not flow.finish_is_open(position.chat):
        return redirect("collection:chat", token=participant.token)
    if request.method != "POST":
        return render(request, "participant/chat_finish.html", page_context(participant, flow.CHAT))
    if request.POST.get("confirm") != "yes":
        return redirect("collection:chat_finish", token=participant.token)
    flow.do_finish_chat(position.chat)
    return to_current_step(participant.token)


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
    check = attention.survey_check(participant)
    form = bound_form(request, lambda data: SurveyForm(data, attention=check))
    if request.method == "POST":
        if not form.is_valid():
            return ps.bounce(request, form)
        if check is not None:  # kept apart from the answers: never data
            attention.do_record_check(participant, None, check, form.attention_answer())
        flow.do_save_conversation_wide(position.chat, form.answers())
        if participant.from_platform:  # back to the recruitment platform with the completion code
            return redirect("collection:platform_return", token=participant.token)
        return to_current_step(participant.token)
    response = render(request, "participant/survey.html", page_context(participant, flow.SURVEY, form=form))
    recruitment.allow_form_return(response, participant)
    return response


@participant_step(flow.DONE)
def done(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    resources = safety.support_resources(flow.study_of(participant)) if participant.safety_flagged else []
    context = page_context(participant, flow.DONE, hide_withdraw=False, resources=resources)
    return render(request, "participant/done.html", context)


# ---------------------------------------------------------------------------
# The distress protocol: the support panel's choices (logic in collection.safety)
# ---------------------------------------------------------------------------


def safety_panel_html(request: HttpRequest, participant: Participant, event: SafetyEvent | None) -> str:
    """The panel (urgent) or the resources (concern) shown under a message, as the chat page renders them."""
    if event is None:
        return ""
    context = {"event": event, "token": participant.token, "resources": safety.support_resources(participant.study)}
    return render_to_string("participant/includes/safety.html", context, request=request)


@never_cache
@post_only
def safety_choice(request: HttpRequest, token: str, event_id: int) -> HttpResponse:
    """Pause, stop or continue after the support panel; any other answer shows the chat (and panel) again."""
    participant, _ = flow.enter(token)
    try:
        event = safety.do_choose(participant, event_id, request.POST.get("choice", ""))
    except safety.SafetyChoiceRefused:
        return redirect("collection:resume", token=token)
    if event.choice == SafetyEvent.Choice.PAUSE:
        return redirect("collection:taking_a_break", token=token)
    return redirect("collection:resume", token=token)


@never_cache
def taking_a_break(request: HttpRequest, token: str) -> HttpResponse:
    """Taking a break: where their place is kept and how to come back. Nothing changes."""
    participant, position = flow.enter(token)
    context = page_context(participant, position.step, personal_link=personal_link(request, participant))
    return render(request, "participant/taking_a_break.html", context)


@participant_step(flow.STOPPED)
def stopped(request: HttpRequest, participant: Participant, position: flow.Position) -> HttpResponse:
    """Stopped for their wellbeing: the wellbeing completion code (and the way back to the platform)."""
    study = flow.study_of(participant)
    platform = (
        recruitment.return_url(study, recruitment.STOPPED)
        if participant.from_platform and recruitment.takes_platform_entries(study)
        else ""
    )
    context = page_context(
        participant,
        flow.STOPPED,
        code=safety.wellbeing_code(participant),
        platform_url=platform,
        resources=safety.support_resources(study),
        hide_withdraw=False,
    )
    return render(request, "participant/stopped.html", context)


@never_cache
def withdraw(request: HttpRequest, token: str) -> HttpResponse:
    """A confirmation page, then withdrawal on POST (works from every step, including after finishing)."""
    participant, position = flow.enter(token)
    if position.step == flow.WITHDRAWN:
        return render_withdrawn(request, participant)
    if request.method == "POST":
        if request.POST.get("confirm") == "yes":
            flow.do_withdraw(participant)
            return redirect("collection:withdraw", token=token)
        return redirect("collection:resume", token=token)
    return render(
        request,
        "participant/withdraw.html",
        page_context(participant, position.step, back_url=flow.step_url(participant, position), hide_withdraw=True),
    )


# ---------------------------------------------------------------------------
# Recruitment-platform entry and exit: logic in collection.recruitment
# ---------------------------------------------------------------------------

#: Shown in the footer of an entry page whose study is unknown (there are no study settings to take it from).
NO_STUDY = {"title": "Research study", "crisis_resources": "If you are in danger, call your local emergency number."}


def _entry_refused(request: HttpRequest, study: Study | None, message: str, status: int) -> HttpResponse:
    context = {"study": study or NO_STUDY, "message": message, "hide_withdraw": True}
    return render(request, "participant/entry_refused.html", context, status=status)


ENROLMENT_COOKIE_SALT = "attune.platform-enrolment"


def _enrolment_cookie(study: Study) -> str:
    return f"attune_enrolled_{study.pk}"


def _enrolled_in_this_browser(request: HttpRequest, study: Study) -> int | None:
    """The participant this browser enrolled in ``study`` (a signed cookie), or None."""
    value = request.get_signed_cookie(_enrolment_cookie(study), default=None, salt=ENROLMENT_COOKIE_SALT)
    return int(value) if value and value.isdigit() else None


def _remember_enrolment(request: HttpRequest, response: HttpResponse, study: Study, participant: Participant) -> None:
    """Lets this browser come back through the platform's entry URL: a signed, HTTP-only cookie for a year."""
    response.set_signed_cookie(
        _enrolment_cookie(study),
        str(participant.pk),
        salt=ENROLMENT_COOKIE_SALT,
        max_age=365 * 24 * 3600,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


@never_cache
def enter(request: HttpRequest, slug: str) -> HttpResponse:
    """A recruitment platform's entry URL: a start page (GET writes nothing), then enrol or resume on POST."""
    study = Study.objects.filter(slug=slug).first()
    query = request.POST if request.method == "POST" else request.GET
    try:
        entry = recruitment.read_entry(study, {k: str(query.get(k, "")) for k in query})
        enrolled_here = _enrolled_in_this_browser(request, entry.study)
        existing = recruitment.enrolled(entry)
        if existing is not None:
            recruitment.check_returning(entry, existing, enrolled_here)
        if request.method == "POST":
            participant, _ = recruitment.do_platform_enrol(entry, enrolled_here)
            response = redirect("collection:resume", token=participant.token)
            _remember_enrolment(request, response, entry.study, participant)
            return response
    except recruitment.EntryRefused as refusal:
        return _entry_refused(request, study, str(refusal), refusal.status)
    except flow.StudyFull as refusal:
        return _entry_refused(request, study, str(refusal), 403)
    returning = existing is not None
    carried = [
        (k, str(query.get(k, "")))
        for k in (
            entry.study.platform_participant_param,
            entry.study.platform_study_param,
            entry.study.platform_session_param,
        )
    ]
    return render(
        request,
        "participant/enter.html",
        {"study": entry.study, "hide_withdraw": True, "returning": returning, "carried": carried},
    )


@never_cache
def not_taking_part(request: HttpRequest, token: str) -> HttpResponse:
    """A platform participant who does not consent: confirm, then screen out and return with its code."""
    participant, position = flow.enter(token)
    if position.step != flow.CONSENT or not participant.from_platform:
        return redirect("collection:resume", token=token)
    if request.method == "POST":
        recruitment.do_screen_out(participant)
        return redirect("collection:platform_return", token=token)
    response = render(request, "participant/not_taking_part.html", page_context(participant, flow.CONSENT))
    recruitment.allow_form_return(response, participant)
    return response


@never_cache
def platform_return(request: HttpRequest, token: str) -> HttpResponse:
    """Back to the recruitment platform with the code for how the participant left (finished, withdrew,
    screened out); anyone not yet at an end, or not from a platform, goes to their current step."""
    participant, position = flow.enter(token)
    study = flow.study_of(participant)
    finished = position.step in (flow.WITHDRAWN, flow.DONE, flow.STOPPED)
    if not participant.from_platform or not finished or not recruitment.takes_platform_entries(study):
        return redirect("collection:resume", token=token)
    return redirect(recruitment.return_url(study, recruitment.exit_kind(participant)))
