"""Lenient JSON extraction and strict validation of EM replies (SPEC 4).

Models wrap JSON in prose or Markdown fences, leave raw newlines inside
strings, or add trailing commas. ``extract_json`` recovers the object from all
of those; the per-call answer models (pydantic, validated with the call's
context) then insist on the content the scorer needs (every asked question
answered, ratings in range, options catalogued) so that an incomplete answer
is retried instead of silently scoring as wrong.

Pure Python: no Django, no litellm.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Self, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

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

    Deliberately not a general JSON repairer (such as the json-repair
    package): those complete a reply cut off mid-way and fill a missing value
    with "", so a truncated answer would be accepted instead of asked again.
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
#
# Each call's answer is a pydantic model validated with the call's context
# (the question ids asked, comparison indices, verbose or not, ...). Field
# validators normalise the many spellings models use and raise ValueError with
# a message naming the field; ``_validate`` turns pydantic's errors into one
# ReplyParseError whose text is shown to the model on retry.

_ABSENT: Any = object()  # default of a field that is required only when its question was asked


def _asked(info: ValidationInfo, name: str) -> Any:
    return (info.context or {})[name]


def _missing(key: str) -> ValueError:
    return ValueError(f'the "{key}" field is missing')


def _binary(value: Any, ids: tuple[str, ...], key: str, allow_na: bool = True) -> dict[str, str]:
    """Every asked id answered yes/no(/na); other ids are ignored."""
    if not isinstance(value, dict):
        raise ValueError(f'"{key}" must be an object mapping question ids to yes/no/na')
    by_upper = {str(k).strip().upper(): v for k, v in value.items()}
    out: dict[str, str] = {}
    for qid in ids:
        if qid not in by_upper:
            raise ValueError(f'"{key}" has no answer for {qid}')
        try:
            answer = normalise_yes_no_na(by_upper[qid])
        except Exception:
            answer = None
        if answer is None or (answer == cat.NOT_APPLICABLE and not allow_na):
            allowed = "yes/no/na" if allow_na else "yes/no"
            raise ValueError(f'"{key}".{qid} must be {allowed}, got {by_upper[qid]!r}')
        out[qid] = answer
    return out


def _number(value: Any, low: float, high: float, what: str) -> float:
    """A finite number in [low, high]; numeric strings (with a leading '+') count, booleans do not."""
    problem = ValueError(f"{what} must be a number {low:g}-{high:g}, got {value!r}")
    if isinstance(value, bool):
        raise problem
    if isinstance(value, str):
        try:
            value = float(value.strip().lstrip("+"))
        except ValueError:
            raise problem from None
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise problem
    return float(value)


def _rounded(value: float) -> int:
    return math.floor(value + 0.5)


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


def _q1_options(values: list[Any]) -> list[str]:
    """The catalogued options among a q1 answer, in order, without repeats (others are dropped)."""
    q1: list[str] = []
    for value in values:
        option = cat.match_option(str(value), cat.Q1_OPTIONS)
        if option is not None and option not in q1:
            q1.append(option)
    return q1


class _Reply(BaseModel):
    """What every answer has: optional reasoning, required in verbose modes (context ``verbose``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    reasoning: str | None = None

    @field_validator("reasoning", mode="before")
    @classmethod
    def _stripped(cls, value: Any) -> str | None:
        return value.strip() if isinstance(value, str) and value.strip() else None

    @model_validator(mode="after")
    def _reasoning_when_verbose(self, info: ValidationInfo) -> Self:
        if _asked(info, "verbose") and self.reasoning is None:
            raise ValueError(f'the "{P.KEY_REASONING}" field is missing or empty')
        return self


class DraftAnswer(_Reply):
    response: str = Field(default="", validation_alias=AliasChoices(P.KEY_RESPONSE, "reply"), validate_default=True)

    @field_validator("response", mode="before")
    @classmethod
    def _non_empty(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f'the "{P.KEY_RESPONSE}" field must be a non-empty string')
        return value.strip()


class AnalysisAnswer(_Reply):
    """Context ``ids``: the questions asked; with none, the binary sections are not read."""

    # A missing list is not "no feelings": it would score as a prediction, so it is asked again.
    emotion_tags: list[dict[str, Any]] = Field(alias=P.KEY_TAGS)
    om: dict[str, str] = Field(default=_ABSENT, alias=P.KEY_OM, validate_default=True)
    human: dict[str, str] = Field(default=_ABSENT, alias=P.KEY_HUMAN, validate_default=True)

    @field_validator("emotion_tags", mode="before")
    @classmethod
    def _panas_tags(cls, value: Any) -> list[dict[str, Any]]:
        """Tags restricted to the 20 PANAS items (SPEC 4 step 2); others are dropped."""
        if isinstance(value, dict):  # {"Upset": 5}
            value = [{"emotion": k, "intensity": v} for k, v in value.items()]
        if not isinstance(value, list):
            raise ValueError(f'"{P.KEY_TAGS}" must be a list of {{"emotion", "intensity"}} objects')
        tags: list[dict[str, Any]] = []
        seen: set[str] = set()
        for entry in value:
            word: Any
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

    @field_validator("om", "human", mode="before")
    @classmethod
    def _answers(cls, value: Any, info: ValidationInfo) -> dict[str, str]:
        ids = _asked(info, "ids")
        key = P.KEY_OM if info.field_name == "om" else P.KEY_HUMAN
        if not ids:
            return {}
        if value is _ABSENT:
            raise _missing(key)
        return _binary(value, ids, key)


class BinaryAnswer(_Reply):
    """Context ``ids``: the questions asked (the call is made only when there are some)."""

    om: dict[str, str] = Field(alias=P.KEY_OM)
    human: dict[str, str] = Field(alias=P.KEY_HUMAN)

    @field_validator("om", "human", mode="before")
    @classmethod
    def _answers(cls, value: Any, info: ValidationInfo) -> dict[str, str]:
        return _binary(value, _asked(info, "ids"), P.KEY_OM if info.field_name == "om" else P.KEY_HUMAN)


class PairwiseAnswer(_Reply):
    """Context ``indices``: the comparisons asked about."""

    selections: dict[str, str] = Field(alias=P.KEY_SELECTIONS)

    @field_validator("selections", mode="before")
    @classmethod
    def _winners(cls, value: Any, info: ValidationInfo) -> dict[str, str]:
        if isinstance(value, list):  # ["A", "B"] in comparison order
            value = {str(i): v for i, v in enumerate(value)}
        if not isinstance(value, dict):
            raise ValueError(f'"{P.KEY_SELECTIONS}" must map comparison indices to "A" or "B"')
        by_index = {str(k).strip(): v for k, v in value.items()}
        out: dict[str, str] = {}
        for index in _asked(info, "indices"):
            key = str(index)
            if key not in by_index:
                raise ValueError(f'"{P.KEY_SELECTIONS}" has no choice for comparison {index}')
            try:
                winner = normalise_winner(by_index[key])
            except Exception:
                winner = None
            if winner is None:
                raise ValueError(f'"{P.KEY_SELECTIONS}".{index} must be "A" or "B", got {by_index[key]!r}')
            out[key] = winner
        return out


class JudgeAnswer(_Reply):
    """Context ``rated``: ratings were asked for (there is a golden reply); ``ids``: the questions asked."""

    scores: dict[str, float] | None = Field(default=_ABSENT, alias=P.KEY_SCORES, validate_default=True)
    binary: dict[str, str] | None = Field(default=_ABSENT, alias=P.KEY_DRAFT_BINARY, validate_default=True)

    @field_validator("scores", mode="before")
    @classmethod
    def _ratings(cls, value: Any, info: ValidationInfo) -> dict[str, float] | None:
        if not _asked(info, "rated"):
            return None  # no golden reply to rate against
        if value is _ABSENT:
            raise _missing(P.KEY_SCORES)
        if not isinstance(value, dict):
            raise ValueError(f'"{P.KEY_SCORES}" must be an object of 1-7 ratings')
        scores = {}
        for dimension in cat.JUDGE_DIMENSIONS:
            if dimension not in value:
                raise ValueError(f'"{P.KEY_SCORES}" has no {dimension}')
            scores[dimension] = _number(value[dimension], 1, 7, f"{P.KEY_SCORES}.{dimension}")
        return scores

    @field_validator("binary", mode="before")
    @classmethod
    def _about_the_draft(cls, value: Any, info: ValidationInfo) -> dict[str, str] | None:
        ids = _asked(info, "ids")
        if not ids:
            return None
        if value is _ABSENT:
            raise _missing(P.KEY_DRAFT_BINARY)
        # SPEC 3.2: the judge's answers about the draft are yes or no, never na.
        return _binary(value, ids, P.KEY_DRAFT_BINARY, allow_na=False)


class PostAnswer(_Reply):
    """``panas`` holds 1–7 ratings (absolute) or −6..+6 changes (delta strategies; context ``is_change``)."""

    panas: dict[str, int]
    is_change: bool
    q1_lookingFor: list[str]
    q2_emotionClarity: str | None
    q3_modelFit: str | None
    q3_followUp_whatFeltOff: list[str] = Field(default_factory=list)
    fourBranchScores: dict[str, int]

    @model_validator(mode="before")
    @classmethod
    def _ratings_key(cls, data: Any, info: ValidationInfo) -> Any:
        """The ratings come under the strategy's key; it must be there."""
        is_change = _asked(info, "is_change")
        key = P.KEY_PANAS_CHANGE if is_change else P.KEY_POST_PANAS
        if not isinstance(data, dict) or key not in data:
            raise _missing(key)
        return {**data, "panas": data[key], "is_change": is_change}

    @field_validator("panas", mode="before")
    @classmethod
    def _twenty_items(cls, value: Any, info: ValidationInfo) -> dict[str, int]:
        is_change = _asked(info, "is_change")
        key = P.KEY_PANAS_CHANGE if is_change else P.KEY_POST_PANAS
        if not isinstance(value, dict):
            raise ValueError(f'"{key}" must be an object with the 20 feelings')
        low, high = (P.PANAS_CHANGE_MIN, P.PANAS_CHANGE_MAX) if is_change else (1, 7)
        items: dict[str, int] = {}
        for name, rating in value.items():
            item = cat.canonical_panas_item(str(name))
            if item is not None:
                items[item] = _rounded(_number(rating, low, high, f"{key}.{item}"))
        missing = [i for i in cat.PANAS_ITEMS if i not in items]
        if missing:
            raise ValueError(f'"{key}" is missing {", ".join(missing)}')
        return items

    @field_validator("q1_lookingFor", mode="before")
    @classmethod
    def _q1(cls, value: Any) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ValueError('"q1_lookingFor" must be a list of options')
        q1 = _q1_options(value)
        if value and not q1:
            raise ValueError('"q1_lookingFor" holds none of the listed options')
        return q1

    @field_validator("q2_emotionClarity", mode="before")
    @classmethod
    def _q2(cls, value: Any) -> str | None:
        return _option(value, cat.Q2_OPTIONS, "q2_emotionClarity")

    @field_validator("q3_modelFit", mode="before")
    @classmethod
    def _q3(cls, value: Any) -> str | None:
        return _option(value, cat.Q3_OPTIONS, "q3_modelFit")

    @field_validator("q3_followUp_whatFeltOff", mode="before")
    @classmethod
    def _phrases(cls, value: Any) -> list[str]:
        if isinstance(value, str):
            value = [value] if value.strip() else []
        if not isinstance(value, list):
            raise ValueError('"q3_followUp_whatFeltOff" must be a list of short phrases')
        return [str(v).strip() for v in value if str(v).strip()]

    @field_validator("fourBranchScores", mode="before")
    @classmethod
    def _branches(cls, value: Any) -> dict[str, int]:
        if not isinstance(value, dict):
            raise ValueError('"fourBranchScores" must be an object of 1-7 ratings')
        by_lower = {str(k).strip().lower(): v for k, v in value.items()}
        branches = {}
        for branch in cat.FOUR_BRANCHES:
            if branch not in by_lower:
                raise ValueError(f'"fourBranchScores" has no {branch}')
            branches[branch] = _rounded(_number(by_lower[branch], 1, 7, f"fourBranchScores.{branch}"))
        return branches

    @property
    def conversation_wide(self) -> dict[str, Any]:
        """The conversation-wide answers as the run file stores them (SPEC 3.2)."""
        return {
            "q1_lookingFor": list(self.q1_lookingFor),
            "q2_emotionClarity": self.q2_emotionClarity,
            "q3_modelFit": self.q3_modelFit,
            "q3_followUp_whatFeltOff": list(self.q3_followUp_whatFeltOff),
            "fourBranchScores": dict(self.fourBranchScores),
        }


Answer = DraftAnswer | AnalysisAnswer | BinaryAnswer | PairwiseAnswer | JudgeAnswer | PostAnswer
_A = TypeVar("_A", bound=_Reply)


def _describe(error: Any) -> str:
    """One pydantic error in words: our validators' messages as they are, others with their field."""
    if error["type"] == "missing":
        return f'the "{error["loc"][0]}" field is missing'
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    return f'"{".".join(str(part) for part in error["loc"])}": {error["msg"]}'


def _validate(model: type[_A], obj: dict[str, Any], **context: Any) -> _A:
    try:
        return model.model_validate(obj, context=context)
    except ValidationError as exc:
        raise ReplyParseError("; ".join(_describe(error) for error in exc.errors())) from None


def parse_draft(obj: dict[str, Any], verbose: bool) -> DraftAnswer:
    return _validate(DraftAnswer, obj, verbose=verbose)


def parse_analysis(obj: dict[str, Any], ids: tuple[str, ...], verbose: bool) -> AnalysisAnswer:
    return _validate(AnalysisAnswer, obj, ids=ids, verbose=verbose)


def parse_hp_binary(obj: dict[str, Any], ids: tuple[str, ...], verbose: bool) -> BinaryAnswer:
    return _validate(BinaryAnswer, obj, ids=ids, verbose=verbose)


def parse_pairwise(obj: dict[str, Any], indices: tuple[int, ...], verbose: bool) -> PairwiseAnswer:
    return _validate(PairwiseAnswer, obj, indices=indices, verbose=verbose)


def parse_judge(obj: dict[str, Any], ids: tuple[str, ...], verbose: bool, rated: bool = True) -> JudgeAnswer:
    """``rated``: ratings were asked for (there is a golden reply to rate against)."""
    return _validate(JudgeAnswer, obj, ids=ids, rated=rated, verbose=verbose)


def parse_post(obj: dict[str, Any], strategy: str, verbose: bool) -> PostAnswer:
    return _validate(PostAnswer, obj, is_change=strategy != "absolute", verbose=verbose)


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
