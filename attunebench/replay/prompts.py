"""Our replay prompt set (SPEC 4), versioned.

Every message an evaluated model (EM) or judge receives is built here from a
``CallContext``: a frozen view that the protocol assembles from turns <= t
only. Because the messages are a pure function of that view, the "no future
turns" rule can be checked on the view and on the messages alike, and the
call cache (keyed on the messages) stays stable across runs.

Change ``PROMPT_VERSION`` whenever any wording or JSON shape here changes: it
is recorded in every run output and is part of every cache key, so old cached
answers are never reused for new prompts.

Thread layout: one system message, then one user message per turn holding the
transcript of that turn ("Participant: ..." / "Original model: ..."). The
current call's instruction is appended to the last user message. The EM's own
answers are never kept in the thread (SPEC 4: draft and analysis answers are
elided afterwards), so the thread grows by transcript only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from attunebench import catalogue as cat

PROMPT_VERSION: Final = "attune-replay/2"

# Call types, in protocol order.
DRAFT: Final = "draft"
ANALYSIS: Final = "analysis"
HP_BINARY: Final = "hp_binary"
PAIRWISE: Final = "pairwise"
JUDGE: Final = "judge"
POST: Final = "post"
CALL_TYPES: Final[tuple[str, ...]] = (DRAFT, ANALYSIS, HP_BINARY, PAIRWISE, JUDGE, POST)

# The instruction block of every call starts with this marker followed by the
# upper-case call type. It tells a human reader of a logged prompt what was
# asked, and lets the fake server in devtools answer the right shape.
TASK_MARKER: Final = "TASK: "

# Masked candidate labels shown in the pairwise call (SPEC 4 step 4).
MASK_ORIGINAL: Final = "original"
MASK_ALTERNATE_1: Final = "alternate1"
MASK_ALTERNATE_2: Final = "alternate2"

VERBOSE_MODES: Final = frozenset({"verbose", "verbose_omniscient"})
OMNISCIENT_MODES: Final = frozenset({"omniscient", "verbose_omniscient"})

# Keys of the JSON answers (shared with parsing.py and the fake server).
KEY_REASONING: Final = "reasoning"
KEY_RESPONSE: Final = "response"
KEY_TAGS: Final = "emotion_tags"
KEY_OM: Final = "binary_om_assessment"
KEY_HUMAN: Final = "binary_human_prediction"
KEY_SELECTIONS: Final = "selections"
KEY_SCORES: Final = "scores"
KEY_DRAFT_BINARY: Final = "binary_assessment"
KEY_POST_PANAS: Final = "post_panas"
KEY_PANAS_CHANGE: Final = "panas_change"

PANAS_CHANGE_MIN: Final = -6
PANAS_CHANGE_MAX: Final = 6


@dataclass(frozen=True)
class VisibleTurn:
    """One turn as the EM may see it: ``om_reply`` is None while drafting."""

    number: int
    user_message: str
    om_reply: str | None


@dataclass(frozen=True)
class Candidate:
    """A candidate reply under its masked label (original / alternate1 / alternate2)."""

    label: str
    text: str


@dataclass(frozen=True)
class ComparisonView:
    """One pairwise comparison with its positions given as masked labels."""

    index: int
    question_id: str
    question_text: str
    label_a: str
    label_b: str


@dataclass(frozen=True)
class CallContext:
    """Everything one call may show. Built by the protocol from turns <= t only.

    ``turns`` is the visible transcript; for a per-turn call its last element
    is the current turn. ``pre_panas`` is filled only when the mode or PANAS
    strategy shows it; ``profile`` only in omniscient modes.
    """

    call_type: str
    conversation_id: str
    category: str
    subtopic: str
    mode: str
    turns: tuple[VisibleTurn, ...]
    turn_number: int | None = None
    question_ids: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    comparisons: tuple[ComparisonView, ...] = ()
    draft: str | None = None
    golden: str | None = None
    profile: dict[str, Any] | None = None
    pre_panas: dict[str, int] | None = None
    pre_totals: tuple[int | None, int | None] | None = None
    panas_strategy: str | None = None
    # Pre-PANAS shown in the background block of the first turn (omniscient).
    background_pre_panas: dict[str, int] | None = field(default=None)

    @property
    def verbose(self) -> bool:
        return self.mode in VERBOSE_MODES


# ---------------------------------------------------------------------------
# System prompts
# ---------------------------------------------------------------------------

_EM_SYSTEM = (
    "You are taking part in a research study about emotional understanding in conversations.\n"
    'You will read a real conversation between a person ("the participant") and an AI assistant '
    '("the original model"), one turn at a time. You never see later turns, and you should not '
    "guess at them. After each step you are given a task. Answer every task with one JSON object "
    "and nothing else: no prose before or after it, no Markdown.\n"
    "The conversation topic chosen by the participant: {category} / {subtopic}."
)
_VERBOSE_NOTE = (
    '\nEvery JSON answer must begin with a "reasoning" field: two to four sentences explaining '
    "what in the conversation led to your answers."
)
_JUDGE_SYSTEM = (
    "You are an expert evaluator of emotionally supportive conversation. You compare a candidate "
    "reply with the reply the participant themselves said they would have wanted, and judge the "
    "candidate on its own merits. Answer with one JSON object and nothing else."
)


def system_message(ctx: CallContext) -> dict[str, str]:
    """The system message of the EM thread (or of the judge for judge calls)."""
    if ctx.call_type == JUDGE:
        return {"role": "system", "content": _JUDGE_SYSTEM}
    text = _EM_SYSTEM.format(category=ctx.category, subtopic=ctx.subtopic)
    if ctx.verbose:
        text += _VERBOSE_NOTE
    return {"role": "system", "content": text}


# ---------------------------------------------------------------------------
# Transcript
# ---------------------------------------------------------------------------


def _panas_lines(items: dict[str, int]) -> str:
    pa = ", ".join(f"{i} {items[i]}" for i in cat.POSITIVE_AFFECT_ITEMS if i in items)
    na = ", ".join(f"{i} {items[i]}" for i in cat.NEGATIVE_AFFECT_ITEMS if i in items)
    return f"  Positive feelings: {pa or 'not recorded'}\n  Negative feelings: {na or 'not recorded'}"


def _background(ctx: CallContext) -> str:
    """The omniscient block shown before the first turn (SPEC 4 modes)."""
    lines = ["Background about the participant, collected before the chat:"]
    if ctx.profile:
        shown = {k: v for k, v in ctx.profile.items() if k != "participant_id" and v not in (None, "", [], {})}
        lines.append("Profile: " + json.dumps(shown, ensure_ascii=False, sort_keys=True))
    else:
        lines.append("Profile: not available.")
    if ctx.background_pre_panas:
        lines.append("Mood before the chat (each feeling rated 1 = not at all to 7 = extremely):")
        lines.append(_panas_lines(ctx.background_pre_panas))
    else:
        lines.append("Mood before the chat: not available.")
    return "\n".join(lines)


def _turn_text(turn: VisibleTurn) -> str:
    text = f"Turn {turn.number}\nParticipant: {turn.user_message}"
    if turn.om_reply is not None:
        text += f"\nOriginal model: {turn.om_reply}"
    return text


def transcript_messages(ctx: CallContext) -> list[dict[str, str]]:
    """One user message per visible turn; the omniscient background leads the first."""
    messages = []
    for position, turn in enumerate(ctx.turns):
        text = _turn_text(turn)
        if position == 0 and ctx.mode in OMNISCIENT_MODES:
            text = _background(ctx) + "\n\n" + text
        messages.append({"role": "user", "content": text})
    return messages


# ---------------------------------------------------------------------------
# Instructions per call type
# ---------------------------------------------------------------------------


def _shape(ctx: CallContext, body: str) -> str:
    """The JSON skeleton shown to the model; verbose modes put reasoning first."""
    if ctx.verbose:
        body = '"reasoning": "<why>", ' + body
    return "{" + body + "}"


def _questions(ids: tuple[str, ...], first_person: bool) -> str:
    lines = []
    for qid in ids:
        question = cat.BINARY_QUESTIONS_BY_ID[qid]
        lines.append(f"- {qid}: {question.first_person if first_person else question.third_person}")
    return "\n".join(lines)


def _binary_shape(ids: tuple[str, ...]) -> str:
    return "{" + ", ".join(f'"{qid}": "yes|no|na"' for qid in ids) + "}"


def _draft_instruction(ctx: CallContext) -> str:
    return (
        f"{TASK_MARKER}DRAFT\n"
        "You have not seen the original model's reply to this message. Write the reply you would "
        "give the participant now, as their conversation partner.\n"
        "Reply with only this JSON: " + _shape(ctx, f'"{KEY_RESPONSE}": "<your reply>"')
    )


def _emotion_list() -> str:
    return ", ".join(cat.PANAS_ITEMS)


def _analysis_instruction(ctx: CallContext) -> str:
    parts = [
        f"{TASK_MARKER}ANALYSIS",
        "1. How did the participant's feelings shift after reading the original model's reply? "
        f"Use only these words: {_emotion_list()}. Give each an intensity from 1 (slight) to 7 "
        "(very strong). Use an empty list if their mood did not noticeably change.",
    ]
    if ctx.question_ids:
        parts.append(
            "2. For each question below, say whether the original model's reply did it "
            f'("{KEY_OM}"), and predict what the participant would answer when asked whether '
            f'they wanted it ("{KEY_HUMAN}"). Answer yes, no, or na (not applicable).\n'
            + _questions(ctx.question_ids, first_person=False)
        )
        binary = _binary_shape(ctx.question_ids)
        body = (
            f'"{KEY_TAGS}": [{{"emotion": "<one of the words>", "intensity": 1}}], '
            f'"{KEY_OM}": {binary}, "{KEY_HUMAN}": {binary}'
        )
    else:
        body = f'"{KEY_TAGS}": [{{"emotion": "<one of the words>", "intensity": 1}}]'
    parts.append(f"Reply with only this JSON: {_shape(ctx, body)}")
    return "\n".join(parts)


def _hp_binary_instruction(ctx: CallContext) -> str:
    binary = _binary_shape(ctx.question_ids)
    return "\n".join(
        [
            f"{TASK_MARKER}HP_BINARY",
            "Imagine you are the participant and have just read the original model's reply. You are "
            "asked the questions below. For each, answer as the participant would: did the reply do it "
            f'("{KEY_OM}"), and did you want it to ("{KEY_HUMAN}")? Answer yes, no, or na.',
            _questions(ctx.question_ids, first_person=True),
            "Reply with only this JSON: " + _shape(ctx, f'"{KEY_OM}": {binary}, "{KEY_HUMAN}": {binary}'),
        ]
    )


def _pairwise_instruction(ctx: CallContext) -> str:
    lines = [
        f"{TASK_MARKER}PAIRWISE",
        'Here are three candidate replies to the participant\'s latest message. "original" is the '
        "reply the original model gave; the other two are alternative replies.",
    ]
    for candidate in ctx.candidates:
        lines.append(f"[{candidate.label}]\n{candidate.text or '(empty)'}")
    lines.append(
        "The participant compared pairs of these replies. For each comparison below, predict which "
        'reply they chose: "A" or "B".'
    )
    for comparison in ctx.comparisons:
        lines.append(
            f'Comparison {comparison.index}: "{comparison.question_text}" '
            f"A = [{comparison.label_a}], B = [{comparison.label_b}]"
        )
    selections = "{" + ", ".join(f'"{c.index}": "A|B"' for c in ctx.comparisons) + "}"
    lines.append("Reply with only this JSON: " + _shape(ctx, f'"{KEY_SELECTIONS}": {selections}'))
    return "\n".join(lines)


def _judge_prompt(ctx: CallContext) -> str:
    history = []
    for turn in ctx.turns[:-1]:
        history.append(_turn_text(turn))
    current = ctx.turns[-1]
    history.append(f"Turn {current.number}\nParticipant: {current.user_message}")
    parts = ["Conversation so far:", "\n\n".join(history), ""]
    fields = []
    if ctx.golden:
        # SPEC 4 step 5: the ratings are against the participant's golden reply; without
        # one there is nothing to rate against and only the questions are asked.
        parts += ["Reply the participant said they would have wanted (reference):", ctx.golden, ""]
    parts += ["Candidate reply to evaluate:", ctx.draft or "", "", f"{TASK_MARKER}JUDGE"]
    if ctx.golden:
        parts.append(
            "Rate the candidate from 1 (very poor) to 7 (excellent) on: overall_score (overall quality "
            "as a reply to this participant, compared with the reference), emotional_appropriateness, "
            "helpfulness, and tone_match (how well its tone matches what the participant wanted)."
        )
        scores = ", ".join(f'"{dim}": 1' for dim in cat.JUDGE_DIMENSIONS)
        fields.append(f'"{KEY_SCORES}": {{{scores}}}')
    if ctx.question_ids:
        lead = "Then answer" if ctx.golden else "Answer"
        parts.append(
            f'{lead} yes or no for the candidate reply on each question ("{KEY_DRAFT_BINARY}"):\n'
            + _questions(ctx.question_ids, first_person=False)
        )
        fields.append(f'"{KEY_DRAFT_BINARY}": ' + "{" + ", ".join(f'"{q}": "yes|no"' for q in ctx.question_ids) + "}")
    parts.append(f"Reply with only this JSON: {_shape(ctx, ', '.join(fields))}")
    return "\n".join(parts)


def _options(options: tuple[str, ...]) -> str:
    return "; ".join(f'"{o}"' for o in options)


# Third-person wording of the Four-Branch questions (the catalogue holds the
# participant's first-person wording).
_FOUR_BRANCH_THIRD_PERSON: Final[dict[str, str]] = {
    "perceiving": "how well it noticed what they were feeling",
    "facilitating": "how well it used the right emotional tone to help the conversation",
    "understanding": "how well it understood why they felt as they did, and how that changed",
    "managing": "how well it helped them handle their feelings",
}


def _post_instruction(ctx: CallContext) -> str:
    strategy = ctx.panas_strategy or "absolute"
    lines = [
        f"{TASK_MARKER}POST_CONVERSATION",
        "The conversation has ended. Predict the participant's answers to their after-chat survey.",
    ]
    if strategy == "absolute":
        known = [
            f"{side} total was {total}"
            for side, total in zip(
                ("positive-feeling", "negative-feeling"), ctx.pre_totals or (None, None), strict=False
            )
            if total is not None
        ]
        if known:
            lines.append(
                f"Before the chat their {' and their '.join(known)} (each the sum of ten 1-7 ratings, range 10-70)."
            )
        else:
            lines.append("Their mood before the chat was not recorded.")
        lines.append(
            f'1. "{KEY_POST_PANAS}": how strongly they feel each of these after the chat, 1 (not at all) '
            f"to 7 (extremely): {_emotion_list()}."
        )
        panas_body = f'"{KEY_POST_PANAS}": {{' + ", ".join(f'"{i}": 1' for i in cat.PANAS_ITEMS) + "}"
    else:
        if strategy == "delta" and ctx.pre_panas:
            lines.append("Before the chat they rated each feeling (1 = not at all, 7 = extremely):")
            lines.append(_panas_lines(ctx.pre_panas))
        elif strategy == "delta":
            lines.append("Their ratings before the chat were not recorded.")
        else:
            lines.append("Their ratings before the chat are not shown to you.")
        lines.append(
            f'1. "{KEY_PANAS_CHANGE}": for each feeling, how much its rating changed from before to '
            f"after the chat, from {PANAS_CHANGE_MIN} to +{PANAS_CHANGE_MAX} (0 = no change): {_emotion_list()}."
        )
        panas_body = f'"{KEY_PANAS_CHANGE}": {{' + ", ".join(f'"{i}": 0' for i in cat.PANAS_ITEMS) + "}"
    lines += [
        f'2. "q1_lookingFor": what were they looking for (one or more of): {_options(cat.Q1_OPTIONS)}.',
        f'3. "q2_emotionClarity": how clear were their emotions (one of): {_options(cat.Q2_OPTIONS)}.',
        f'4. "q3_modelFit": how well did the original model match their needs (one of): {_options(cat.Q3_OPTIONS)}.',
        '5. "q3_followUp_whatFeltOff": short phrases for what felt off in the original model\'s replies '
        f"(empty list if nothing), for example: {_options(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS[:5])}.",
        '6. "fourBranchScores": their 1-7 ratings of the original model: '
        + "; ".join(f"{branch} ({_FOUR_BRANCH_THIRD_PERSON[branch]})" for branch in cat.FOUR_BRANCHES)
        + ".",
    ]
    branches = ", ".join(f'"{b}": 4' for b in cat.FOUR_BRANCHES)
    body = (
        f'{panas_body}, "q1_lookingFor": ["<option>"], "q2_emotionClarity": "<option>", '
        f'"q3_modelFit": "<option>", "q3_followUp_whatFeltOff": [], "fourBranchScores": {{{branches}}}'
    )
    lines.append(f"Reply with only this JSON: {_shape(ctx, body)}")
    return "\n".join(lines)


_INSTRUCTIONS = {
    DRAFT: _draft_instruction,
    ANALYSIS: _analysis_instruction,
    HP_BINARY: _hp_binary_instruction,
    PAIRWISE: _pairwise_instruction,
    POST: _post_instruction,
}


def build_messages(ctx: CallContext) -> list[dict[str, str]]:
    """The exact chat messages for one call.

    EM calls: system + one user message per visible turn, with the task
    instruction appended to the last one. Judge calls stand alone (a separate
    model that never shares the EM's thread).
    """
    if ctx.call_type == JUDGE:
        return [system_message(ctx), {"role": "user", "content": _judge_prompt(ctx)}]
    try:
        instruction = _INSTRUCTIONS[ctx.call_type](ctx)
    except KeyError:
        raise ValueError(f"unknown call type {ctx.call_type!r}") from None
    messages = [system_message(ctx), *transcript_messages(ctx)]
    if len(messages) == 1:
        messages.append({"role": "user", "content": instruction})
    else:
        last = messages[-1]
        messages[-1] = {"role": "user", "content": last["content"] + "\n\n" + instruction}
    return messages


def task_text(messages: list[dict[str, Any]]) -> str:
    """The last user message carrying a task (a parse retry appends a correction after it)."""
    for message in reversed(messages):
        content = str(message.get("content", ""))
        if message.get("role") == "user" and TASK_MARKER in content:
            return content
    return ""


def call_type_of(messages: list[dict[str, Any]]) -> str | None:
    """Recover the call type from built messages (used by the fake server and logs)."""
    content = task_text(messages)
    position = content.rfind(TASK_MARKER)
    if position < 0:
        return None
    words = content[position + len(TASK_MARKER) :].split(None, 1)
    word = words[0].lower() if words else ""
    if word == "post_conversation":
        return POST
    return word if word in CALL_TYPES else None
