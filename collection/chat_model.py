"""Replies from the original model a participant chats with.

Live replies stream through ``litellm.acompletion`` when the original model has
a litellm model string *and* ``settings.ATTUNE_ALLOW_LIVE_MODELS`` is on; every
other case uses the offline scripted model below, so a demo or a test never
spends money or needs a network. Failures are raised as :class:`ChatModelError`
(logged with the cause, never swallowed); the participant only ever sees its
calm, name-free message, because the real model identity must not reach a
participant's browser (SPEC 3.1).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import logging
import os
import queue
import re
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from contextlib import aclosing, contextmanager, suppress
from dataclasses import dataclass, field

from django.conf import settings
from prometheus_client import Gauge

from collection.entry_reads import sql_column, sql_table
from collection.models import Conversation, OriginalModel, Topic, Turn

logger = logging.getLogger("attune.chat")

#: The only name participants ever see for the model they chat with.
PARTICIPANT_FACING_NAME = "Model"

CALM_FAILURE_MESSAGE = "The reply could not be fetched just now. Your message is saved. Please try again in a moment."


class ChatModelError(Exception):
    """A reply could not be produced. ``str()`` is safe to show a participant (no model names)."""

    def __init__(self, message: str = CALM_FAILURE_MESSAGE):
        super().__init__(message)


@dataclass(frozen=True)
class ReplyRequest:
    """Everything needed to produce one reply, detached from the ORM so it can cross threads."""

    model_key: str
    litellm_model: str
    api_base: str
    messages: list[dict[str, str]]
    category: str
    subtopic: str
    turn_number: int
    #: Asked when the primary provider fails before sending any text (blank: no fallback).
    fallback_litellm_model: str = ""
    fallback_api_base: str = ""

    @property
    def user_message(self) -> str:
        return self.messages[-1]["content"] if self.messages else ""


@dataclass
class LiveAttempt:
    """One call to a live provider: which model, what it was sent, what came back, and whether it finished."""

    litellm_model: str
    messages: list[dict[str, str]]
    text: str = ""
    succeeded: bool = False


@dataclass
class CallRecord:
    """Every live call made for one reply (primary, fallback, identity-screen regenerations), for the
    study's spend (collection.live_spend) and the turn's ``answered_by``.

    The chat loop adds calls while the server thread reads the reply; once the server thread has taken the
    calls to count them (:meth:`close`), no further call may start, so none is ever paid but left uncounted
    (a reader that gave up on a stuck loop would otherwise miss a fallback the loop starts later).
    """

    attempts: list[LiveAttempt] = field(default_factory=list)
    closed: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def begin(self, attempt: LiveAttempt) -> None:
        """Note a call about to be made; raises ChatModelError (no call) once the record is closed."""
        with self._lock:
            if self.closed:
                raise ChatModelError()
            self.attempts.append(attempt)

    def close(self) -> list[LiveAttempt]:
        """The calls to count; from now on :meth:`begin` refuses (closing twice gives the same calls)."""
        with self._lock:
            self.closed = True
            return list(self.attempts)

    @property
    def answered_by(self) -> str:
        """The model of the last call that finished (the one whose text was kept); blank when offline."""
        done = [a.litellm_model for a in self.attempts if a.succeeded]
        return done[-1] if done else ""


def uses_live_model(model: OriginalModel) -> bool:
    """Live only when the model names a provider model and the site allows spending on it."""
    return bool(model.litellm_model) and settings.ATTUNE_ALLOW_LIVE_MODELS


def system_prompt(topic: Topic) -> str:
    return _system_prompt(topic.category, topic.subtopic)


def _system_prompt(category: str, subtopic: str) -> str:
    return (
        "You are a warm, careful conversational companion in a research study about emotional "
        "support. The person chose to talk about: "
        f"{category} - {subtopic}. Listen closely, respond to what they actually said, "
        "keep replies short (under 150 words), do not diagnose, and if they mention being in danger "
        "encourage them to contact local emergency services or a crisis line. The study keeps you anonymous: "
        "do not reveal, hint at or guess which AI model, company or product you are, and do not name any; "
        "if asked, say kindly that you cannot share that here and return to what they were saying."
    )


@functools.cache
def _thread_sql() -> str:
    """One read for a reply's request: the conversation's original model (every column), its topic's category
    and subtopic, and the earlier turns' messages in order (none: one row with them NULL). A fixed SQL
    string built once per process from the models' own names (as ``collection.entry_reads`` does): the ORM
    rebuilt three queries' SQL on every reply."""
    table, column = sql_table, sql_column

    return (
        f"SELECT m.*, t.{column(Topic, 'category')} AS reply_category, t.{column(Topic, 'subtopic')} AS reply_subtopic,"
        f" u.{column(Turn, 'user_message')} AS reply_user_message, u.{column(Turn, 'llm_response')} AS reply_response"
        f" FROM {table(Conversation)} c"
        f" INNER JOIN {table(OriginalModel)} m"
        f" ON m.{column(OriginalModel, 'id')} = c.{column(Conversation, 'original_model')}"
        f" INNER JOIN {table(Topic)} t ON t.{column(Topic, 'id')} = c.{column(Conversation, 'topic')}"
        f" LEFT JOIN {table(Turn)} u ON u.{column(Turn, 'conversation')} = c.{column(Conversation, 'id')}"
        f" AND u.{column(Turn, 'turn_number')} < %s"
        f" WHERE c.{column(Conversation, 'id')} = %s ORDER BY u.{column(Turn, 'turn_number')}"
    )


def build_request(conversation: Conversation, turn: Turn) -> ReplyRequest:
    """The thread the model sees for ``turn``: earlier turns in order, then this message only.

    Read in one query; the conversation's ``original_model`` is set to the model read, so the caller's next
    use of it (the identity screen's names) needs no query."""
    rows = list(OriginalModel.objects.raw(_thread_sql(), [turn.turn_number, conversation.pk]))
    if not rows:
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} is gone")
    model = rows[0]
    conversation.original_model = model
    category, subtopic = getattr(model, "reply_category"), getattr(model, "reply_subtopic")  # noqa: B009
    messages: list[dict[str, str]] = [{"role": "system", "content": _system_prompt(category, subtopic)}]
    for previous in rows:
        user_message = getattr(previous, "reply_user_message")  # noqa: B009  (columns the raw read added)
        if user_message is not None:
            messages.append({"role": "user", "content": user_message})
            messages.append({"role": "assistant", "content": getattr(previous, "reply_response")})  # noqa: B009
    messages.append({"role": "user", "content": turn.user_message})
    live = uses_live_model(model)
    return ReplyRequest(
        model_key=model.alias,
        litellm_model=model.litellm_model if live else "",
        api_base=model.api_base if live else "",
        messages=messages,
        category=category,
        subtopic=subtopic,
        turn_number=turn.turn_number,
        fallback_litellm_model=model.fallback_litellm_model if live else "",
        fallback_api_base=model.fallback_api_base if live else "",
    )


# ---------------------------------------------------------------------------
# Streaming
# ---------------------------------------------------------------------------


async def astream_reply(request: ReplyRequest, record: CallRecord | None = None) -> AsyncGenerator[str, None]:
    """Chunks of the reply as they arrive; raises ChatModelError on any provider failure.

    When the primary provider fails before sending any text and the model has a
    fallback, the fallback is asked instead (once; a failure after text was shown
    is not retried here, the participant's "Try again" does that). Each call is
    noted in ``record``.
    """
    if not request.litellm_model:
        async for chunk in _offline_stream(request):
            yield chunk
        return
    record = record if record is not None else CallRecord()
    # aclosing: a reader that leaves closes the provider stream here, in this task, not whenever the
    # abandoned generator is collected.
    primary = _astream_live(request, request.litellm_model, request.api_base, record)
    try:
        async with aclosing(primary) as stream:
            async for chunk in stream:
                yield chunk
        return
    except ChatModelError:
        # a closed record refused the call itself: nobody would count a fallback either
        if not request.fallback_litellm_model or record.closed or record.attempts[-1].text:
            raise
    logger.warning("original model %s failed on turn %s; asking its fallback", request.model_key, request.turn_number)
    fallback = _astream_live(request, request.fallback_litellm_model, request.fallback_api_base, record)
    async with aclosing(fallback) as stream:
        async for chunk in stream:
            yield chunk


def uses_direct_stream(litellm_model: str, api_base: str) -> bool:
    """Whether a reply is read straight off an OpenAI-compatible server's events rather than through litellm.

    The same test as the replay's (``attunebench.replay.llm.uses_openai_sdk``): an ``openai/...`` model at an
    ``api_base`` of its own that litellm has no rules for, so that litellm would send it the request as given.
    The answer is kept per model: only the first asking imports litellm.
    """
    from attunebench.replay.llm import EMSpec, uses_openai_sdk

    return bool(api_base) and uses_openai_sdk(
        EMSpec(name=litellm_model, litellm_model=litellm_model, api_base=api_base)
    )


def _direct_route_key() -> str:
    """The key litellm would send an OpenAI-compatible server: OPENAI_API_KEY, as for any ``openai/...`` model."""
    return os.environ.get("OPENAI_API_KEY") or "none"


def complete_text(litellm_model: str, api_base: str, messages: list[dict[str, str]]) -> str:
    """A live model's whole answer to ``messages``, not streamed (a worker's suggested rewrite); a provider failure
    raises. On the reply's route: one chat completion on our own kept-alive connections for a model on the direct
    route (``attunebench.replay.direct_call``), litellm for every other model, or when the server is behind a proxy
    or redirects."""
    timeout = settings.ATTUNE_CHAT_TIMEOUT_SECONDS
    if uses_direct_stream(litellm_model, api_base):
        from attunebench.replay import direct_call

        if direct_call.suits(api_base):
            call = direct_call.chat_completion(
                api_base=api_base,
                api_key=_direct_route_key(),
                litellm_model=litellm_model,
                messages=messages,
                params={},
                timeout=timeout,
            )
            # on the chat loop, whose connections the replies keep alive
            future = asyncio.run_coroutine_threadsafe(call, _background_loop())
            try:
                answer = future.result(timeout + _LOOP_GRACE_SECONDS)
            except direct_call.DirectRouteUnsuited:
                pass  # a redirect: litellm follows it
            except BaseException:
                future.cancel()  # the wait ended first: the call is not left running
                raise
            else:
                return str((answer["choices"][0].get("message") or {}).get("content") or "")
    from attunebench.replay.llm import imported_litellm

    litellm = imported_litellm()  # heavy: imported only when a live model is used
    response = litellm.completion(
        model=litellm_model,
        messages=messages,
        api_base=api_base or None,
        timeout=timeout,
        num_retries=0,
        max_retries=0,
    )
    return str(response.choices[0].message.content or "")


async def _provider_text(
    litellm_model: str, api_base: str, messages: list[dict[str, str]]
) -> AsyncGenerator[str, None]:
    """The reply's text as the provider streams it: straight off an OpenAI-compatible server's events, or
    through litellm for every other provider (keys from the environment, as litellm reads them)."""
    timeout = settings.ATTUNE_CHAT_TIMEOUT_SECONDS
    if uses_direct_stream(litellm_model, api_base):
        from attunebench.replay import openai_compatible, paced_stream

        key = _direct_route_key()
        if paced_stream.reachable_directly(api_base):
            # One read of the socket per batch: the tokens of the last BATCH_SECONDS decoded together.
            text_stream = paced_stream.stream_chat_text(
                api_base=api_base,
                api_key=key,
                litellm_model=litellm_model,
                messages=messages,
                timeout=timeout,
                pace=BATCH_SECONDS,
            )
        else:  # through a proxy: the HTTP client library knows how to reach it
            text_stream = openai_compatible.stream_chat_text(
                api_base=api_base, api_key=key, litellm_model=litellm_model, messages=messages, timeout=timeout
            )
        async with aclosing(text_stream) as texts:
            async for text in texts:
                yield text
        return
    from attunebench.replay.llm import imported_litellm

    litellm = imported_litellm()  # heavy: imported only when a live model is used
    response = await litellm.acompletion(
        model=litellm_model,
        messages=messages,
        api_base=api_base or None,
        stream=True,
        timeout=timeout,
        num_retries=0,
        max_retries=0,
    )
    try:
        async for part in response:
            choices = getattr(part, "choices", None) or []
            content = getattr(choices[0].delta, "content", None) if choices else None
            if content:
                yield str(content)
    finally:  # the provider's connection is given back however the reading ends
        await response.aclose()


async def _astream_live(
    request: ReplyRequest, litellm_model: str, api_base: str, record: CallRecord
) -> AsyncGenerator[str, None]:
    """One streamed call to one provider model."""
    attempt = LiveAttempt(litellm_model=litellm_model, messages=request.messages)
    record.begin(attempt)
    try:
        async with aclosing(_provider_text(litellm_model, api_base, request.messages)) as stream:
            async for text in stream:
                attempt.text += text
                yield text
    except ChatModelError:
        raise
    except Exception as exc:  # any provider, network or parsing failure
        logger.warning("original model %s failed on turn %s: %r", request.model_key, request.turn_number, exc)
        raise ChatModelError() from exc
    if not attempt.text:
        logger.warning("original model %s sent an empty reply on turn %s", request.model_key, request.turn_number)
        raise ChatModelError()
    attempt.succeeded = True


_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_lock = threading.Lock()


def _forget_loop() -> None:
    """A forked child has no loop thread (only its parent had it): it starts its own on first use."""
    global _loop, _loop_thread, _loop_lock
    _loop = _loop_thread = None
    _loop_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_loop)


def _background_loop() -> asyncio.AbstractEventLoop:
    """One long-lived event loop per process, on its own daemon thread.

    litellm caches its async HTTP clients per event loop; a loop per reply would
    leave those clients bound to closed loops. WSGI worker threads hand their
    streams to this loop instead.
    """
    global _loop, _loop_thread
    with _loop_lock:
        # a loop whose thread ended (an error escaped it) would take replies and never run them: replaced
        if _loop is None or _loop.is_closed() or _loop_thread is None or not _loop_thread.is_alive():
            loop = asyncio.new_event_loop()
            _loop_thread = threading.Thread(target=loop.run_forever, name="attune-chat-loop", daemon=True)
            _loop_thread.start()
            _loop = loop
        return _loop


# How long a reader waits, beyond the reply's own time limit, for the chat loop to say the reply is over:
# only a loop that has stopped altogether would take longer.
_LOOP_GRACE_SECONDS = 30.0


#: How long the chat loop gathers a reply's chunks before handing them to the reading thread at once. A
#: provider sends one chunk per token, 30 to 50 a second; a reader cannot tell 50 ms batches from single
#: tokens, and the server screens, encodes and writes each batch once instead of each token.
BATCH_SECONDS = 0.05


async def _pump(agen: AsyncGenerator[str, None], out: queue.SimpleQueue[object], request: ReplyRequest) -> None:
    """Put the reply's text on ``out`` as it arrives, at most once per ``BATCH_SECONDS``, on the chat loop,
    within the reply's time limit.

    The provider stream is closed before this returns, however it ends; what was gathered is handed over
    first, then the task's done callback puts the task itself on ``out``, which tells the reading thread
    the reply is over and how.
    """
    limit = settings.ATTUNE_CHAT_TIMEOUT_SECONDS
    loop = asyncio.get_running_loop()
    gathered: list[str] = []
    handover: asyncio.TimerHandle | None = None
    handed_at = -BATCH_SECONDS

    def hand_over() -> None:
        nonlocal handover, handed_at
        handover = None
        if gathered:
            out.put("".join(gathered))
            gathered.clear()
            handed_at = loop.time()

    try:
        async with asyncio.timeout(limit):
            async for chunk in agen:
                gathered.append(chunk)
                if handover is not None:
                    continue
                # Text after a quiet stretch goes at once (a paced provider stream's batches all do); text
                # within BATCH_SECONDS of the last hand-over waits for the rest of its batch.
                wait = handed_at + BATCH_SECONDS - loop.time()
                if wait <= 0:
                    hand_over()
                else:
                    handover = loop.call_later(wait, hand_over)
    except TimeoutError:
        logger.warning(
            "original model %s did not finish turn %s within %s s", request.model_key, request.turn_number, limit
        )
        raise ChatModelError() from None
    finally:
        if handover is not None:
            handover.cancel()
        hand_over()
        await agen.aclose()


def stream_reply(request: ReplyRequest, record: CallRecord | None = None) -> Generator[str, None, None]:
    """The async stream driven from synchronous code (a WSGI streaming response).

    One task on the chat loop reads the whole reply and queues it in batches of
    what arrived within ``BATCH_SECONDS``; this thread takes whatever has arrived
    each time it looks, so it wakes a few times a second per reply rather than
    once per token, and a busy server sends a few words at once instead of
    falling behind word by word. The whole reply must arrive within
    ``ATTUNE_CHAT_TIMEOUT_SECONDS``: a provider that hangs, or trickles a word
    now and then, ends in ChatModelError and frees the thread. Closing this
    generator early (the participant's browser went away) cancels the task,
    which closes the provider stream before this returns. However stuck the
    loop is, this thread waits at most the reply's time plus a grace period.
    """
    # Each provider's route is decided here, in the reader's thread: deciding may import litellm (seconds),
    # which must never stall the chat loop that every reply in the process shares.
    for model, base in (
        (request.litellm_model, request.api_base),
        (request.fallback_litellm_model, request.fallback_api_base),
    ):
        if model:
            uses_direct_stream(model, base)
    loop = _background_loop()
    out: queue.SimpleQueue[object] = queue.SimpleQueue()
    started: concurrent.futures.Future[asyncio.Task[None]] = concurrent.futures.Future()
    deadline = time.monotonic() + settings.ATTUNE_CHAT_TIMEOUT_SECONDS + _LOOP_GRACE_SECONDS

    def start() -> None:
        if not started.set_running_or_notify_cancel():  # the reader gave up on a stuck loop: no call for nobody
            return
        try:
            task = loop.create_task(_pump(astream_reply(request, record), out, request))
        except BaseException as exc:  # a loop shutting down: the reader reports it, never waits on it
            started.set_exception(exc)
            raise
        task.add_done_callback(out.put)
        started.set_result(task)

    loop.call_soon_threadsafe(start)
    try:
        task = started.result(timeout=_LOOP_GRACE_SECONDS)
    except Exception as exc:
        if not started.cancel():  # it is starting right now: stop the call it starts
            with suppress(Exception):
                loop.call_soon_threadsafe(started.result(timeout=_LOOP_GRACE_SECONDS).cancel)
        logger.error("the chat loop did not start the reply for turn %s: %r", request.turn_number, exc)
        raise ChatModelError() from exc
    over = silent = False
    try:
        while True:
            items = [_take(out, deadline)]
            while not isinstance(items[-1], asyncio.Task):
                try:
                    items.append(out.get_nowait())
                except queue.Empty:
                    break
            over = isinstance(items[-1], asyncio.Task)
            text = "".join(item for item in items if isinstance(item, str))
            if text:
                yield text
            if over:
                if task.cancelled():  # by something other than this reader (the loop shutting down)
                    raise ChatModelError()
                failure = task.exception()  # the task is done: its outcome no longer changes
                if failure is not None:
                    raise failure
                return
    except ChatModelError:
        silent = not over  # raised by _take: a loop that sends nothing will not say when it has stopped either
        raise
    finally:
        if not over:
            loop.call_soon_threadsafe(task.cancel)
            closing = time.monotonic() + _LOOP_GRACE_SECONDS
            while not silent and not isinstance(_take(out, min(deadline, closing)), asyncio.Task):
                pass


def _take(out: queue.SimpleQueue[object], deadline: float) -> object:
    """The next item the chat loop queued; a loop silent until ``deadline`` is a failure, never a hung thread."""
    try:
        return out.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        logger.error("the chat loop sent nothing in time: the reply is abandoned")
        raise ChatModelError() from None


_slots_lock = threading.Lock()
_streams_in_flight = 0
# Summed over the live web processes of a host at scrape time (attune_site/metrics.py).
OPEN_STREAMS = Gauge(
    "attune_reply_streams_open", "Participant reply streams open in the web processes", multiprocess_mode="livesum"
)


@contextmanager
def reply_slot() -> Iterator[bool]:
    """Claim one of this process's ``ATTUNE_STREAMS_PER_PROCESS`` reply slots; yields whether it got one.

    Every reply holds a server thread while it waits on the provider; the slots
    keep the process's remaining threads for page loads and form posts, so
    however many providers hang, other participants' pages still load. A reply
    without a slot is refused at once (the participant sees the calm retry
    message) rather than queued behind the others.
    """
    global _streams_in_flight
    with _slots_lock:
        granted = _streams_in_flight < settings.ATTUNE_STREAMS_PER_PROCESS
        if granted:
            _streams_in_flight += 1
            OPEN_STREAMS.inc()
    try:
        yield granted
    finally:
        if granted:
            with _slots_lock:
                _streams_in_flight -= 1
                OPEN_STREAMS.dec()


# ---------------------------------------------------------------------------
# Offline scripted model
# ---------------------------------------------------------------------------

_FEELING_WORDS = (
    "overwhelmed",
    "anxious",
    "worried",
    "scared",
    "afraid",
    "nervous",
    "stressed",
    "exhausted",
    "tired",
    "sad",
    "upset",
    "hurt",
    "lonely",
    "angry",
    "frustrated",
    "annoyed",
    "guilty",
    "ashamed",
    "embarrassed",
    "confused",
    "lost",
    "stuck",
    "jealous",
    "disappointed",
    "numb",
    "hopeless",
    "excited",
    "happy",
    "proud",
    "hopeful",
    "relieved",
    "grateful",
    "determined",
)

_TOPIC_LINES: dict[str, tuple[str, ...]] = {
    "Romantic relationships": (
        "Relationships touch such a tender part of us, so it makes sense this is weighing on you.",
        "When someone we are close to is involved, even small moments can carry a lot of feeling.",
    ),
    "Family": (
        "Family can be where we feel the most and say the least, which makes this hard to untangle.",
        "With family there is often a long history behind one moment, and that history counts too.",
    ),
    "Friendship": (
        "Friendships matter a great deal, and changes in them can hurt more than people expect.",
        "It can be lonely when a friendship doesn't feel the way it used to.",
    ),
    "Work": (
        "Work takes up so much of our time and energy that it is hard to leave it at the door.",
        "Pressure at work can spill into everything else, including how we rest.",
    ),
    "Study": (
        "Studying can feel like it says something about who we are, which raises the stakes.",
        "There is a lot of pressure in study, and much of it is invisible to other people.",
    ),
    "Money": (
        "Money worries have a way of following us around, even at quiet moments.",
        "Money stress is very real, and it is not a sign of failing at anything.",
    ),
    "Health": (
        "Health worries can make everything feel uncertain, and uncertainty is tiring.",
        "When our body or health is involved, it is natural to feel unsettled.",
    ),
    "Grief": (
        "Grief does not follow a timetable, and there is no right way to feel it.",
        "Loss can show up in unexpected moments, and every one of those moments is valid.",
    ),
    "Identity": (
        "Questions about who we are and where we belong go deep, and they deserve time.",
        "Working out where you fit can be unsettling and meaningful at the same time.",
    ),
    "Hobbies": (
        "Things we do for enjoyment can carry real feelings too, including pressure and doubt.",
        "It matters when something that used to feel good starts to feel different.",
    ),
}
_GENERAL_LINES = (
    "What you are describing sounds like a lot to carry.",
    "It makes sense that this has been on your mind.",
    "You are being very honest about this, and that takes courage.",
    "It sounds like you have been thinking about this carefully.",
    "There is no rush here; we can go at whatever pace feels right.",
    "Whatever you are feeling about it is allowed.",
)
_OPENERS_WITH_FEELING = (
    "It sounds like you're feeling {feeling}, and that is completely understandable.",
    "Thank you for telling me you feel {feeling}. That sounds hard.",
    "Feeling {feeling} about this makes a lot of sense to me.",
)
_OPENERS = (
    "Thank you for sharing that with me.",
    "I'm glad you told me about this.",
    "I hear you, and I'm here to listen.",
)
_FOLLOW_UP_OPENERS = (
    "Thank you for saying more.",
    "That helps me understand a bit better.",
    "I appreciate you going into that.",
)
_REFLECTIVE_CLOSERS = (
    "What part of it feels heaviest for you right now?",
    "When you think about it, what stands out most?",
    "How has this been affecting you day to day?",
    "What would feel most helpful to talk through next?",
)
_PRACTICAL_CLOSERS = (
    "Would it help to think about one small step that could make the next few days a little easier?",
    "Is there someone you trust who could share some of this with you?",
    "If you had a little more room to breathe, what would you want to do first?",
    "Would it help to look at the options you have, one at a time?",
)


def _pick(options: tuple[str, ...], seed: int, salt: int) -> str:
    return options[(seed + salt) % len(options)]


def _detected_feeling(message: str) -> str | None:
    words = re.findall(r"[a-z]+", message.lower())
    for word in _FEELING_WORDS:
        if word in words:
            return word
    return None


def _echo(message: str) -> str:
    """A short phrase from the participant's own first sentence (a whole clause), to reflect back."""
    first = re.split(r"(?<=[.!?])\s+", message.strip(), maxsplit=1)[0]
    for clause in re.split(r",|;| and | but | because ", first):
        words = clause.split()
        if 3 <= len(words) <= 12:
            return " ".join(words).rstrip(".,;:!?")
    return ""


def offline_reply(request: ReplyRequest) -> str:
    """A sensible, varied, topic-aware supportive reply, deterministic for the same input.

    Two styles (reflective, practical) are derived from the model key so that a
    pool of offline models does not answer identically.
    """
    digest = hashlib.sha256(f"{request.model_key}|{request.turn_number}|{request.user_message}".encode()).digest()
    seed = int.from_bytes(digest[:4], "big")
    practical = int(hashlib.sha256(request.model_key.encode()).hexdigest(), 16) % 2 == 1
    feeling = _detected_feeling(request.user_message)
    if feeling:
        opener = _pick(_OPENERS_WITH_FEELING, seed, 0).format(feeling=feeling)
    elif request.turn_number > 1:
        opener = _pick(_FOLLOW_UP_OPENERS, seed, 1)
    else:
        opener = _pick(_OPENERS, seed, 2)
    if request.turn_number == 1:
        middle = _pick(_TOPIC_LINES.get(request.category, _GENERAL_LINES), seed, 3)
    else:  # later turns: a general line that changes with the turn, so replies do not repeat
        # A per-conversation offset plus the turn number: consecutive turns never share a line.
        offset = int(hashlib.sha256(f"{request.model_key}|{request.subtopic}".encode()).hexdigest(), 16)
        middle = _GENERAL_LINES[(offset + request.turn_number) % len(_GENERAL_LINES)]
    detail = _echo(request.user_message)
    if detail and seed % 3 != 0:
        middle = f'You said "{detail}", and I want to make sure I understand that. {middle}'
    closer = _pick(_PRACTICAL_CLOSERS if practical else _REFLECTIVE_CLOSERS, seed, request.turn_number)
    return f"{opener} {middle} {closer}"


async def _offline_stream(request: ReplyRequest) -> AsyncIterator[str]:
    """The offline reply in small pieces, paced like a real stream (pace set by a setting)."""
    if settings.ATTUNE_OFFLINE_MODEL_FAILS:
        logger.warning("offline model failing on purpose (ATTUNE_OFFLINE_MODEL_FAILS) on turn %s", request.turn_number)
        raise ChatModelError()
    delay = settings.ATTUNE_OFFLINE_STREAM_DELAY
    words = offline_reply(request).split(" ")
    for start in range(0, len(words), 3):
        piece = " ".join(words[start : start + 3])
        yield piece if start == 0 else " " + piece
        if delay:
            await asyncio.sleep(delay)
