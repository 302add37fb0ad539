"""The model-improved rewrite of a reply, shown to the participant before they write their own.

Live rewrites use the model named by ``settings.ATTUNE_ALTERNATE_MODEL`` (or, when
that is unset, the conversation's own original model) and only when
``ATTUNE_ALLOW_LIVE_MODELS`` is on, called on the reply's own route
(``collection.chat_model.complete_text``). If the live call fails the failure is
logged with its cause and the offline rewrite is used, because a participant must
never be stuck on an annotation page by a provider outage; the offline rewrite is
always available.
"""

from __future__ import annotations

import logging
import re
import time

from django.conf import settings

from collection.chat_model import LiveAttempt, complete_text, uses_live_model
from collection.identity_guard import identity_scanner
from collection.live_spend import do_record_calls
from collection.models import Turn
from collection.study_flow import claim_live_call

logger = logging.getLogger("attune.alternates")

REWRITE_INSTRUCTIONS = (
    "Rewrite the assistant's last reply so that it is more emotionally attuned: acknowledge the "
    "person's feelings in their own words, avoid assumptions, keep any useful suggestion but ask "
    "before advising, and end with one gentle open question. Under 120 words. Reply with the "
    "rewritten reply only."
)


def _live_model_for(turn: Turn) -> tuple[str, str] | None:
    """(litellm model, api base) to rewrite with, or None when the offline rewrite must be used."""
    if not settings.ATTUNE_ALLOW_LIVE_MODELS:
        return None
    configured = settings.ATTUNE_ALTERNATE_MODEL
    if configured:
        return configured, settings.ATTUNE_ALTERNATE_API_BASE
    model = turn.conversation.original_model
    if uses_live_model(model):
        return model.litellm_model, model.api_base
    return None


def offline_rewrite(user_message: str, reply: str) -> str:
    """A gentler, more reflective version of ``reply`` built from the participant's own words.

    Deterministic, so a page refresh before saving shows the same text.
    """
    snippet = re.sub(r"\s+", " ", user_message).strip()
    if len(snippet) > 90:
        snippet = snippet[:90].rsplit(" ", 1)[0] + "..."
    snippet = snippet.rstrip(".,;:!? ")
    sentences = re.split(r"(?<=[.!?])\s+", reply.strip())
    formulaic = (
        "thank you",
        "i'm glad",
        "i hear",
        "you said",
        "i appreciate",
        "that helps",
        "there is no rush",
        "there is no right",
    )
    kept = [s for s in sentences if s and not s.endswith("?") and not s.lower().startswith(formulaic)][:1]
    parts = [
        f'When you say "{snippet}", I can hear how much this matters to you.',
        *kept,
        "There is no right or wrong way to feel about it, and we can take it at your pace.",
        "What would feel most helpful right now: talking it through, or thinking about a next step together?",
    ]
    return " ".join(parts)


def improved_reply(turn: Turn) -> str:
    """The rewrite for ``turn`` (live when configured, otherwise or on failure offline)."""
    live = _live_model_for(turn)
    participant = turn.conversation.participant
    study = participant.study if participant is not None else None
    if live is not None and study is not None and not claim_live_call(study):
        logger.warning("study %s has spent its live-model budget; turn %s is rewritten offline", study.slug, turn.pk)
        live = None
    if live is not None:
        model, api_base = live
        messages = [
            {"role": "system", "content": REWRITE_INSTRUCTIONS},
            {
                "role": "user",
                "content": f"Person said:\n{turn.user_message}\n\nAssistant replied:\n{turn.llm_response}",
            },
        ]
        attempt = LiveAttempt(litellm_model=model, messages=messages)
        # One line per provider call, carrying the request id of the page that queued it (attune_site/log_format.py).
        logger.info("rewrite of turn %s: calling %s", turn.pk, model)
        started = time.perf_counter()
        try:
            attempt.text = complete_text(model, api_base, messages).strip()
            attempt.succeeded = True
            logger.info("rewrite of turn %s: %s answered in %.2f s", turn.pk, model, time.perf_counter() - started)
        except Exception:  # provider failure: report it, then fall back so the participant can go on
            logger.exception("live rewrite for turn %s failed; using the offline rewrite", turn.pk)
        if study is not None:  # a rewrite is paid like a reply: it counts in the study's dollar spend
            do_record_calls(study, turn, [attempt])
        if attempt.text:
            return _screened(turn, attempt.text)
        if attempt.succeeded:
            logger.warning("live rewrite for turn %s was empty; using the offline rewrite", turn.pk)
    return _screened(turn, offline_rewrite(turn.user_message, turn.llm_response))


def _screened(turn: Turn, text: str) -> str:
    """The rewrite with any model, provider or product name masked: it must not copy or add a leak."""
    return identity_scanner(turn.conversation.original_model).mask(text)
