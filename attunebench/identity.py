"""Screening replies for model, provider and product names before a participant sees them.

The original model is anonymised (SPEC 1): a participant must never learn which
model they talk to, because that knowledge changes how they rate it. Live models
sometimes name themselves ("I'm GPT-4o, made by OpenAI") whatever the system
prompt says, so every reply is scanned against the maintained list in
:data:`attunebench.catalogue.IDENTITY_NAMES` (plus the configured model's own
name) before it is shown.

Matching rules, chosen so that ordinary words do not trip it:

- names are matched case-insensitively as whole words, with or without a space,
  hyphen, dot or underscore between their parts ("OpenAI", "open ai",
  "Open-AI"), and a following version ("GPT-4o", "gpt 4", "Llama-3.1 70B")
  belongs to the match;
- a distinctive name (GPT, OpenAI, Anthropic, DeepSeek, Qwen ...) always counts;
- an ambiguous one, which is also an ordinary word or a person's name (Claude,
  Gemini the star sign, a llama, Google as a verb), counts only with a version
  after it or beside words that make it a self-description: right after "I am",
  "I'm", "my name is", "call me", "called", "named", "as", "this is", a maker
  ("made by", "created by", "trained by" ...) or "AI"/"model"/"assistant"; or
  followed in the same sentence, within a few words, by "AI", "model",
  "assistant", "chatbot" or "LLM". "As a Gemini you ..." and "my friend Claude"
  pass; "I'm Claude" and "Gemini is an AI model" do not.

Pure Python: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from attunebench import catalogue as cat

_SEPARATOR = r"[\s\-._]?"
_VERSION = (
    r"(?:[\s\-._]?(?:v?\d+(?:\.\d+)*[a-z]{0,2}|o\d|turbo|mini|nano|pro|ultra|flash|opus|sonnet|haiku|instant"
    r"|instruct|r\d|\d+b)(?![a-z0-9]))"
)
_BEFORE_CUE = re.compile(
    r"(?:\bi\s*am|\bi['’]?m|\bmy\s+name\s+is|\bcall\s+me|\bcalled|\bnamed|\bas|\bthis\s+is|\bai|\bmodel|\bassistant"
    r"|\bchatbot|\bllm|\b(?:ai|model|assistant|chatbot)\s+from"
    r"|\b(?:made|created|built|developed|trained|designed|powered|produced|owned|run)\s+(?:by|at|from))"
    r"[\s,:]+$",
    re.IGNORECASE,
)
_AFTER_CUE = re.compile(
    r"^[^.!?\n]{0,40}?\b(?:ai|a\.i\.|model|language\s+model|llm|assistant|chatbot|chat\s*bot)\b", re.IGNORECASE
)
#: Characters of context looked at before an ambiguous name.
_BEFORE_WINDOW = 40


@dataclass(frozen=True)
class IdentityMatch:
    """One name found in a text: which catalogue entry, and where."""

    label: str
    kind: str
    start: int
    end: int
    text: str


def _compile(names: list[cat.IdentityName]) -> re.Pattern[str]:
    """One pattern for every name (one pass over the text); group ``n<i>`` is ``names[i]``.

    At one position the first listed name that matches wins, so longer names that begin
    like a shorter one are listed first (ChatGPT before GPT, Meta AI before Meta).
    """
    bodies = "|".join(f"(?P<n{i}>{n.pattern.replace('~', _SEPARATOR)})" for i, n in enumerate(names))
    return re.compile(rf"(?<![a-z0-9])(?:{bodies})(?P<version>{_VERSION}*)(?![a-z0-9])", re.IGNORECASE)


def _configured_pattern(value: str) -> str:
    """A configured name (``acme-frontier-9000``) as a pattern with flexible separators."""
    parts = [re.escape(p) for p in re.split(r"[\s\-._]+", value.strip()) if p]
    return "~".join(parts)


def configured_names(*values: str) -> list[str]:
    """The parts of a model's configuration worth screening for: its name, provider and litellm model.

    ``openai/gpt-4o`` contributes ``gpt-4o``; values shorter than three
    characters are left out (they would match ordinary words).
    """
    out: list[str] = []
    for value in values:
        cleaned = (value or "").rsplit("/", 1)[-1].strip()
        if len(cleaned) >= 3 and cleaned.lower() not in {n.lower() for n in out}:
            out.append(cleaned)
    return out


class IdentityScanner:
    """Finds catalogue names (and optionally a configured model's own names) in a text."""

    def __init__(self, extra_names: Iterable[str] = ()) -> None:
        configured = [
            cat.IdentityName(value, "configured", pattern)
            for value in sorted(extra_names, key=len, reverse=True)
            if (pattern := _configured_pattern(value))
        ]
        self._names = [*configured, *cat.IDENTITY_NAMES]
        self._regex = _compile(self._names)

    def find(self, text: str, start: int = 0) -> list[IdentityMatch]:
        """Every leak in ``text`` from ``start`` on, in order, overlapping finds merged (the longer one kept).

        Context before ``start`` still counts (word boundaries, "I'm" before a name): ``start`` only
        saves rescanning text already screened.
        """
        found: list[IdentityMatch] = []
        for match in self._regex.finditer(text, start):
            name = self._names[int(next(k for k, v in match.groupdict().items() if v is not None and k[0] == "n")[1:])]
            if name.ambiguous and not _self_description(text, match):
                continue
            found.append(IdentityMatch(name.label, name.kind, match.start(), match.end(), match[0]))
        found.sort(key=lambda m: (m.start, -(m.end - m.start)))
        merged: list[IdentityMatch] = []
        for hit in found:
            if merged and hit.start < merged[-1].end:
                continue
            merged.append(hit)
        return merged

    def mask(self, text: str) -> str:
        """``text`` with every leak replaced by :data:`catalogue.IDENTITY_MASK`."""
        out, last = [], 0
        for match in self.find(text):
            out.append(text[last : match.start])
            out.append(cat.IDENTITY_MASK)
            last = match.end
        out.append(text[last:])
        return "".join(out)


def _self_description(text: str, match: re.Match[str]) -> bool:
    """Whether an ambiguous name is used as a model's name (see the module docstring)."""
    if match["version"]:
        return True
    before = text[max(0, match.start() - _BEFORE_WINDOW) : match.start()]
    if _BEFORE_CUE.search(before):
        return True
    return bool(_AFTER_CUE.search(text[match.end() :]))


def leak_labels(matches: Iterable[IdentityMatch]) -> list[str]:
    """The distinct labels of some matches, in order of first appearance (what a turn is flagged with)."""
    out: list[str] = []
    for match in matches:
        if match.label not in out:
            out.append(match.label)
    return out


class StreamScreen:
    """Screens a reply that arrives in pieces, releasing only text that can no longer be part of a name.

    The last :attr:`HOLD` characters stay back (cut at a space, so no word is
    split) until more text or the end arrives: a name, its version and the
    words that decide whether an ambiguous name is a self-description all fit
    in that window, so a name is always complete, with its context, before any
    of it could be released. ``feed`` and ``finish`` return the text to show
    now, or None once a leak has been found (the caller then discards the reply).
    """

    HOLD = 80
    #: Text already released is rescanned only this far back: a name and its context fit in it.
    RESCAN = HOLD + _BEFORE_WINDOW
    #: Providers send a few characters per chunk; screening every chunk would rescan the same
    #: window many times, so the screen runs once this much new text has arrived (nothing is
    #: released in between, so nothing unscreened is ever shown).
    SCAN_EVERY = 24

    def __init__(self, scanner: IdentityScanner) -> None:
        self.scanner = scanner
        self.text = ""
        self.released = 0
        self.scanned = 0
        self.leaks: list[IdentityMatch] = []

    def feed(self, chunk: str) -> str | None:
        self.text += chunk
        if len(self.text) - self.scanned < self.SCAN_EVERY:
            return ""
        if self._leaked():
            return None
        cut = len(self.text) - self.HOLD
        if cut <= self.released:
            return ""
        space = max(self.text.rfind(" ", self.released, cut + 1), self.text.rfind("\n", self.released, cut + 1))
        if space <= self.released:
            return ""
        out = self.text[self.released : space]
        self.released = space
        return out

    def finish(self) -> str | None:
        if self._leaked():
            return None
        out = self.text[self.released :]
        self.released = len(self.text)
        return out

    def _leaked(self) -> bool:
        # Released text was screened with at least HOLD characters after it; only the rest can change.
        self.leaks = self.scanner.find(self.text, max(0, self.released - self.RESCAN))
        self.scanned = len(self.text)
        return bool(self.leaks)
