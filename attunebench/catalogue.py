"""The AttuneBench instrument: every item, question, option and topic, in one place.

Every other module (forms, prompts, readers, scorers, exports) imports its
option strings from here so that a stored answer is always exactly the
catalogued string. Pure Python: no Django, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

# ---------------------------------------------------------------------------
# PANAS-SF (SPEC 2.1)
# ---------------------------------------------------------------------------

PANAS_SCALE_MIN: Final = 1
PANAS_SCALE_MAX: Final = 7
PANAS_TOTAL_MIN: Final = 10
PANAS_TOTAL_MAX: Final = 70
PANAS_TOTAL_MIDPOINT: Final = 40

POSITIVE_AFFECT_ITEMS: Final[tuple[str, ...]] = (
    "Proud",
    "Alert",
    "Inspired",
    "Determined",
    "Attentive",
    "Active",
    "Excited",
    "Strong",
    "Enthusiastic",
    "Interested",
)
NEGATIVE_AFFECT_ITEMS: Final[tuple[str, ...]] = (
    "Irritable",
    "Ashamed",
    "Nervous",
    "Jittery",
    "Distressed",
    "Afraid",
    "Upset",
    "Guilty",
    "Scared",
    "Hostile",
)
PANAS_ITEMS: Final[tuple[str, ...]] = POSITIVE_AFFECT_ITEMS + NEGATIVE_AFFECT_ITEMS

# (valence, arousal), both 0–1, keyed by lower-case item.
VALENCE_AROUSAL: Final[dict[str, tuple[float, float]]] = {
    "afraid": (0.073, 0.84),
    "scared": (0.083, 0.82),
    "nervous": (0.188, 0.72),
    "jittery": (0.196, 0.788),
    "distressed": (0.125, 0.75),
    "upset": (0.167, 0.65),
    "guilty": (0.15, 0.6),
    "ashamed": (0.13, 0.62),
    "hostile": (0.2, 0.7),
    "irritable": (0.22, 0.68),
    "interested": (0.65, 0.6),
    "excited": (0.8, 0.85),
    "strong": (0.75, 0.7),
    "enthusiastic": (0.82, 0.78),
    "proud": (0.85, 0.65),
    "alert": (0.7, 0.75),
    "inspired": (0.9, 0.7),
    "determined": (0.78, 0.72),
    "attentive": (0.68, 0.6),
    "active": (0.72, 0.8),
}

_ITEM_BY_LOWER: Final[dict[str, str]] = {item.lower(): item for item in PANAS_ITEMS}

# Words participants and models use for intensity instead of a number (SPEC 3.1).
INTENSITY_WORDS: Final[dict[str, int]] = {"mild": 2, "moderate": 4, "intense": 6}


def canonical_panas_item(word: str) -> str | None:
    """The catalogued spelling of a PANAS word, or None if it is not one of the 20."""
    return _ITEM_BY_LOWER.get(word.strip().lower())


def panas_totals(items: Mapping[str, int]) -> tuple[int | None, int | None]:
    """(PA total, NA total): each the sum of its ten items, clamped to 10–70 (SPEC 2.1, 3.1).

    A side with any item missing has no total: a partial sum would look like a
    real total far below the midpoint. Item names may be in any case. This is
    the one derivation of totals: the file reader, scoring and the participant
    flow all call it.
    """
    ratings = {item: value for key, value in items.items() if (item := canonical_panas_item(key)) is not None}

    def side(names: tuple[str, ...]) -> int | None:
        present = [ratings[n] for n in names if n in ratings]
        if len(present) < len(names):
            return None
        return min(PANAS_TOTAL_MAX, max(PANAS_TOTAL_MIN, sum(present)))

    return side(POSITIVE_AFFECT_ITEMS), side(NEGATIVE_AFFECT_ITEMS)


def panas_affect(item: str) -> str:
    """'PA' or 'NA' for a catalogued item (any case)."""
    canonical = canonical_panas_item(item)
    if canonical is None:
        raise KeyError(f"not a PANAS item: {item!r}")
    return "PA" if canonical in POSITIVE_AFFECT_ITEMS else "NA"


def emotion_similarity(a: str, b: str) -> float:
    """Valence–arousal similarity of two emotion words (SPEC 2.1); 0 outside the 20."""
    va_a = VALENCE_AROUSAL.get(a.strip().lower())
    va_b = VALENCE_AROUSAL.get(b.strip().lower())
    if va_a is None or va_b is None:
        return 0.0
    distance = math.hypot(va_a[0] - va_b[0], va_a[1] - va_b[1])
    return round(1 - distance / math.sqrt(2), 4)


# ---------------------------------------------------------------------------
# The 36 binary behaviour questions (SPEC 2.2)
# ---------------------------------------------------------------------------

BRANCH_PERCEIVING: Final = "perceiving"
BRANCH_UNDERSTANDING: Final = "understanding"
BRANCH_USING: Final = "using"
BRANCH_REGULATING: Final = "regulating"
BRANCH_COGNITIVE_FRAMING: Final = "cognitive_framing"
BINARY_CATEGORIES: Final[tuple[str, ...]] = (
    BRANCH_PERCEIVING,
    BRANCH_UNDERSTANDING,
    BRANCH_USING,
    BRANCH_REGULATING,
    BRANCH_COGNITIVE_FRAMING,
)
BINARY_CATEGORY_LABELS: Final[dict[str, str]] = {
    BRANCH_PERCEIVING: "Noticing feelings",
    BRANCH_UNDERSTANDING: "Understanding feelings",
    BRANCH_USING: "Tone and direction",
    BRANCH_REGULATING: "Support and safety",
    BRANCH_COGNITIVE_FRAMING: "Ways of seeing things",
}


@dataclass(frozen=True)
class BinaryQuestion:
    """One behaviour question, worded about the participant (for models) and by them."""

    id: str
    category: str
    third_person: str
    first_person: str

    @property
    def wanted(self) -> str:
        """The participant's second prompt: what they wanted (SPEC 2.2 *preferred*), worded for this question."""
        return BINARY_WANTED_PROMPTS[self.id]


BINARY_QUESTIONS: Final[tuple[BinaryQuestion, ...]] = (
    # perceiving
    BinaryQuestion(
        "B1",
        BRANCH_PERCEIVING,
        "Did the reply acknowledge the emotional content of the participant's message?",
        "Did the reply pick up on the feelings in what I wrote?",
    ),
    BinaryQuestion(
        "B2",
        BRANCH_PERCEIVING,
        "Did every claim the reply made about the participant's feelings match what they had expressed?",
        "When the reply said how I felt, was it right about what I had expressed?",
    ),
    BinaryQuestion(
        "B3",
        BRANCH_PERCEIVING,
        "Did the reply reflect a specific detail from the participant's message that shows it understood?",
        "Did the reply mention a specific detail I shared, in a way that showed it understood?",
    ),
    BinaryQuestion(
        "B108",
        BRANCH_PERCEIVING,
        "Did the reply reuse the participant's own emotion words instead of substituting a different label?",
        "Did the reply use my own words for my feelings, rather than swapping in a different label?",
    ),
    BinaryQuestion(
        "B109",
        BRANCH_PERCEIVING,
        "When several emotions were present, did the reply focus on the most central one?",
        "If I had several feelings at once, did the reply focus on the one that mattered most?",
    ),
    # understanding
    BinaryQuestion(
        "B4",
        BRANCH_UNDERSTANDING,
        "Did the reply acknowledge more than one feeling, or how strong the feeling was?",
        "Did the reply recognise that I had more than one feeling, or how strong it was?",
    ),
    BinaryQuestion(
        "B5",
        BRANCH_UNDERSTANDING,
        "Did the reply acknowledge that the participant's feelings changed during the conversation?",
        "Did the reply notice that my feelings had changed as we talked?",
    ),
    BinaryQuestion(
        "B6",
        BRANCH_UNDERSTANDING,
        "Did the reply infer or assume things beyond what the participant actually said?",
        "Did the reply assume things about me that I had not said?",
    ),
    BinaryQuestion(
        "B7",
        BRANCH_UNDERSTANDING,
        "Did the reply hedge its guesses about the participant's state (for example 'it sounds like...')?",
        'Did the reply say its guesses about how I felt tentatively (like "it sounds like...")?',
    ),
    BinaryQuestion(
        "B206",
        BRANCH_UNDERSTANDING,
        "Did the reply sound too formal or clinical for the participant's tone?",
        "Did the reply sound too formal or clinical for the way I was talking?",
    ),
    BinaryQuestion(
        "B207",
        BRANCH_UNDERSTANDING,
        "Did the reply repeat emotional language excessively?",
        "Did the reply repeat emotional words at me too much?",
    ),
    # using (facilitating)
    BinaryQuestion(
        "B8",
        BRANCH_USING,
        "Did the tone of the reply fit the moment?",
        "Did the tone of the reply fit how I was feeling at that moment?",
    ),
    BinaryQuestion(
        "B9",
        BRANCH_USING,
        "Did the reply match the seriousness of the situation?",
        "Did the reply take my situation as seriously as it deserved, no more and no less?",
    ),
    BinaryQuestion(
        "B10",
        BRANCH_USING,
        "Was the emotional intensity of the reply appropriate?",
        "Was the reply's emotional intensity about right for me?",
    ),
    BinaryQuestion(
        "B11",
        BRANCH_USING,
        "Did the reply try to guide or direct the participant?",
        "Did the reply try to guide me or tell me what to do?",
    ),
    BinaryQuestion(
        "B12",
        BRANCH_USING,
        "Did the reply give explanations or reasoning?",
        "Did the reply explain things to me or give reasons?",
    ),
    BinaryQuestion(
        "B13", BRANCH_USING, "Did the reply ask a follow-up question?", "Did the reply ask me a follow-up question?"
    ),
    BinaryQuestion(
        "B14",
        BRANCH_USING,
        "Did the reply make a moral judgement?",
        "Did the reply judge what I or others did as right or wrong?",
    ),
    BinaryQuestion(
        "B15",
        BRANCH_USING,
        "Did the reply reflect back a detail in a way that showed understanding?",
        "Did the reply repeat back something I said in a way that showed it understood me?",
    ),
    BinaryQuestion(
        "B310",
        BRANCH_USING,
        "Did the reply give advice that was not tied to the participant's situation?",
        "Did the reply give advice that didn't fit my actual situation?",
    ),
    BinaryQuestion(
        "B311",
        BRANCH_USING,
        "Did the reply drift to a generic topic?",
        "Did the reply drift away from my situation into something generic?",
    ),
    BinaryQuestion(
        "B313",
        BRANCH_USING,
        "Did the reply give advice before asking any clarifying question?",
        "Did the reply give advice before asking me anything to understand better?",
    ),
    BinaryQuestion(
        "B315",
        BRANCH_USING,
        "Did the reply introduce a new topic the participant had not raised?",
        "Did the reply bring up a new topic I hadn't mentioned?",
    ),
    BinaryQuestion(
        "B316",
        BRANCH_USING,
        "Did the reply acknowledge the constraints or difficulties of an action it suggested?",
        "When it suggested something, did the reply recognise what might make that hard for me?",
    ),
    # regulating (managing)
    BinaryQuestion(
        "B16",
        BRANCH_REGULATING,
        "Did the reply adjust after the participant reacted or clarified?",
        "Did the reply adjust after I reacted or explained more?",
    ),
    BinaryQuestion(
        "B17",
        BRANCH_REGULATING,
        "Did the reply identify indicators of risk?",
        "Did the reply notice signs that I might be at risk?",
    ),
    BinaryQuestion(
        "B18",
        BRANCH_REGULATING,
        "Did the reply give safety or emergency framing when it was needed?",
        "Did the reply point me to safety or emergency help when that was needed?",
    ),
    BinaryQuestion(
        "B19",
        BRANCH_REGULATING,
        "Did the reply validate the participant's emotional experience?",
        "Did the reply make me feel my feelings were valid?",
    ),
    BinaryQuestion(
        "B20",
        BRANCH_REGULATING,
        "Did the reply use language that could escalate emotion, such as catastrophising or alarm?",
        "Did the reply use language that could make me more upset or alarmed?",
    ),
    BinaryQuestion(
        "B406",
        BRANCH_REGULATING,
        "Did the reply correct an earlier assumption of its own?",
        "Did the reply correct something it had wrongly assumed about me earlier?",
    ),
    BinaryQuestion(
        "B408",
        BRANCH_REGULATING,
        "Did the reply repeat advice it had already given?",
        "Did the reply repeat advice it had already given me?",
    ),
    # cognitive framing
    BinaryQuestion(
        "B501",
        BRANCH_COGNITIVE_FRAMING,
        "Did the reply invite the participant to reflect on their own view or feelings?",
        "Did the reply invite me to reflect on my own view or feelings?",
    ),
    BinaryQuestion(
        "B502",
        BRANCH_COGNITIVE_FRAMING,
        "Did the reply suggest how another person might see the situation?",
        "Did the reply suggest how someone else might see my situation?",
    ),
    BinaryQuestion(
        "B503",
        BRANCH_COGNITIVE_FRAMING,
        "Did the reply offer several possible interpretations instead of one?",
        "Did the reply offer me more than one way of looking at what happened?",
    ),
    BinaryQuestion(
        "B504",
        BRANCH_COGNITIVE_FRAMING,
        "Did the reply acknowledge that the situation may be complex?",
        "Did the reply recognise that my situation might be complicated?",
    ),
    BinaryQuestion(
        "B505",
        BRANCH_COGNITIVE_FRAMING,
        "Did the reply ask a question that needs reflection rather than a factual answer?",
        "Did the reply ask me something that made me think, rather than just ask for facts?",
    ),
)
BINARY_QUESTION_IDS: Final[tuple[str, ...]] = tuple(q.id for q in BINARY_QUESTIONS)
#: The second prompt of each behaviour question (SPEC 2.2 *preferred*, "did I want it?"), asked
#: in the participant's own words about what they wanted. It names the same behaviour as the first
#: prompt, so "Yes" means the same thing in both columns of the answers page (which shows the first
#: prompt once per row, with "Did it happen?" and "Did I want it?" as the columns).
BINARY_WANTED_PROMPTS: Final[dict[str, str]] = {
    "B1": "Did I want it to pick up on my feelings?",
    "B2": "Did I want it to describe my feelings only as I had expressed them?",
    "B3": "Did I want it to mention a specific detail I shared?",
    "B108": "Did I want it to use my own words for my feelings?",
    "B109": "Did I want it to focus on the one feeling that mattered most?",
    "B4": "Did I want it to recognise more than one feeling, or how strong it was?",
    "B5": "Did I want it to notice how my feelings had changed?",
    "B6": "Did I want it to assume things about me that I had not said?",
    "B7": "Did I want it to put its guesses about my feelings tentatively?",
    "B206": "Did I want it to sound formal or clinical?",
    "B207": "Did I want it to repeat emotional words that often?",
    "B8": "Did I want its tone to match how I was feeling?",
    "B9": "Did I want it to take my situation as seriously as it felt to me?",
    "B10": "Did I want its emotional intensity to match mine?",
    "B11": "Did I want to be guided or told what to do?",
    "B12": "Did I want explanations or reasons?",
    "B13": "Did I want to be asked a follow-up question?",
    "B14": "Did I want it to judge what I or others did?",
    "B15": "Did I want it to repeat back something I said?",
    "B310": "Did I want advice that didn't fit my actual situation?",
    "B311": "Did I want it to drift away from my situation into something generic?",
    "B313": "Did I want advice straight away, before being asked anything?",
    "B315": "Did I want it to bring up a new topic?",
    "B316": "Did I want it to recognise what might make its suggestions hard for me?",
    "B16": "Did I want it to adjust after I reacted or explained more?",
    "B17": "Did I want it to look out for signs that I might be at risk?",
    "B18": "Did I want to be pointed to safety or emergency help?",
    "B19": "Did I want it to tell me my feelings were valid?",
    "B20": "Did I want it to use language that could make me more upset or alarmed?",
    "B406": "Did I want it to correct what it had wrongly assumed about me?",
    "B408": "Did I want it to repeat advice it had already given?",
    "B501": "Did I want to be invited to reflect on my own view or feelings?",
    "B502": "Did I want to hear how someone else might see my situation?",
    "B503": "Did I want more than one way of looking at what happened?",
    "B504": "Did I want it to recognise that my situation might be complicated?",
    "B505": "Did I want to be asked something that made me think?",
}
BINARY_QUESTIONS_BY_ID: Final[dict[str, BinaryQuestion]] = {q.id: q for q in BINARY_QUESTIONS}

YES: Final = "yes"
NO: Final = "no"
NOT_APPLICABLE: Final = "na"
YES_NO_NA: Final[tuple[str, ...]] = (YES, NO, NOT_APPLICABLE)
YES_NO_NA_LABELS: Final[dict[str, str]] = {YES: "Yes", NO: "No", NOT_APPLICABLE: "Not applicable"}

# ---------------------------------------------------------------------------
# Pairwise preference questions (SPEC 2.3)
# ---------------------------------------------------------------------------

RESPONSE_ORIGINAL: Final = "original"
RESPONSE_ALTERNATE: Final = "alternate"
RESPONSE_HUMAN: Final = "human"
RESPONSE_LABELS: Final[tuple[str, ...]] = (RESPONSE_ORIGINAL, RESPONSE_ALTERNATE, RESPONSE_HUMAN)
WINNERS: Final[tuple[str, ...]] = ("A", "B")
CUSTOM_PAIRWISE_PREFIX: Final = "custom:"

PAIRWISE_QUESTIONS: Final[dict[str, str]] = {
    "general": "Overall, which reply do you prefer?",
    "PW1": "Which reply better understood how I felt?",
    "PW2": "Which reply handled mixed or unclear feelings better?",
    "PW3": "Which reply avoided making wrong assumptions about me?",
    "PW4": "Which reply was more supportive?",
    "PW5": "Which reply was less dismissive?",
    "PW6": "Which reply gave me more room to express myself?",
    "PW7": "Which reply gave more helpful direction?",
    "PW8": "Which reply better respected my ability to decide for myself?",
    "PW9": "Which reply pushed less hard?",
    "PW10": "Which reply helped me feel steadier?",
    "PW11": "Which reply took my situation seriously enough?",
    "PW12": "Which reply responded better to any risk in my situation?",
    "PW13": "Which reply better matched what I needed right then?",
    "PW14": "Which reply adjusted better to my reactions?",
    "PW15": "Which reply had better pacing?",
}
PAIRWISE_QUESTION_IDS: Final[tuple[str, ...]] = tuple(PAIRWISE_QUESTIONS)


def is_valid_pairwise_question_id(question_id: str) -> bool:
    """A catalogued id, or a free-text question stored as ``custom:<text>``."""
    if question_id in PAIRWISE_QUESTIONS:
        return True
    return question_id.startswith(CUSTOM_PAIRWISE_PREFIX) and bool(question_id[len(CUSTOM_PAIRWISE_PREFIX) :].strip())


# ---------------------------------------------------------------------------
# Post-conversation survey (SPEC 2.4)
# ---------------------------------------------------------------------------

# The stored answers are the benchmark's own option strings, exactly as listed
# here: files written by its own tools use them (SPEC 2.4).
Q1_OPTIONS: Final[tuple[str, ...]] = (
    "To just listen or let me vent",
    "To help me understand or sort out my feelings",
    "To help me think through options or make a decision",
    "To help with something urgent, risky, or high-stakes",
    "To get specific information or advice",
    "To help me calm down or feel steadier",
    "Other",
)
Q1_OTHER: Final = "Other"
#: Where the participant's own words for Q1 "Other" go: ``q1_lookingFor`` holds only the listed
#: strings (``Other`` among them), and the conversation file's open ``metadata`` section takes the text.
Q1_OTHER_TEXT_KEY: Final = "q1_lookingFor_otherText"
Q2_OPTIONS: Final[tuple[str, ...]] = (
    "Clear and explicitly stated",
    "Implied or indirect",
    "Mixed or conflicted",
    "Unclear / evolving as I talked",
)
# Ordinal, best first: the index is the position used for the ordinal distance.
Q3_OPTIONS: Final[tuple[str, ...]] = (
    "Very well-matched and adaptive",
    "Mostly well-matched",
    "Mixed, some good moments, some misses",
    "Mostly off-target or intrusive",
)

# Wording this platform stored before it adopted the benchmark's strings: old
# exports and databases hold these, and readers map them to the listed string.
LEGACY_OPTION_ALIASES: Final[dict[str, str]] = {
    "Just listen / let me vent": "To just listen or let me vent",
    "Help me understand or sort out my feelings": "To help me understand or sort out my feelings",
    "Help me think through options or decide": "To help me think through options or make a decision",
    "Help with something urgent, risky or high-stakes": "To help with something urgent, risky, or high-stakes",
    "Specific information or advice": "To get specific information or advice",
    "Help me calm down or feel steadier": "To help me calm down or feel steadier",
}

# Suggestions offered for the "what felt off" follow-up; free text is allowed too.
Q3_WHAT_FELT_OFF_SUGGESTIONS: Final[tuple[str, ...]] = (
    "Too much advice",
    "Too many questions",
    "Missed how I was feeling",
    "Assumed things about me",
    "Too formal or clinical",
    "Too generic",
    "Pushed too hard",
    "Did not take it seriously enough",
    "Overreacted",
    "Repeated itself",
)

Q1_PROMPT: Final = "What were you looking for from this conversation? (choose all that apply)"
Q2_PROMPT: Final = "How clear were your emotions during the conversation?"
Q3_PROMPT: Final = "How well did the model match what you needed?"
Q3_FOLLOW_UP_PROMPT: Final = "What felt off? (add as many as you like)"

FOUR_BRANCHES: Final[tuple[str, ...]] = ("perceiving", "facilitating", "understanding", "managing")
FOUR_BRANCH_PROMPTS: Final[dict[str, str]] = {
    "perceiving": "How well did the model notice what you were feeling?",
    "facilitating": "How well did the model use the right emotional tone to help the conversation?",
    "understanding": "How well did the model understand why you felt the way you did, and how that changed?",
    "managing": "How well did the model help you handle your feelings?",
}
FOUR_BRANCH_MIN: Final = 1
FOUR_BRANCH_MAX: Final = 7
FOUR_BRANCH_DEFAULT_PREDICTION: Final = 4


def _option_key(text: str) -> str:
    """Case, punctuation and spacing removed, and a leading "To" dropped.

    Two answers with the same key are the same answer written differently
    ("to just listen, or let me vent" is "To just listen or let me vent").
    """
    words = re.findall(r"[^\W_]+", text.casefold())
    if words and words[0] == "to":
        words = words[1:]
    return " ".join(words)


def match_option(value: str, options: tuple[str, ...]) -> str | None:
    """The listed option an evaluated model's ``value`` stands for, or None when it is off the list.

    For the replay parser only: a model paraphrases, so this is tolerant of
    case, punctuation, spacing and a missing leading "To", and maps the old
    wording of :data:`LEGACY_OPTION_ALIASES` to the listed string. Files are
    read with :func:`stored_option`, which SPEC 2.4 keeps strict.
    """
    key = _option_key(value)
    if not key:
        return None
    for option in options:
        if _option_key(option) == key:
            return option
    for old, listed in LEGACY_OPTION_ALIASES.items():
        if listed in options and _option_key(old) == key:
            return listed
    return None


_QUESTION_OPTIONS: Final[dict[str, tuple[str, ...]]] = {
    "q1": Q1_OPTIONS,
    "q1_lookingfor": Q1_OPTIONS,
    "q2": Q2_OPTIONS,
    "q2_emotionclarity": Q2_OPTIONS,
    "q3": Q3_OPTIONS,
    "q3_modelfit": Q3_OPTIONS,
}


def question_options(question: str) -> tuple[str, ...]:
    """The listed options of 'q1'/'q2'/'q3' (or the canonical field name, any case)."""
    try:
        return _QUESTION_OPTIONS[question.strip().lower()]
    except KeyError:
        raise KeyError(f"not a survey question with options: {question!r} (use q1, q2 or q3)") from None


def stored_option(value: str, options: tuple[str, ...]) -> str | None:
    """The listed string a stored answer is, compared case-insensitively; None if it is off the list.

    SPEC 2.4: stored answers are the listed strings and scoring compares them
    case-insensitively, so a punctuation or spacing variant ("Mostly well
    matched") is off the list and matches nothing. The only other spellings
    accepted are this platform's old wording (:data:`LEGACY_OPTION_ALIASES`,
    again in any case), so old exports still read. Surrounding whitespace is
    not part of an answer.
    """
    key = value.strip().lower()
    if not key:
        return None
    for option in options:
        if option.lower() == key:
            return option
    for old, listed in LEGACY_OPTION_ALIASES.items():
        if listed in options and old.lower() == key:
            return listed
    return None


def normalise_option(question: str, value: str) -> str | None:
    """The listed string a stored answer to ``question`` is; None if it is off the list (SPEC 2.4)."""
    return stored_option(value, question_options(question))


# ---------------------------------------------------------------------------
# Participant profile options (SPEC 2.5)
# ---------------------------------------------------------------------------

AGE_BANDS: Final[tuple[str, ...]] = (
    "18-24",
    "25-34",
    "35-44",
    "45-54",
    "55-64",
    "65+",
    "Prefer not to say",
)
TRAIT_OPTIONS: Final[tuple[str, ...]] = (
    "Introverted",
    "Extroverted",
    "Analytical",
    "Emotional",
    "Practical",
    "Anxious",
    "Optimistic",
    "Reserved",
    "Direct",
    "Sensitive",
)
GOAL_OPTIONS: Final[tuple[str, ...]] = (
    "Feel heard",
    "Understand my feelings",
    "Get practical advice",
    "Make a decision",
    "Calm down",
    "Explore a new perspective",
)
TOPIC_ATTITUDE_OPTIONS: Final[tuple[str, ...]] = (
    "I find it easy to talk about",
    "I have mixed feelings about it",
    "I find it hard to talk about",
)
DIAGNOSIS_NONE: Final = "None"
DIAGNOSIS_PREFER_NOT_TO_SAY: Final = "Prefer not to say"
DIAGNOSIS_OPTIONS: Final[tuple[str, ...]] = (
    "Anxiety",
    "Depression",
    "Bipolar disorder",
    "PTSD",
    "ADHD",
    "Eating disorder",
    "Other",
    DIAGNOSIS_NONE,
    DIAGNOSIS_PREFER_NOT_TO_SAY,
)
# The participant groups compared in the analyses (SPEC 6).
DIAGNOSED_GROUP_DIAGNOSES: Final[frozenset[str]] = frozenset({"anxiety", "depression"})


def participant_group(diagnoses: list[str] | None) -> str | None:
    """'anxiety_depression', 'none' or None (unknown / other / not said)."""
    if not diagnoses:
        return None
    lowered = {d.strip().lower() for d in diagnoses}
    if lowered & DIAGNOSED_GROUP_DIAGNOSES:
        return "anxiety_depression"
    if lowered == {DIAGNOSIS_NONE.lower()}:
        return "none"
    return None


# ---------------------------------------------------------------------------
# Topics (SPEC 2.5): 50 subtopics in 10 categories
# ---------------------------------------------------------------------------

TOPICS: Final[dict[str, tuple[str, ...]]] = {
    "Romantic relationships": (
        "A recent break-up",
        "Trust and jealousy",
        "Dating and meeting someone",
        "Arguments with a partner",
        "Long-distance relationship",
    ),
    "Family": (
        "Conflict with parents",
        "Sibling relationships",
        "Becoming a parent",
        "Caring for an ill relative",
        "Family expectations",
    ),
    "Friendship": (
        "Drifting apart from a friend",
        "Feeling left out",
        "A friend in trouble",
        "Making new friends",
        "A betrayal by a friend",
    ),
    "Work": (
        "Stress and burnout",
        "A difficult manager",
        "Losing a job",
        "Career change",
        "Conflict with a colleague",
    ),
    "Study": (
        "Exam pressure",
        "Choosing what to study",
        "Falling behind",
        "Feedback that hurt",
        "Balancing study and work",
    ),
    "Money": (
        "Debt worries",
        "Unexpected expenses",
        "Saving for the future",
        "Money and a partner",
        "Affording the basics",
    ),
    "Health": (
        "A new diagnosis",
        "Sleep problems",
        "Living with chronic pain",
        "Waiting for test results",
        "Body image",
    ),
    "Grief": (
        "Losing a parent",
        "Losing a pet",
        "Anniversary of a loss",
        "Grieving a friendship",
        "Supporting someone who is grieving",
    ),
    "Identity": (
        "Finding my place",
        "Cultural belonging",
        "Coming out",
        "Feeling like an impostor",
        "Changing values",
    ),
    "Hobbies": (
        "Losing motivation for a hobby",
        "Performance nerves",
        "Creative block",
        "Competing and losing",
        "Starting something new",
    ),
}
TOPIC_CATEGORIES: Final[tuple[str, ...]] = tuple(TOPICS)
ALL_TOPICS: Final[tuple[tuple[str, str], ...]] = tuple(
    (category, subtopic) for category, subtopics in TOPICS.items() for subtopic in subtopics
)

# ---------------------------------------------------------------------------
# Replay modes and PANAS strategies (SPEC 4)
# ---------------------------------------------------------------------------

MODES: Final[tuple[str, ...]] = ("default", "verbose", "omniscient", "verbose_omniscient")
PANAS_STRATEGIES: Final[tuple[str, ...]] = ("absolute", "delta", "blind_delta")
JUDGE_DIMENSIONS: Final[tuple[str, ...]] = (
    "overall_score",
    "emotional_appropriateness",
    "helpfulness",
    "tone_match",
)

RESEARCH_ONLY_STATEMENT: Final = (
    "AttuneBench is a research and diagnostic instrument. Its scores describe how closely a "
    "model's predictions matched participants' own annotations in this dataset; they are not a "
    "certificate that any model is safe or suitable for clinical, therapeutic or crisis use."
)

# ---------------------------------------------------------------------------
# Completeness of collected data (SPEC 3.1 "completeness")
# ---------------------------------------------------------------------------

#: A turn: every annotation step answered / reply stored but annotation not finished / message without a reply.
TURN_COMPLETE: Final = "complete"
TURN_ANNOTATION_UNFINISHED: Final = "annotation_unfinished"
TURN_NO_REPLY: Final = "no_reply"
TURN_COMPLETENESS: Final[tuple[str, ...]] = (TURN_COMPLETE, TURN_ANNOTATION_UNFINISHED, TURN_NO_REPLY)

#: A conversation: finished by the participant with every turn complete / started but not finished /
#: no turn with a reply at all.
CONVERSATION_COMPLETE: Final = "complete"
CONVERSATION_UNFINISHED: Final = "unfinished"
CONVERSATION_EMPTY: Final = "empty"
CONVERSATION_COMPLETENESS: Final[tuple[str, ...]] = (CONVERSATION_COMPLETE, CONVERSATION_UNFINISHED, CONVERSATION_EMPTY)

# ---------------------------------------------------------------------------
# Model, provider and product names a reply must never show a participant (SPEC 1: the OM is anonymised)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IdentityName:
    """One name to screen replies for.

    ``pattern`` is a regular expression (matched case-insensitively, between
    word boundaries) written with ``~`` where a space, hyphen, dot or underscore
    may sit, or nothing at all: ``open~ai`` matches OpenAI, Open AI, open-ai.
    An ``ambiguous`` name is also an ordinary word or a person's name (Claude,
    Gemini the star sign, a llama, the mistral wind): it counts as a leak only
    with a version after it ("Gemini 1.5", "Llama-3") or beside words that make
    it a self-description ("I'm Claude", "made by Google", "Mistral, an AI model").
    """

    label: str
    kind: str  # "model", "provider" or "product"
    pattern: str
    ambiguous: bool = False


# Maintained list: add a name when a new model family, provider or chat product appears.
IDENTITY_NAMES: Final[tuple[IdentityName, ...]] = (
    IdentityName("ChatGPT", "product", r"chat~gpt"),
    IdentityName("GPT", "model", r"gpt"),
    IdentityName("OpenAI", "provider", r"open~ai"),
    IdentityName("Anthropic", "provider", r"anthropic"),
    IdentityName("Claude", "model", r"claude", ambiguous=True),
    IdentityName("Google DeepMind", "provider", r"(?:google~)?deep[-_]?mind"),
    IdentityName("Gemini", "model", r"gemini", ambiguous=True),
    IdentityName("Gemma", "model", r"gemma", ambiguous=True),
    IdentityName("Bard", "product", r"bard", ambiguous=True),
    IdentityName("Google", "provider", r"google", ambiguous=True),
    IdentityName("Meta AI", "provider", r"meta~ai"),
    IdentityName("Meta", "provider", r"meta", ambiguous=True),
    IdentityName("Llama", "model", r"llama", ambiguous=True),
    IdentityName("Mistral AI", "provider", r"mistral~ai"),
    IdentityName("Mistral", "model", r"mistral", ambiguous=True),
    IdentityName("Mixtral", "model", r"mixtral"),
    IdentityName("Qwen", "model", r"qwen"),
    IdentityName("Alibaba", "provider", r"alibaba", ambiguous=True),
    IdentityName("DeepSeek", "model", r"deep~seek"),
    IdentityName("Grok", "model", r"grok", ambiguous=True),
    IdentityName("xAI", "provider", r"xai"),
    IdentityName("Copilot", "product", r"co~pilot", ambiguous=True),
    IdentityName("Microsoft", "provider", r"microsoft", ambiguous=True),
    IdentityName("Phi", "model", r"phi", ambiguous=True),
    IdentityName("Cohere", "provider", r"cohere", ambiguous=True),
    IdentityName("Command R", "model", r"command~r\+?", ambiguous=True),
    IdentityName("Perplexity", "product", r"perplexity", ambiguous=True),
    IdentityName("Falcon", "model", r"falcon", ambiguous=True),
    IdentityName("Nemotron", "model", r"nemotron"),
    IdentityName("NVIDIA", "provider", r"nvidia", ambiguous=True),
    IdentityName("Hugging Face", "provider", r"hugging~face", ambiguous=True),
    IdentityName("Character.AI", "product", r"character~ai"),
    IdentityName("Inflection AI", "provider", r"inflection~ai"),
    IdentityName("Kimi", "model", r"kimi", ambiguous=True),
    IdentityName("Moonshot AI", "provider", r"moonshot~ai"),
    IdentityName("Baidu", "provider", r"baidu", ambiguous=True),
    IdentityName("ERNIE Bot", "product", r"ernie~bot"),
    IdentityName("ChatGLM", "model", r"chat~glm"),
    IdentityName("Zhipu", "provider", r"zhipu"),
    IdentityName("Yi", "model", r"yi", ambiguous=True),
    IdentityName("01.AI", "provider", r"01~ai"),
    IdentityName("Amazon Nova", "model", r"amazon~nova"),
    IdentityName("Titan", "model", r"titan", ambiguous=True),
    IdentityName("Amazon", "provider", r"amazon", ambiguous=True),
    IdentityName("Apple Intelligence", "product", r"apple~intelligence"),
    IdentityName("Siri", "product", r"siri", ambiguous=True),
    IdentityName("Alexa", "product", r"alexa", ambiguous=True),
    IdentityName("Replika", "product", r"replika"),
    IdentityName("Vicuna", "model", r"vicuna", ambiguous=True),
    IdentityName("Bing", "product", r"bing~chat"),
)

#: What a masked name is replaced with (a reply shown to a participant never carries a real name).
IDENTITY_MASK: Final = "[name withheld]"
