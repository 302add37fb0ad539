"""Lenient JSON extraction and strict validation of EM replies (SPEC 4).

Models wrap JSON in prose or Markdown fences, leave raw newlines inside
strings, or add trailing commas. ``extract_json`` recovers the object from all
of those; the per-call validators then insist on the content the scorer needs
(every asked question answered, ratings in range, options catalogued) so that
an incomplete answer is retried instead of silently scoring as wrong.

Pure Python: no Django, no litellm.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from attunebench import catalogue as cat
from attunebench.canonical import normalise_intensity, normalise_winner, normalise_yes_no_na
from attunebench.replay import prompts as P


class ReplyParseError(ValueError):
    """A reply that is not usable JSON for its call; the message is shown to the model on retry."""


# ---------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def repair_json_text(text: str) -> str:
    """Escape raw control characters inside strings and drop trailing commas.

    A small scanner tracks whether it is inside a string so that only string
    contents are touched; commas before a closing bracket are removed only
    outside strings.
    """
    out: list[str] = []
    in_string = False
    escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            elif char == "\n":
                out.append("\\n")
                continue
            elif char == "\r":
                out.append("\\r")
                continue
            elif char == "\t":
                out.append("\\t")
                continue
        elif char == '"':
            in_string = True
        elif char in "}]":
            # A trailing comma before a closing bracket (outside strings) goes.
            position = len(out) - 1
            while position >= 0 and out[position].isspace():
                position -= 1
            if position >= 0 and out[position] == ",":
                del out[position]
        out.append(char)
    return "".join(out)


def _loads_object(candidate: str) -> dict[str, Any] | None:
    """The object in ``candidate``, repairing it only if it does not parse as it is."""
    for repair in (False, True):
        try:
            value = json.loads(repair_json_text(candidate) if repair else candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


def extract_json(text: str | None) -> dict[str, Any]:
    """The JSON object in a reply: plain, fenced, or between the first '{' and last '}'."""
    if text is None or not text.strip():
        raise ReplyParseError("the reply was empty")
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(stripped)]
    first, last = stripped.find("{"), stripped.rfind("}")
    if first >= 0 and last > first:
        candidates.append(stripped[first : last + 1])
    for candidate in candidates:
        value = _loads_object(candidate)
        if value is not None:
            return value
    if first < 0:
        raise ReplyParseError("the reply contains no JSON object")
    if last < first:
        raise ReplyParseError("the JSON object in the reply is cut off (no closing brace)")
    raise ReplyParseError("the JSON object in the reply could not be parsed")


# ---------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftAnswer:
    response: str
    reasoning: str | None = None


@dataclass(frozen=True)
class AnalysisAnswer:
    emotion_tags: list[dict[str, Any]]
    om: dict[str, str]
    human: dict[str, str]
    reasoning: str | None = None


@dataclass(frozen=True)
class BinaryAnswer:
    om: dict[str, str]
    human: dict[str, str]
    reasoning: str | None = None


@dataclass(frozen=True)
class PairwiseAnswer:
    selections: dict[str, str]
    reasoning: str | None = None


@dataclass(frozen=True)
class JudgeAnswer:
    scores: dict[str, float] | None  # None: no golden reply to rate against
    binary: dict[str, str] | None
    reasoning: str | None = None


@dataclass(frozen=True)
class PostAnswer:
    """``panas`` holds 1–7 ratings (absolute) or −6..+6 changes (delta strategies)."""

    panas: dict[str, int]
    is_change: bool
    conversation_wide: dict[str, Any]
    reasoning: str | None = None


Answer = DraftAnswer | AnalysisAnswer | BinaryAnswer | PairwiseAnswer | JudgeAnswer | PostAnswer


def _reasoning(obj: dict[str, Any], required: bool) -> str | None:
    value = obj.get(P.KEY_REASONING)
    if isinstance(value, str) and value.strip():
        return value.strip()
    if required:
        raise ReplyParseError('the "reasoning" field is missing or empty')
    return None


def _section(obj: dict[str, Any], key: str) -> Any:
    if key not in obj:
        raise ReplyParseError(f'the "{key}" field is missing')
    return obj[key]


def _binary(value: Any, ids: tuple[str, ...], key: str, allow_na: bool = True) -> dict[str, str]:
    """Every asked id answered yes/no(/na); other ids are ignored."""
    if not isinstance(value, dict):
        raise ReplyParseError(f'"{key}" must be an object mapping question ids to yes/no/na')
    by_upper = {str(k).strip().upper(): v for k, v in value.items()}
    out: dict[str, str] = {}
    for qid in ids:
        if qid not in by_upper:
            raise ReplyParseError(f'"{key}" has no answer for {qid}')
        try:
            answer = normalise_yes_no_na(by_upper[qid])
        except Exception:
            answer = None
        if answer is None or (answer == cat.NOT_APPLICABLE and not allow_na):
            allowed = "yes/no/na" if allow_na else "yes/no"
            raise ReplyParseError(f'"{key}".{qid} must be {allowed}, got {by_upper[qid]!r}')
        out[qid] = answer
    return out


def _emotion_tags(value: Any) -> list[dict[str, Any]]:
    """Tags restricted to the 20 PANAS items (SPEC 4 step 2); others are dropped."""
    if isinstance(value, dict):  # {"Upset": 5}
        value = [{"emotion": k, "intensity": v} for k, v in value.items()]
    if not isinstance(value, list):
        raise ReplyParseError(f'"{P.KEY_TAGS}" must be a list of {{"emotion", "intensity"}} objects')
    tags: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in value:
        if isinstance(entry, str):
            word, raw_intensity = entry, None
        elif isinstance(entry, dict):
            word, raw_intensity = entry.get("emotion"), entry.get("intensity")
        else:
            continue
        item = cat.canonical_panas_item(str(word)) if word is not None else None
        if item is None or item in seen:
            continue
        try:
            intensity = normalise_intensity(raw_intensity)
        except Exception:
            intensity = None
        seen.add(item)
        tags.append({"emotion": item, "intensity": intensity})
    return tags


def _number(value: Any, low: float, high: float, what: str) -> float:
    if isinstance(value, bool):
        raise ReplyParseError(f"{what} must be a number {low:g}-{high:g}, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip().lstrip("+"))
        except ValueError:
            raise ReplyParseError(f"{what} must be a number {low:g}-{high:g}, got {value!r}") from None
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise ReplyParseError(f"{what} must be a number {low:g}-{high:g}, got {value!r}")
    return float(value)


def _option(value: Any, options: tuple[str, ...], what: str) -> str | None:
    """A catalogued option; also accepts an answer that contains exactly one option's text."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ReplyParseError(f"{what} must be one of the listed options, got {value!r}")
    exact = cat.match_option(value, options)
    if exact is not None:
        return exact
    lowered = value.casefold()
    contained = [o for o in options if o.casefold() in lowered]
    if len(contained) == 1:
        return contained[0]
    raise ReplyParseError(f"{what} must be one of the listed options, got {value!r}")


def parse_draft(obj: dict[str, Any], verbose: bool) -> DraftAnswer:
    value = obj.get(P.KEY_RESPONSE, obj.get("reply"))
    if not isinstance(value, str) or not value.strip():
        raise ReplyParseError(f'the "{P.KEY_RESPONSE}" field must be a non-empty string')
    return DraftAnswer(response=value.strip(), reasoning=_reasoning(obj, verbose))


def parse_analysis(obj: dict[str, Any], ids: tuple[str, ...], verbose: bool) -> AnalysisAnswer:
    # A missing list is not "no feelings": it would score as a prediction, so it is asked again.
    tags = _emotion_tags(_section(obj, P.KEY_TAGS))
    om = _binary(_section(obj, P.KEY_OM), ids, P.KEY_OM) if ids else {}
    human = _binary(_section(obj, P.KEY_HUMAN), ids, P.KEY_HUMAN) if ids else {}
    return AnalysisAnswer(emotion_tags=tags, om=om, human=human, reasoning=_reasoning(obj, verbose))


def parse_hp_binary(obj: dict[str, Any], ids: tuple[str, ...], verbose: bool) -> BinaryAnswer:
    return BinaryAnswer(
        om=_binary(_section(obj, P.KEY_OM), ids, P.KEY_OM),
        human=_binary(_section(obj, P.KEY_HUMAN), ids, P.KEY_HUMAN),
        reasoning=_reasoning(obj, verbose),
    )


def parse_pairwise(obj: dict[str, Any], indices: tuple[int, ...], verbose: bool) -> PairwiseAnswer:
    raw = _section(obj, P.KEY_SELECTIONS)
    if isinstance(raw, list):  # ["A", "B"] in comparison order
        raw = {str(i): v for i, v in enumerate(raw)}
    if not isinstance(raw, dict):
        raise ReplyParseError(f'"{P.KEY_SELECTIONS}" must map comparison indices to "A" or "B"')
    by_index = {str(k).strip(): v for k, v in raw.items()}
    out: dict[str, str] = {}
    for index in indices:
        key = str(index)
        if key not in by_index:
            raise ReplyParseError(f'"{P.KEY_SELECTIONS}" has no choice for comparison {index}')
        try:
            winner = normalise_winner(by_index[key])
        except Exception:
            winner = None
        if winner is None:
            raise ReplyParseError(f'"{P.KEY_SELECTIONS}".{index} must be "A" or "B", got {by_index[key]!r}')
        out[key] = winner
    return PairwiseAnswer(selections=out, reasoning=_reasoning(obj, verbose))


def parse_judge(obj: dict[str, Any], ids: tuple[str, ...], verbose: bool, rated: bool = True) -> JudgeAnswer:
    """``rated``: ratings were asked for (there is a golden reply to rate against)."""
    scores: dict[str, float] | None = None
    if rated:
        raw = _section(obj, P.KEY_SCORES)
        if not isinstance(raw, dict):
            raise ReplyParseError(f'"{P.KEY_SCORES}" must be an object of 1-7 ratings')
        scores = {}
        for dimension in cat.JUDGE_DIMENSIONS:
            if dimension not in raw:
                raise ReplyParseError(f'"{P.KEY_SCORES}" has no {dimension}')
            scores[dimension] = _number(raw[dimension], 1, 7, f"{P.KEY_SCORES}.{dimension}")
    # SPEC 3.2: the judge's answers about the draft are yes or no, never na.
    binary = _binary(_section(obj, P.KEY_DRAFT_BINARY), ids, P.KEY_DRAFT_BINARY, allow_na=False) if ids else None
    return JudgeAnswer(scores=scores, binary=binary, reasoning=_reasoning(obj, verbose))


def parse_post(obj: dict[str, Any], strategy: str, verbose: bool) -> PostAnswer:
    is_change = strategy != "absolute"
    key = P.KEY_PANAS_CHANGE if is_change else P.KEY_POST_PANAS
    raw = _section(obj, key)
    if not isinstance(raw, dict):
        raise ReplyParseError(f'"{key}" must be an object with the 20 feelings')
    items: dict[str, int] = {}
    for name, value in raw.items():
        item = cat.canonical_panas_item(str(name))
        if item is not None:
            low, high = (P.PANAS_CHANGE_MIN, P.PANAS_CHANGE_MAX) if is_change else (1, 7)
            items[item] = int(math.floor(_number(value, low, high, f"{key}.{item}") + 0.5))
    missing = [i for i in cat.PANAS_ITEMS if i not in items]
    if missing:
        raise ReplyParseError(f'"{key}" is missing {", ".join(missing)}')

    looking = _section(obj, "q1_lookingFor")
    if isinstance(looking, str):
        looking = [looking]
    if not isinstance(looking, list):
        raise ReplyParseError('"q1_lookingFor" must be a list of options')
    q1: list[str] = []
    for value in looking:
        option = cat.match_option(str(value), cat.Q1_LOOKING_FOR_OPTIONS)
        if option is not None and option not in q1:
            q1.append(option)
    if looking and not q1:
        raise ReplyParseError('"q1_lookingFor" holds none of the listed options')
    felt_off = obj.get("q3_followUp_whatFeltOff", [])
    if isinstance(felt_off, str):
        felt_off = [felt_off] if felt_off.strip() else []
    if not isinstance(felt_off, list):
        raise ReplyParseError('"q3_followUp_whatFeltOff" must be a list of short phrases')
    branches_raw = _section(obj, "fourBranchScores")
    if not isinstance(branches_raw, dict):
        raise ReplyParseError('"fourBranchScores" must be an object of 1-7 ratings')
    by_lower = {str(k).strip().lower(): v for k, v in branches_raw.items()}
    branches = {}
    for branch in cat.FOUR_BRANCHES:
        if branch not in by_lower:
            raise ReplyParseError(f'"fourBranchScores" has no {branch}')
        branches[branch] = int(math.floor(_number(by_lower[branch], 1, 7, f"fourBranchScores.{branch}") + 0.5))
    wide = {
        "q1_lookingFor": q1,
        "q2_emotionClarity": _option(
            _section(obj, "q2_emotionClarity"), cat.Q2_EMOTION_CLARITY_OPTIONS, "q2_emotionClarity"
        ),
        "q3_modelFit": _option(_section(obj, "q3_modelFit"), cat.Q3_MODEL_FIT_OPTIONS, "q3_modelFit"),
        "q3_followUp_whatFeltOff": [str(v).strip() for v in felt_off if str(v).strip()],
        "fourBranchScores": branches,
    }
    return PostAnswer(panas=items, is_change=is_change, conversation_wide=wide, reasoning=_reasoning(obj, verbose))


def parse_reply(ctx: P.CallContext, text: str | None) -> Answer:
    """Extract and validate the reply to the call described by ``ctx``."""
    obj = extract_json(text)
    verbose = ctx.verbose
    if ctx.call_type == P.DRAFT:
        return parse_draft(obj, verbose)
    if ctx.call_type == P.ANALYSIS:
        return parse_analysis(obj, ctx.question_ids, verbose)
    if ctx.call_type == P.HP_BINARY:
        return parse_hp_binary(obj, ctx.question_ids, verbose)
    if ctx.call_type == P.PAIRWISE:
        return parse_pairwise(obj, tuple(c.index for c in ctx.comparisons), verbose)
    if ctx.call_type == P.JUDGE:
        return parse_judge(obj, ctx.question_ids, verbose, rated=bool(ctx.golden))
    if ctx.call_type == P.POST:
        return parse_post(obj, ctx.panas_strategy or "absolute", verbose)
    raise ValueError(f"unknown call type {ctx.call_type!r}")


# ---------------------------------------------------------------------------
# Retry on an unusable reply
# ---------------------------------------------------------------------------


def correction_messages(bad_reply: str | None, error: ReplyParseError) -> list[dict[str, str]]:
    """What a retry appends: the unusable reply and a short note on what was wrong.

    Re-sending identical messages would, for a deterministic model (temperature
    0, fixed seed), return the identical bad answer; pointing at the problem
    changes the request and usually fixes it.
    """
    return [
        {"role": "assistant", "content": bad_reply or ""},
        {
            "role": "user",
            "content": f"That answer could not be used: {error}. Reply again with only the complete JSON object.",
        },
    ]


T = TypeVar("T")
R = TypeVar("R")


@dataclass
class ParsedCall(Generic[T, R]):
    """The validated answer plus every raw completion spent on getting it."""

    value: T
    text: str
    completions: list[R] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ParseRetriesExhausted(Exception):
    """No attempt produced a valid reply; carries the completions paid for."""

    def __init__(self, errors: list[str], completions: list[Any]):
        self.errors = errors
        self.completions = completions
        super().__init__("; ".join(errors) or "no valid reply")


async def ask_until_valid(
    messages: list[dict[str, str]],
    send: Callable[[list[dict[str, str]]], Awaitable[R]],
    text_of: Callable[[R], str | None],
    parse: Callable[[str | None], T],
    attempts: int,
) -> ParsedCall[T, R]:
    """Send, parse, and on a parse failure re-ask with the error shown (``attempts`` in all).

    Transport failures are not handled here: ``send`` is expected to have
    retried those already (scheduler) and to raise if it gave up.
    """
    completions: list[R] = []
    errors: list[str] = []
    current = messages
    for _ in range(max(1, attempts)):
        completion = await send(current)
        completions.append(completion)
        text = text_of(completion)
        try:
            value = parse(text)
        except ReplyParseError as exc:
            errors.append(str(exc))
            current = messages + correction_messages(text, exc)
            continue
        return ParsedCall(value=value, text=text or "", completions=completions, errors=errors)
    raise ParseRetriesExhausted(errors, completions)
