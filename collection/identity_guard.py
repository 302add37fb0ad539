"""Every reply is screened for model, provider and product names before a participant sees any of it.

Streaming and screening together: a reply is streamed through
:class:`attunebench.identity.StreamScreen`, which holds back the last stretch
of text until it can no longer be part of a name, so no name ever reaches the
browser, not even in part. When a name turns up, the attempt is dropped (its
provider stream closed), the client is told to clear what it had shown of it
(a ``restart`` event: what it showed was a clean prefix), and the reply is asked
for again, at most :data:`MAX_REGENERATIONS` times, with a reminder in the
system prompt. If every attempt names itself, the last one is read to the end
and shown with each name replaced by the catalogue mask. The turn records the
outcome (``clean``, ``regenerated`` or ``masked``) and the names caught; the
collection dashboard counts them (as Chatbot Arena sets aside battles in which
a model revealed its identity).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

from attunebench.identity import IdentityScanner, StreamScreen, configured_names, leak_labels
from collection.chat_model import CallRecord, ReplyRequest, stream_reply
from collection.models import IDENTITY_CLEAN, IDENTITY_MASKED, IDENTITY_REGENERATED, OriginalModel

logger = logging.getLogger("attune.chat")

#: How many times a reply that named a model, provider or product is asked for again before it is masked.
MAX_REGENERATIONS = 2

REGENERATION_REMINDER = (
    " Important: never state, hint at or guess which AI model, company or product you are, and never name "
    "any AI model, company or product; if asked, say that you cannot share that in this study."
)


def identity_scanner(model: OriginalModel) -> IdentityScanner:
    """The catalogue's names plus the model's own configured name, provider and litellm model."""
    return IdentityScanner(configured_names(model.name, model.provider, model.litellm_model))


def _with_reminder(request: ReplyRequest) -> ReplyRequest:
    messages = [dict(m) for m in request.messages]
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] += REGENERATION_REMINDER
    return dataclasses.replace(request, messages=messages)


class GuardedReply:
    """One reply, screened as it streams; after :meth:`events` is exhausted, ``text``, ``outcome`` and
    ``leaks`` hold what to store. Provider failures propagate as ``ChatModelError`` (nothing is stored)."""

    def __init__(self, request: ReplyRequest, scanner: IdentityScanner) -> None:
        self.request = request
        self.scanner = scanner
        self.text = ""
        self.outcome = IDENTITY_CLEAN
        self.leaks: list[str] = []
        #: Every live call this reply made (primary, fallback, regenerations): spend and ``answered_by``.
        self.record = CallRecord()

    def events(self) -> Iterator[tuple[str, str]]:
        """``("delta", text)`` for text that may be shown; ``("restart", "")`` when shown text must be cleared."""
        request = self.request
        for attempt in range(MAX_REGENERATIONS + 1):
            last = attempt == MAX_REGENERATIONS
            screen = StreamScreen(self.scanner)
            shown = False
            leaked = False
            stream = stream_reply(request, self.record)
            try:
                for chunk in stream:
                    if leaked:  # the last attempt: read it to the end, to mask it whole
                        screen.text += chunk
                        continue
                    out = screen.feed(chunk)
                    if out is None:
                        leaked = True
                        if not last:
                            break
                    elif out:
                        shown = True
                        yield ("delta", out)
            finally:
                stream.close()
            if not leaked:
                rest = screen.finish()
                if rest is not None:
                    if rest:
                        yield ("delta", rest)
                    self.text = screen.text.strip()
                    self.outcome = IDENTITY_REGENERATED if self.leaks else IDENTITY_CLEAN
                    return
            found = leak_labels(self.scanner.find(screen.text))
            self.leaks += [label for label in found if label not in self.leaks]
            logger.warning(
                "original model %s named %s on turn %s (attempt %s)",
                request.model_key,
                ", ".join(found),
                request.turn_number,
                attempt + 1,
            )
            if shown:
                yield ("restart", "")
            if last:
                self.text = self.scanner.mask(screen.text).strip()
                self.outcome = IDENTITY_MASKED
                yield ("delta", self.text)
                return
            request = _with_reminder(self.request)
