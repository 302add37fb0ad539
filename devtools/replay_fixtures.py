"""Test doubles for the replay engine: marked conversations and a recording backend.

``marked_conversation`` puts a unique marker into every piece of text of every
turn (message, reply, alternates), so a test can prove that the messages sent
for turn t contain no marker of a later turn, and that the participant's
golden reply appears only where SPEC 4 allows it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile, parse_conversation
from attunebench.replay import prompts as P
from attunebench.replay.llm import Completion, EMSpec, ModelBackend


def user_marker(turn: int) -> str:
    return f"USERMARK{turn}X"


def reply_marker(turn: int) -> str:
    return f"REPLYMARK{turn}X"


def improved_marker(turn: int) -> str:
    return f"IMPROVEDMARK{turn}X"


def golden_marker(turn: int) -> str:
    return f"GOLDENMARK{turn}X"


def marked_conversation(
    turns: int = 4, conversation_id: str = "conv-marked", with_profile: bool = True
) -> ConversationFile:
    """A valid conversation whose every text carries a per-turn marker."""
    data: dict[str, Any] = {
        "conversationId": conversation_id,
        "metadata": {
            "model": "om/secret-model",
            "provider": "om",
            "timestamp": "2025-03-01T10:00:00Z",
            "category": "Work",
            "subtopic": "Stress and burnout",
        },
        "participant_profile": {
            "participant_id": "p-1",
            "age": "25-34",
            "traits": ["Anxious"],
            "goals": ["Feel heard"],
            "diagnoses": ["Anxiety"],
        }
        if with_profile
        else None,
        # Full pre-PANAS (totals derive only from all ten items of a side); post is partial.
        "prePanas": {"items": {**dict.fromkeys(cat.PANAS_ITEMS, 3), "Proud": 2, "Nervous": 6, "Upset": 5}},
        "postPanas": {"items": {"Proud": 3, "Nervous": 4, "Upset": 3, "Interested": 4}},
        "conversationWideQuestions": {
            "q1_lookingFor": ["Just listen / let me vent"],
            "q2_emotionClarity": "Mixed or conflicted",
            "q3_modelFit": "Mostly well-matched",
            "q3_followUp_whatFeltOff": ["Too much advice"],
            "fourBranchScores": {"perceiving": 5, "facilitating": 4, "understanding": 5, "managing": 3},
        },
        "turns": [],
    }
    for t in range(1, turns + 1):
        data["turns"].append(
            {
                "turnNumber": t,
                "userMessage": f"I feel so anxious about work {user_marker(t)}. What should I do?",
                "llmResponse": (
                    f"It makes sense you feel that way {reply_marker(t)}. You could try a short walk. "
                    "How are you sleeping?"
                ),
                "moodShiftTags": [{"emotion": "Nervous", "intensity": 5}] if t % 2 else [],
                "annotations": {
                    "binaryJudgements": [
                        {"questionId": "B13", "observedBehavior": "yes", "preferredBehavior": "yes"},
                        {"questionId": "B19", "observedBehavior": "yes", "preferredBehavior": "no"},
                        {"questionId": "B11", "observedBehavior": "no", "preferredBehavior": None},
                        {"questionId": "B5", "observedBehavior": None, "preferredBehavior": None},
                    ],
                    "alternateResponses": {
                        "llmImproved": f"A better reply {improved_marker(t)}.",
                        "humanEdited": f"What I wanted to hear {golden_marker(t)}.",
                    },
                    "pairwiseComparisons": [
                        {"questionId": "general", "responseA": "original", "responseB": "human", "winner": "B"},
                        {"questionId": "PW4", "responseA": "alternate", "responseB": "original", "winner": "A"},
                    ],
                    "selectedPairwiseQuestions": ["general", "PW4"],
                },
            }
        )
    return parse_conversation(data, conversation_id)


@dataclass
class RecordedCall:
    call_type: str
    turn_number: int | None
    messages: list[dict[str, str]]
    context: P.CallContext

    @property
    def text(self) -> str:
        """Everything the model was shown, as one string."""
        return "\n".join(m["content"] for m in self.messages)


@dataclass
class RecordingBackend:
    """Wraps another backend and records every call it answers."""

    inner: ModelBackend
    cacheable: bool = True
    calls: list[RecordedCall] = field(default_factory=list)

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: P.CallContext) -> Completion:
        self.calls.append(RecordedCall(ctx.call_type, ctx.turn_number, [dict(m) for m in messages], ctx))
        return await self.inner.complete(spec, messages, ctx)


@dataclass
class ScriptedBackend:
    """Answers from a list of raw texts in order (then a fallback backend), for parse-retry tests."""

    texts: list[str]
    fallback: ModelBackend
    cacheable: bool = True
    seen: list[list[dict[str, str]]] = field(default_factory=list)

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: P.CallContext) -> Completion:
        self.seen.append([dict(m) for m in messages])
        if self.texts:
            return Completion(text=self.texts.pop(0), prompt_tokens=10, completion_tokens=5, cost_usd=0.001)
        return await self.fallback.complete(spec, messages, ctx)


def context_json(ctx: P.CallContext) -> str:
    """A call context as text, to search it for markers like the messages."""
    from dataclasses import asdict

    return json.dumps(asdict(ctx), ensure_ascii=False, default=str)
