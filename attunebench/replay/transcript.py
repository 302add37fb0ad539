"""Call records: what each model call of a replay was sent, answered and cost.

The replay protocol keeps one ``CallRecord`` per request it sent (a parse
retry is a request of its own, with its attempt number) and one per answer
reused from the call cache, so a researcher can read a run-conversation the
way the model saw it. Pure: no Django; the web layer stores the records.

Choices:
- The messages are the exact list handed to the backend (the re-ask after an
  unusable reply includes the correction turn), so a record shows what the
  provider received, not a reconstruction.
- ``latency_s`` is the wall time of the attempt that answered (transport
  retries and their backoff are counted in ``transport_attempts`` instead).
- Text is capped (``MAX_TEXT_CHARS`` per message and per reply) so one runaway
  reply cannot make a row unbounded; a capped text says so at its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

MAX_TEXT_CHARS: Final = 200_000
TRUNCATED_NOTE: Final = "\n[… truncated by Attune: {dropped} more characters not stored]"

ROLE_EM: Final = "em"
ROLE_JUDGE: Final = "judge"


def capped(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters, saying how much was dropped."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED_NOTE.format(dropped=len(text) - limit)


def capped_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{**m, "content": capped(m.get("content", "")) or ""} for m in messages]


def answer_json(value: Any) -> dict[str, Any] | None:
    """A parsed answer as plain JSON (the validated fields), or None."""
    if value is None:
        return None
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        result = dump(mode="json")
        return dict(result) if isinstance(result, Mapping) else {"value": result}
    return {"value": str(value)}


@dataclass
class CallRecord:
    """One request sent to a model (or one answer reused from the cache)."""

    sequence: int  # order in which the conversation's calls started (0-based)
    call_type: str
    turn_number: int | None
    role: str  # "em" or "judge"
    model: str
    attempt: int = 1  # 1 for the first ask, 2.. for re-asks after an unusable reply
    messages: list[dict[str, str]] = field(default_factory=list)
    raw_reply: str | None = None
    parsed: dict[str, Any] | None = None
    parse_error: str = ""
    error: str = ""  # the transport or permanent failure when no reply came
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float | None = None
    transport_attempts: int = 0  # requests the scheduler sent for this attempt (1 = no transport retry)
    cached: bool = False

    def reused(self, reply: str | None, prompt_tokens: int, completion_tokens: int, cost_usd: float | None) -> None:
        """An answer not sent for now (the call cache, a dead attempt's journal): its reply and what it cost then."""
        self.raw_reply = capped(reply)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_usd = cost_usd
        self.cached = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "call_type": self.call_type,
            "turn_number": self.turn_number,
            "role": self.role,
            "model": self.model,
            "attempt": self.attempt,
            "messages": self.messages,
            "raw_reply": self.raw_reply,
            "parsed": self.parsed,
            "parse_error": self.parse_error,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "transport_attempts": self.transport_attempts,
            "cached": self.cached,
        }
