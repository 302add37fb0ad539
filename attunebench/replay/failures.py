"""Why model calls fail, in four kinds a researcher can act on, and when a replay stops early.

The kinds (``REASONS``) are what a researcher does next:

- ``connection``: nothing answered at the address (refused, unknown host, dropped): start the server or fix
  the address;
- ``4xx``: the provider refused the request (bad key, unknown model, rate limit): fix the configuration;
- ``5xx/timeout``: the provider failed or was too slow: try again later;
- ``unusable answer``: the model answered, but not in the shape AttuneBench asks for: a model question.

``FailureWatch`` keeps a replay's failures by kind and its last error (the progress line shows both) and
stops the replay early when its first attempts all fail for one reason: a closed port or a model that never
answers in JSON would otherwise be retried for minutes before the run says anything. Overload answers
(429, 503) never count towards the stop: the scheduler slows down for them and they pass. Pure: no Django.
"""

from __future__ import annotations

import re
import socket
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from attunebench.replay.scheduler import PermanentCallError, TransientCallError, is_overload

CONNECTION: Final = "connection"
CLIENT_ERROR: Final = "4xx"
SERVER_ERROR: Final = "5xx/timeout"
UNUSABLE: Final = "unusable answer"
REASONS: Final = (CONNECTION, CLIENT_ERROR, SERVER_ERROR, UNUSABLE)

#: What to do about each kind, said once when a replay stops or ends with failures.
ADVICE: Final = {
    CONNECTION: "is the server running at that address, and is the address right?",
    CLIENT_ERROR: "the provider refused the requests: check the model name and the API key",
    SERVER_ERROR: "the provider failed or was too slow: try again later, or lower --concurrency",
    UNUSABLE: "the model does not answer in AttuneBench's JSON format (docs/evaluate.md shows what it is asked)",
}

#: Attempts that must all fail for one reason, before any call succeeds, to stop a replay early.
DEFAULT_STOP_AFTER: Final = 20
#: The longest error text shown on one line.
LINE_CHARS: Final = 160

# Exceptions (by class name, so no HTTP library is imported here) raised when a connection was never opened.
_NEVER_CONNECTED_NAMES: Final = frozenset({"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "gaierror"})


def never_connected(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) says the connection was never opened, so the request
    reached nobody: refused, unknown host, connect timeout."""
    seen: set[int] = set()
    current: BaseException | None = exc
    stack = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (ConnectionRefusedError, socket.gaierror)):
            return True
        if type(current).__name__ in _NEVER_CONNECTED_NAMES:
            return True
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a provider asks to wait before the next try, from its retry-after-ms or Retry-After header (names
    in any case); None without one, or for an HTTP-date Retry-After (the scheduler's own backoff then)."""
    if not headers:
        return None
    lowered = {str(k).lower(): v for k, v in dict(headers).items()}
    try:
        if "retry-after-ms" in lowered:
            return float(lowered["retry-after-ms"]) / 1000
        if "retry-after" in lowered:
            return float(lowered["retry-after"])
    except (TypeError, ValueError):
        return None
    return None


def reason_of(exc: BaseException) -> str:
    """The kind of a transport failure (one of ``REASONS``)."""
    if isinstance(exc, TransientCallError):
        if exc.kind in ("connection", "courier", "journal"):
            return CONNECTION
        if exc.kind == "invalid-answer":
            return UNUSABLE
        if exc.kind == "429" or (exc.status is not None and 400 <= exc.status < 500 and exc.status != 408):
            return CLIENT_ERROR
        return SERVER_ERROR
    if isinstance(exc, PermanentCallError):
        return SERVER_ERROR if exc.status is not None and exc.status >= 500 else CLIENT_ERROR
    return SERVER_ERROR


def reason_of_record(record: Mapping[str, Any]) -> str:
    """The kind of a failed call as a run file lists it (``failed_calls``); files written before the kind was
    recorded are read from their error text."""
    reason = record.get("reason")
    if reason in REASONS:
        return str(reason)
    if record.get("kind") == "unusable_reply":
        return UNUSABLE
    error = str(record.get("error") or "").lower()
    if "connection" in error or "courier" in error:
        return CONNECTION
    if re.search(r"\b4\d\d\b|permanent error|authentication|not found|badrequest", error):
        return CLIENT_ERROR
    return SERVER_ERROR


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class StoppedEarly(Exception):
    """A replay whose first attempts all failed for one reason, stopped before it retried for minutes."""

    def __init__(self, reason: str, attempts: int, example: str) -> None:
        super().__init__(reason, attempts, example)  # the arguments, so it crosses a process boundary intact
        self.reason = reason
        self.attempts = attempts
        self.example = example

    def __str__(self) -> str:
        return (
            f"stopped early: the first {self.attempts} attempts all failed the same way ({self.reason}): "
            f"{self.example.rstrip('.')}. {ADVICE.get(self.reason, '').capitalize()}".rstrip()
        )


class FailureWatch:
    """A replay's failed calls by kind, its last error and its never-connected attempts; and the early stop.

    ``stop_after`` (0: never) is how many attempts must fail for one reason, before any call succeeded, to
    stop the replay: every later attempt then raises the same ``StoppedEarly``.
    """

    def __init__(self, stop_after: int = DEFAULT_STOP_AFTER) -> None:
        if stop_after < 0:
            raise ValueError("stop_after must be 0 (never) or more")
        self.stop_after = stop_after
        self.failed_calls: Counter[str] = Counter()
        self.unconnected = 0
        self.last_error = ""
        self.stopped: StoppedEarly | None = None
        self._armed = stop_after > 0
        self._reason: str | None = None
        self._run = 0

    def succeeded(self) -> None:
        """A call got a usable answer: the replay works, it is never stopped early from now on."""
        self._armed = False

    def attempt_failed(self, reason: str, message: str, exc: BaseException | None = None) -> None:
        """One request failed (or its answer was unusable); raises ``StoppedEarly`` once the stop is reached."""
        self.last_error = one_line(message)
        if self.stopped is not None:
            raise self.stopped
        if not self._armed or (isinstance(exc, TransientCallError) and is_overload(exc)):
            return
        if self._reason not in (None, reason):
            self._armed = False  # two reasons: not one cause to report, the replay goes on
            return
        self._reason = reason
        self._run += 1
        if self._run >= self.stop_after:
            self.stopped = StoppedEarly(reason, self._run, self.last_error)
            raise self.stopped

    def call_failed(self, reason: str) -> None:
        """A logical call was given up (after its retries): counted by kind for the progress line."""
        self.failed_calls[reason] += 1

    def describe(self) -> str:
        """The progress line's part on failures: kinds with counts, never-connected attempts, the last error."""
        parts = []
        if self.failed_calls:
            parts.append("failed: " + ", ".join(f"{r} {self.failed_calls[r]}" for r in REASONS if self.failed_calls[r]))
        if self.unconnected:
            parts.append(f"{self.unconnected} attempts never connected")
        if self.last_error:
            parts.append(f"last error: {self.last_error}")
        return "".join(f" | {p}" for p in parts)


@dataclass(frozen=True)
class FailureGroup:
    """Failed calls of one kind: how many, and one of them as an example."""

    reason: str
    count: int
    example: str


def group_failures(records: Iterable[tuple[str, Mapping[str, Any]]]) -> list[FailureGroup]:
    """(conversation id, ``failed_calls`` record) pairs grouped by kind, in ``REASONS`` order, one example each."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for conversation_id, record in records:
        reason = reason_of_record(record)
        counts[reason] += 1
        if reason not in examples:
            turn = record.get("turnNumber")
            where = f"{conversation_id} turn {turn}" if turn is not None else f"{conversation_id} post-conversation"
            examples[reason] = f"{where} {record.get('call')}: {one_line(str(record.get('error') or ''))}"
    return [FailureGroup(r, counts[r], examples[r]) for r in REASONS if counts[r]]


def describe_groups(groups: list[FailureGroup]) -> str:
    """The end-of-run summary of failed calls, one line per kind with its example and what to do."""
    lines = [f"Failed calls by kind ({sum(g.count for g in groups)} in all):"]
    for group in groups:
        lines.append(f"  {group.reason}: {group.count}, e.g. {group.example}")
        lines.append(f"    → {ADVICE[group.reason]}")
    return "\n".join(lines)
