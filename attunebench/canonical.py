"""Typed readers and writers for the two canonical exchange formats (SPEC 3).

Readers are lenient exactly where SPEC 3.1 says so and reject everything else
with a message that names the file and the JSON path of the bad value, so that
a researcher can fix a file without guessing. Pure Python: no Django.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Final, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from attunebench import catalogue as cat

CONVERSATION_SCHEMA_VERSION: Final = "attunebench.conversation/1"
RUN_SCHEMA_VERSION: Final = "attunebench.run/1"

# ---------------------------------------------------------------------------
# Problems and errors
# ---------------------------------------------------------------------------


class Problem(BaseModel):
    """One thing wrong with one input, located precisely."""

    model_config = ConfigDict(frozen=True)

    source: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}" if self.path else self.source
        return f"{where}: {self.message}"


class CanonicalError(Exception):
    """Raised when one or more inputs do not follow the canonical format."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def format_location(loc: tuple[int | str, ...]) -> str:
    """('turns', 3, 'annotations') -> 'turns[3].annotations'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def problems_from_validation_error(source: str, error: ValidationError) -> list[Problem]:
    problems = []
    for err in error.errors(include_url=False):
        message = err["msg"]
        if err["type"] == "value_error":
            message = str(err.get("ctx", {}).get("error", message))
        elif err["type"] == "missing":
            message = "required field is missing"
        elif err["type"] == "extra_forbidden":
            message = "unknown field"
        elif "input" in err and "got " not in message:
            message = f"{message}, got {_show(err['input'])}"
        problems.append(Problem(source=source, path=format_location(tuple(err["loc"])), message=message))
    return problems


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(kind: str, expected: str, value: Any) -> PydanticCustomError:
    return PydanticCustomError(kind, "expected {expected}, got {got}", {"expected": expected, "got": _show(value)})


# ---------------------------------------------------------------------------
# Lenient scalar normalisers (SPEC 3.1)
# ---------------------------------------------------------------------------

_YES_WORDS = {"yes", "y", "true", "1"}
_NO_WORDS = {"no", "n", "false", "0"}
_NA_WORDS = {"na", "n/a", "not applicable", "not_applicable"}


_WORD_VALUES = {
    **dict.fromkeys(_YES_WORDS, cat.YES),
    **dict.fromkeys(_NO_WORDS, cat.NO),
    **dict.fromkeys(_NA_WORDS, cat.NOT_APPLICABLE),
}


def normalise_yes_no_na(value: Any) -> str | None:
    """yes/no/na from the spellings SPEC 3.1 accepts; None stays None."""
    if value is None:
        return None
    if value.__class__ is str and (word := _WORD_VALUES.get(value)) is not None:
        return word  # an exact accepted spelling (the usual case): one look-up, no trimming
    if isinstance(value, bool):
        return cat.YES if value else cat.NO
    if isinstance(value, (int, float)) and value in (0, 1):
        return cat.YES if value == 1 else cat.NO
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _YES_WORDS:
            return cat.YES
        if word in _NO_WORDS:
            return cat.NO
        if word in _NA_WORDS:
            return cat.NOT_APPLICABLE
    raise _fail("yes_no_na", "yes/no/na", value)


def normalise_intensity(value: Any) -> int | None:
    """Round and clamp to 1–7; accept mild/moderate/intense and numeric strings."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _fail("intensity", "an intensity 1-7 or mild/moderate/intense", value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in cat.INTENSITY_WORDS:
            return cat.INTENSITY_WORDS[word]
        if word in {"", "none", "null"}:
            return None
        try:
            value = float(word)
        except ValueError:
            raise _fail("intensity", "an intensity 1-7 or mild/moderate/intense", value) from None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(min(7, max(1, math.floor(value + 0.5))))
    raise _fail("intensity", "an intensity 1-7 or mild/moderate/intense", value)


def normalise_winner(value: Any) -> str | None:
    """'A'/'B' from A/B (any case) or response_1/response_2; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in {"a", "response_1"}:
            return "A"
        if word in {"b", "response_2"}:
            return "B"
    raise _fail("winner", "A/B or response_1/response_2", value)


def _strict_int(low: int, high: int, what: str) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, str):
            # SPEC 3.1: numeric strings are accepted ("5", " 5 ", "5.0").
            try:
                value = float(value.strip())
            except ValueError:
                raise _fail("range", f"{what} {low}-{high}", value) from None
            if not math.isfinite(value):
                raise _fail("range", f"{what} {low}-{high}", value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail("range", f"{what} {low}-{high}", value)
        if isinstance(value, float):
            if not value.is_integer():
                raise _fail("range", f"a whole-number {what} {low}-{high}", value)
            value = int(value)
        number: int = value
        if not low <= number <= high:
            raise _fail("range", f"{what} {low}-{high}", number)
        return number

    return check


def _clamped_total(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail("range", "a PANAS total (number) or null", value)
    return int(min(cat.PANAS_TOTAL_MAX, max(cat.PANAS_TOTAL_MIN, round(value))))


def _non_empty_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail("text", "a non-empty string", value)
    return value


def _iso_timestamp(value: Any) -> str:
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return value.strip()
        except ValueError:
            pass
    raise _fail("timestamp", "an ISO 8601 timestamp", value)


def parse_timestamp(value: str) -> datetime:
    """An ISO timestamp as an aware datetime (naive ones are taken as UTC)."""
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def format_timestamp(moment: datetime) -> str:
    """The one spelling of a timestamp that exports use, so exports are byte-stable."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


YesNoNa = Annotated[str | None, BeforeValidator(normalise_yes_no_na)]
Intensity = Annotated[int | None, BeforeValidator(normalise_intensity)]
Winner = Annotated[str | None, BeforeValidator(normalise_winner)]
Rating17 = Annotated[int, BeforeValidator(_strict_int(1, 7, "a rating"))]
PanasTotal = Annotated[int | None, BeforeValidator(_clamped_total)]
Text = Annotated[str, BeforeValidator(_non_empty_text)]
Timestamp = Annotated[str, BeforeValidator(_iso_timestamp)]

# ---------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """Sections whose reference format allows further keys (kept on round trip)."""

    model_config = ConfigDict(extra="allow")


def _rename_legacy(data: Any, aliases: dict[str, str]) -> Any:
    """Older key names read as the canonical ones (SPEC 3.1).

    The canonical key wins when both are present; of two older names for one
    key, the first listed wins. The older key never survives, so every writer
    dumps canonical keys only.
    """
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for old, new in aliases.items():
        if old in out:
            value = out.pop(old)
            if new not in out:
                out[new] = value
    return out


# Older key names written by the benchmark's own tools (SPEC 3.1), per object.
LEGACY_JUDGEMENT_KEYS: Final[dict[str, str]] = {
    "did_occur": "observedBehavior",
    "humanValue": "observedBehavior",
    "actualValue": "observedBehavior",
    "should_occur": "preferredBehavior",
    "humanPreference": "preferredBehavior",
}
LEGACY_ALTERNATE_KEYS: Final[dict[str, str]] = {"alternate1": "llmImproved", "alternate2": "humanEdited"}
LEGACY_COMPARISON_KEYS: Final[dict[str, str]] = {"response_1": "responseA", "response_2": "responseB"}
LEGACY_WIDE_KEYS: Final[dict[str, str]] = {"Q1": "q1_lookingFor", "Q2": "q2_emotionClarity", "Q3": "q3_modelFit"}
_PANAS_FIELDS: Final = frozenset({"totalPositiveAffect", "totalNegativeAffect", "items"})


class EmotionTag(_Strict):
    emotion: Text
    intensity: Intensity = None

    @field_validator("emotion")
    @classmethod
    def _catalogue_spelling(cls, value: str) -> str:
        item = cat.canonical_panas_item(value)
        if item is None:
            raise _fail("emotion", "one of the 20 PANAS items (no change is an empty list)", value)
        return item


# SPEC 2.1: "Neutral / no change is recorded as an empty tag list"; files that spell
# it out as a tag mean exactly that.
_NO_CHANGE_WORDS = frozenset({"neutral", "no change", "none", "no_change"})


def _tag_word(entry: Any) -> str | None:
    """The lower-cased emotion word of a raw tag entry, or None if it has none to read."""
    word = entry.get("emotion") if isinstance(entry, dict) else entry
    return word.strip().lower() if isinstance(word, str) else None


class Panas(_Strict):
    totalPositiveAffect: PanasTotal = None
    totalNegativeAffect: PanasTotal = None
    items: dict[str, Rating17] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _items_anywhere(cls, data: Any) -> Any:
        """Items may also sit at the top level or in a ``responses`` object (SPEC 3.1).

        ``items`` wins over ``responses``, which wins over the top level, item by item.
        """
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        responses: dict[str, Any] = {}
        loose: dict[str, Any] = {}
        for key, value in data.items():
            if key in _PANAS_FIELDS:
                out[key] = value
            elif key == "responses" and isinstance(value, dict):
                responses = value
            elif isinstance(key, str) and cat.canonical_panas_item(key) is not None:
                loose[key] = value
            else:
                out[key] = value  # rejected below as an unknown field
        if not responses and not loose:
            return out
        items = out.get("items", {})
        if not isinstance(items, dict):
            return out  # malformed: the items validator names it
        merged = dict(items)
        for source in (responses, loose):
            taken = {cat.canonical_panas_item(str(k)) for k in merged}
            merged.update({k: v for k, v in source.items() if cat.canonical_panas_item(str(k)) not in taken})
        out["items"] = merged
        return out

    @field_validator("items", mode="before")
    @classmethod
    def _known_items(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, rating in value.items():
            item = cat.canonical_panas_item(str(key))
            if item is None:
                raise ValueError(f"{key!r} is not one of the 20 PANAS items")
            if item in out:
                raise ValueError(f"{item!r} is given twice")
            out[item] = rating
        return {item: out[item] for item in cat.PANAS_ITEMS if item in out}

    @model_validator(mode="after")
    def _derive_totals(self) -> Panas:
        # SPEC 3.1: totals derived from items when absent (a partial side gives none).
        positive, negative = cat.panas_totals(self.items)
        if self.totalPositiveAffect is None:
            object.__setattr__(self, "totalPositiveAffect", positive)
        if self.totalNegativeAffect is None:
            object.__setattr__(self, "totalNegativeAffect", negative)
        return self

    @property
    def is_empty(self) -> bool:
        return not self.items and self.totalPositiveAffect is None and self.totalNegativeAffect is None


class ConversationWide(_Strict):
    """Conversation-wide answers, the participant's or a model's prediction (SPEC 2.4).

    Answers are read as the listed option strings (SPEC 2.4): a listed string
    in any letter case, or this platform's old wording, becomes the listed
    string, so old exports score like new ones. Anything else, a punctuation
    variant included, is off the list and kept as given: scoring then matches
    it with nothing, and :func:`check_conversation_options` reports it (errors
    for validate and import, warnings for score).
    """

    q1_lookingFor: list[str] = Field(default_factory=list)
    q2_emotionClarity: str | None = None
    q3_modelFit: str | None = None
    q3_followUp_whatFeltOff: list[str] = Field(default_factory=list)
    fourBranchScores: dict[str, Rating17] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return _rename_legacy(data, LEGACY_WIDE_KEYS)

    @field_validator("q1_lookingFor")
    @classmethod
    def _q1(cls, values: list[str]) -> list[str]:
        out: list[str] = []
        for value in values:
            if not value.strip():
                continue
            answer = cat.normalise_option("q1", value) or value
            if answer not in out:
                out.append(answer)
        return out

    @field_validator("q2_emotionClarity", "q3_modelFit")
    @classmethod
    def _single(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None
        return cat.normalise_option(str(info.field_name), value) or value

    @field_validator("fourBranchScores", mode="before")
    @classmethod
    def _known_branches(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for key, rating in value.items():
            branch = str(key).strip().lower()
            if branch not in cat.FOUR_BRANCHES:
                raise ValueError(f"{key!r} is not one of {', '.join(cat.FOUR_BRANCHES)}")
            out[branch] = rating
        return {b: out[b] for b in cat.FOUR_BRANCHES if b in out}


def off_list_answers(wide: ConversationWide | None, source: str, path: str) -> list[Problem]:
    """A problem for every Q1/Q2/Q3 answer that is not a listed option (SPEC 2.4)."""
    if wide is None:
        return []
    problems = []
    for i, value in enumerate(wide.q1_lookingFor):
        if value not in cat.Q1_OPTIONS:
            problems.append(
                Problem(
                    source=source,
                    path=f"{path}.q1_lookingFor[{i}]",
                    message=f"{value!r} is not one of the listed options for q1_lookingFor",
                )
            )
    singles: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
        ("q2_emotionClarity", wide.q2_emotionClarity, cat.Q2_OPTIONS),
        ("q3_modelFit", wide.q3_modelFit, cat.Q3_OPTIONS),
    )
    for name, answer, options in singles:
        if answer is not None and answer not in options:
            problems.append(
                Problem(
                    source=source,
                    path=f"{path}.{name}",
                    message=f"{answer!r} is not one of the listed options for {name}",
                )
            )
    return problems


def check_conversation_options(conversation: ConversationFile, source: str = "<input>") -> list[Problem]:
    """Off-list ground-truth survey answers: errors for validate and import, warnings for score."""
    return off_list_answers(conversation.conversationWideQuestions, source, "conversationWideQuestions")


def check_run_options(run: RunOutput, source: str = "<input>") -> list[Problem]:
    """Off-list predicted survey answers (scored anyway: they match nothing)."""
    post = run.post_conversation
    return off_list_answers(
        post.predicted_conversation_wide if post else None,
        source,
        "post_conversation.predicted_conversation_wide",
    )


# ---------------------------------------------------------------------------
# Conversation file (SPEC 3.1)
# ---------------------------------------------------------------------------


def _completeness(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if isinstance(value, str) and value.strip().lower() in options:
            return value.strip().lower()
        raise _fail("completeness", "/".join(options), value)

    return check


TurnCompleteness = Annotated[str, BeforeValidator(_completeness(cat.TURN_COMPLETENESS))]
ConversationCompleteness = Annotated[str, BeforeValidator(_completeness(cat.CONVERSATION_COMPLETENESS))]


def _omit_when_complete(data: Any, value: str) -> Any:
    """Complete records carry no completeness key, so they keep the exact SPEC 3.1 shape and bytes."""
    if isinstance(data, dict) and value == cat.TURN_COMPLETE:
        data.pop("completeness", None)
    return data


class Metadata(_Open):
    model: Text
    provider: str = ""
    timestamp: Timestamp
    category: Text
    subtopic: Text
    turnCount: int | None = None
    # Absent means complete; written only on an unfinished conversation (exports that include them).
    completeness: ConversationCompleteness = cat.CONVERSATION_COMPLETE

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        return _omit_when_complete(handler(self), self.completeness)


#: Profile key saying the participant's consent to sensitive data (their diagnoses) is recorded (SPEC 2.5).
SENSITIVE_CONSENT_KEY = "sensitiveDataConsent"


class ParticipantProfile(_Open):
    participant_id: Text
    age: str | None = None
    traits: list[str] = Field(default_factory=list)
    goals: list[str] = Field(default_factory=list)
    responses: dict[str, Any] = Field(default_factory=dict)
    diagnoses: list[str] | None = None

    @property
    def sensitive_consent(self) -> bool | None:
        """The file's record of consent to sensitive data: True, False, or None when it says nothing."""
        value = (self.model_extra or {}).get(SENSITIVE_CONSENT_KEY)
        return value if isinstance(value, bool) else None

    def consented_diagnoses(self) -> list[str] | None:
        """The diagnoses an analysis may use: only where the file records consent (SPEC 2.5), else None."""
        return self.diagnoses if self.sensitive_consent is True else None


class BinaryJudgement(_Strict):
    questionId: str
    observedBehavior: YesNoNa = None
    preferredBehavior: YesNoNa = None
    llmValue: YesNoNa = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return _rename_legacy(data, LEGACY_JUDGEMENT_KEYS)

    @field_validator("questionId")
    @classmethod
    def _known_question(cls, value: str) -> str:
        if value not in cat.BINARY_QUESTIONS_BY_ID:
            raise ValueError(f"{value!r} is not one of the 36 behaviour question ids")
        return value


class AlternateResponses(_Strict):
    llmImproved: str = ""
    humanEdited: str = ""

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return _rename_legacy(data, LEGACY_ALTERNATE_KEYS)


def _response_label(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in cat.RESPONSE_LABELS:
        return value.strip().lower()
    raise _fail("choice", "original/alternate/human", value)


ResponseLabel = Annotated[str, BeforeValidator(_response_label)]


class PairwiseComparison(_Strict):
    questionId: str
    responseA: ResponseLabel
    responseB: ResponseLabel
    winner: Winner = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        return _rename_legacy(data, LEGACY_COMPARISON_KEYS)

    @field_validator("questionId")
    @classmethod
    def _known_question(cls, value: str) -> str:
        if not cat.is_valid_pairwise_question_id(value):
            raise ValueError(f"{value!r} is not 'general', PW1-PW15 or 'custom:<text>'")
        return value

    @model_validator(mode="after")
    def _distinct(self) -> PairwiseComparison:
        if self.responseA == self.responseB:
            raise ValueError(f"responseA and responseB are both {self.responseA!r}")
        return self


def _ordered_unique_turns(turns: list[Any]) -> list[Any]:
    """Turns sorted by number; a number given twice is an error, never silently merged."""
    seen: set[int] = set()
    for turn in turns:
        if turn.turnNumber in seen:
            raise ValueError(f"turn number {turn.turnNumber} appears twice")
        seen.add(turn.turnNumber)
    return sorted(turns, key=lambda t: t.turnNumber)


class Annotations(_Strict):
    """A turn's annotations. ``None`` (JSON null) is a step the participant has not answered yet;
    ``[]`` is an answered step with nothing in it (SPEC 2.1: an empty mood list means "no change")."""

    binaryJudgements: list[BinaryJudgement] | None = Field(default_factory=list)
    alternateResponses: AlternateResponses | None = None
    pairwiseComparisons: list[PairwiseComparison] | None = Field(default_factory=list)
    selectedPairwiseQuestions: list[str] | None = Field(default_factory=list)

    @field_validator("binaryJudgements")
    @classmethod
    def _unique_questions(cls, values: list[BinaryJudgement] | None) -> list[BinaryJudgement] | None:
        seen: set[str] = set()
        for value in values or []:
            if value.questionId in seen:
                raise ValueError(f"question {value.questionId} is answered twice")
            seen.add(value.questionId)
        return values


#: The steps of a turn that are null until the participant answers them.
UNANSWERABLE_STEPS: Final = ("moodShiftTags", "binaryJudgements", "pairwiseComparisons", "selectedPairwiseQuestions")


class Turn(_Strict):
    turnNumber: Annotated[int, Field(ge=1)]
    userMessage: str
    llmResponse: str
    moodShiftTags: list[EmotionTag] | None = Field(default_factory=list)
    annotations: Annotations = Field(default_factory=Annotations)
    # Absent means complete; written only on an unfinished turn (exports that include them).
    completeness: TurnCompleteness = cat.TURN_COMPLETE

    @property
    def unanswered_steps(self) -> list[str]:
        """The steps still null: the turn's ground truth is not all there (it is not scored, SPEC 5.1)."""
        values = {
            "moodShiftTags": self.moodShiftTags,
            "binaryJudgements": self.annotations.binaryJudgements,
            "pairwiseComparisons": self.annotations.pairwiseComparisons,
            "selectedPairwiseQuestions": self.annotations.selectedPairwiseQuestions,
        }
        return [step for step in UNANSWERABLE_STEPS if values[step] is None]

    @model_validator(mode="after")
    def _null_only_when_unfinished(self) -> Turn:
        missing = self.unanswered_steps
        if missing and self.completeness == cat.TURN_COMPLETE:
            raise ValueError(
                f"{', '.join(missing)} is null (not answered) but the turn is not flagged unfinished: "
                f"a complete turn answers every step; an unfinished one says "
                f'"completeness": "{cat.TURN_ANNOTATION_UNFINISHED}"'
            )
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        return _omit_when_complete(handler(self), self.completeness)

    @field_validator("moodShiftTags", mode="before")
    @classmethod
    def _no_change_is_empty(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [entry for entry in value if _tag_word(entry) not in _NO_CHANGE_WORDS]
        return value


class ConversationFile(_Strict):
    conversationId: Text
    metadata: Metadata
    participant_profile: ParticipantProfile | None = None
    prePanas: Panas | None = None
    postPanas: Panas | None = None
    conversationWideQuestions: ConversationWide | None = None
    turns: list[Turn] = Field(default_factory=list)

    @field_validator("turns")
    @classmethod
    def _ordered_unique(cls, turns: list[Turn]) -> list[Turn]:
        return _ordered_unique_turns(turns)

    @model_validator(mode="after")
    def _turn_count(self) -> ConversationFile:
        if self.metadata.turnCount is None:
            self.metadata.turnCount = len(self.turns)
        return self

    @model_validator(mode="after")
    def _complete_means_every_turn(self) -> ConversationFile:
        unfinished = [t.turnNumber for t in self.turns if t.completeness != cat.TURN_COMPLETE]
        if unfinished and self.metadata.completeness == cat.CONVERSATION_COMPLETE:
            raise ValueError(
                f"turn(s) {', '.join(map(str, unfinished))} are flagged unfinished but the conversation is not: "
                f'its metadata needs "completeness": "{cat.CONVERSATION_UNFINISHED}"'
            )
        return self


# ---------------------------------------------------------------------------
# Evaluated-model run output (SPEC 3.2)
# ---------------------------------------------------------------------------

# Answers already in their canonical spelling: what the replay writes, the fast path of BinaryAnswers.
_CANONICAL_ANSWERS: Final = frozenset({cat.YES, cat.NO, cat.NOT_APPLICABLE, None})
_STR_ONLY: Final = frozenset({str})


def _answers_at_once(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Accept a question id -> answer object in one pass when every answer is already canonical.

    A run stores hundreds of answers per turn, nearly always written as yes/no/na by the replay; two set
    comparisons check them all at a fraction of one validator call each. Anything else (another accepted
    spelling, a boolean, a bad value, a non-string key) goes through the per-answer validation, which
    normalises it or names the bad answer's path as before.
    """
    if value.__class__ is dict:
        try:
            if {*value.values()} <= _CANONICAL_ANSWERS and {*map(type, value)} <= _STR_ONLY:
                return dict(value)
        except TypeError:  # an unhashable answer: the per-answer validation names it
            pass
    return handler(value)


BinaryAnswers = Annotated[dict[str, YesNoNa], WrapValidator(_answers_at_once)]


def _selection_key(value: Any) -> str:
    text = str(value).strip()
    if not text.isdigit():
        raise _fail("index", "a comparison index such as '0'", value)
    return str(int(text))


class RunTurn(_Strict):
    turnNumber: Annotated[int, Field(ge=1)]
    em_emotion_tags: list[EmotionTag] = Field(default_factory=list)
    em_drafted_response: str | None = None
    em_binary_om_assessment: BinaryAnswers = Field(default_factory=dict)
    em_binary_human_prediction: BinaryAnswers = Field(default_factory=dict)
    em_binary_om_assessment_hp: BinaryAnswers = Field(default_factory=dict)
    em_binary_human_prediction_hp: BinaryAnswers = Field(default_factory=dict)
    em_pairwise_selections: dict[str, Winner] = Field(default_factory=dict)
    em_draft_judge_scores: dict[str, float | None] | None = None
    em_draft_binary_assessment: BinaryAnswers | None = None

    @field_validator("em_emotion_tags", mode="before")
    @classmethod
    def _known_emotions(cls, value: Any) -> Any:
        # SPEC 4: an EM's words outside the 20 items are dropped, not errors; a malformed
        # entry (no word to read) is still left for validation to reject.
        if isinstance(value, list):
            return [
                entry
                for entry in value
                if (word := _tag_word(entry)) is None or cat.canonical_panas_item(word) is not None
            ]
        return value

    @field_validator("em_pairwise_selections", mode="before")
    @classmethod
    def _index_keys(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {_selection_key(k): v for k, v in value.items()}
        return value

    @field_validator("em_draft_judge_scores", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        # A float field would silently read true as 1.0; a boolean is never a 1-7 score.
        if isinstance(value, dict):
            for key, score in value.items():
                if isinstance(score, bool):
                    raise ValueError(f"{key}: expected a score 1-7, got {_show(score)}")
        return value

    @field_validator("em_draft_judge_scores")
    @classmethod
    def _judge_range(cls, value: dict[str, float | None] | None) -> dict[str, float | None] | None:
        if value is None:
            return None
        for key, score in value.items():
            if key not in cat.JUDGE_DIMENSIONS:
                raise ValueError(f"{key!r} is not a judge dimension ({', '.join(cat.JUDGE_DIMENSIONS)})")
            if score is not None and not 1 <= score <= 7:
                raise ValueError(f"{key}: expected a score 1-7, got {score!r}")
        return value


class PostConversation(_Strict):
    panas_strategy: str
    predicted_post_panas: Panas | None = None
    predicted_conversation_wide: ConversationWide | None = None

    @field_validator("panas_strategy")
    @classmethod
    def _strategy(cls, value: str) -> str:
        if value not in cat.PANAS_STRATEGIES:
            raise ValueError(f"expected one of {', '.join(cat.PANAS_STRATEGIES)}, got {value!r}")
        return value


class RunOutput(_Open):
    conversationId: Text
    em_model: Text
    mode: str
    run_timestamp: Timestamp
    turns: list[RunTurn] = Field(default_factory=list)
    post_conversation: PostConversation | None = None
    api_cost: float | None = None
    duration_seconds: float | None = None
    prompt_version: str | None = None

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in cat.MODES:
            raise ValueError(f"expected one of {', '.join(cat.MODES)}, got {value!r}")
        return value

    @field_validator("turns")
    @classmethod
    def _ordered_unique(cls, turns: list[RunTurn]) -> list[RunTurn]:
        return _ordered_unique_turns(turns)


# ---------------------------------------------------------------------------
# Parsing and writing
# ---------------------------------------------------------------------------


def decode_json(source: str, raw: bytes | str) -> Any:
    """Bytes or text -> a JSON value, or CanonicalError naming the file and what is wrong with it."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise CanonicalError(
            [Problem(source=source, path="", message=f"not UTF-8 text ({exc.reason} at byte {exc.start})")]
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CanonicalError(
            [
                Problem(
                    source=source, path="", message=f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                )
            ]
        ) from None


M = TypeVar("M", bound=BaseModel)


def _validate(model: type[M], source: str, data: Any) -> M:
    if not isinstance(data, dict):
        raise CanonicalError(
            [
                Problem(
                    source=source,
                    path="",
                    message=f"expected a JSON object at the top level, got {type(data).__name__}",
                )
            ]
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CanonicalError(problems_from_validation_error(source, exc)) from None


def parse_conversation(data: Any, source: str = "<input>") -> ConversationFile:
    """Validate an already-decoded conversation object."""
    return _validate(ConversationFile, source, data)


def parse_run(data: Any, source: str = "<input>") -> RunOutput:
    """Validate an already-decoded EM run output object."""
    return _validate(RunOutput, source, data)


def load_conversation(raw: bytes | str, source: str = "<input>") -> ConversationFile:
    return parse_conversation(decode_json(source, raw), source)


def load_run(raw: bytes | str, source: str = "<input>") -> RunOutput:
    return parse_run(decode_json(source, raw), source)


def looks_like_run(data: Any) -> bool:
    """Run outputs carry em_model; conversation files carry metadata."""
    return isinstance(data, dict) and "em_model" in data


# Keys every export's datasheet.json carries (datasets.versions.build_datasheet) and no conversation or run has.
DATASHEET_KEYS = frozenset({"dataset_version", "content_hash", "counts", "schema_version"})


RUN_MANIFEST_DOCUMENT = "attunebench-run-manifest"  # the "document" of a run download's manifest.json


def looks_like_datasheet(data: Any) -> bool:
    """A file describing the data beside it, not a conversation or a run: an export's datasheet.json or a
    run download's manifest.json. Readers skip it instead of reporting it as a malformed document."""
    if not isinstance(data, dict) or "conversationId" in data or "em_model" in data:
        return False
    return data.keys() >= DATASHEET_KEYS or data.get("document") == RUN_MANIFEST_DOCUMENT


def to_canonical_dict(document: BaseModel) -> dict[str, Any]:
    return document.model_dump(mode="json")


def dumps_canonical(document: BaseModel | dict[str, Any]) -> str:
    """The one byte-stable text of a document: sorted keys, 2-space indent, final newline."""
    data = to_canonical_dict(document) if isinstance(document, BaseModel) else document
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def dumps_line(document: BaseModel | dict[str, Any]) -> str:
    """One JSONL line (compact, sorted keys)."""
    data = to_canonical_dict(document) if isinstance(document, BaseModel) else document
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
