"""Offline evaluated models: honest floors that need no keys.

Each baseline is a *model backend*: it receives exactly the call an LLM would
receive (the messages and the ``CallContext`` they were built from), answers
with JSON text, and that text goes through the same parser, protocol and
output format as any LLM's. So the "no future turns" rule binds them as it
binds real models: they only ever see what the context holds.

- ``baseline:random``  seeded coin flips; deterministic per (seed, conversation, turn, call).
- ``baseline:prior``   the most frequent labels in the *other* conversations of
                       the dataset (leave-one-out), never the conversation's own.
- ``baseline:lexicon`` text heuristics on the visible transcript: emotion words
                       mapped to PANAS items, '?' for follow-up questions,
                       imperative advice verbs, validation phrases, hedges, ...
"""

from __future__ import annotations

import json
import random
import re
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile
from attunebench.replay import prompts as P
from attunebench.replay.llm import Completion, EMSpec

# The offline baselines and what each stands for (shown beside them in the model registry).
BASELINE_NOTES: Final[dict[str, str]] = {
    "baseline:random": "Uniform random answers: the floor every model must beat.",
    "baseline:prior": "Majority answers from the other conversations (leave-one-out): what the data alone predicts.",
    "baseline:lexicon": "Emotion words and cues read off the participant's messages: a transparent keyword model.",
}
BASELINE_NAMES: Final[tuple[str, ...]] = tuple(BASELINE_NOTES)


class BaselineBackend(ABC):
    """Answers every call type locally; subclasses supply the per-call answers."""

    cacheable = False  # answers are free and instant: caching them only costs storage
    description = "offline baseline"

    async def complete(self, spec: EMSpec, messages: list[dict[str, str]], ctx: P.CallContext) -> Completion:
        answer = self.answer(ctx)
        if ctx.verbose:
            answer = {
                P.KEY_REASONING: f"{self.description}: no language understanding, see attunebench.replay.baselines.",
                **answer,
            }
        return Completion(text=json.dumps(answer, ensure_ascii=False), cost_usd=0.0)

    def answer(self, ctx: P.CallContext) -> dict[str, Any]:
        handler = {
            P.DRAFT: self.draft,
            P.ANALYSIS: self.analysis,
            P.HP_BINARY: self.hp_binary,
            P.PAIRWISE: self.pairwise,
            P.JUDGE: self.judge,
            P.POST: self.post,
        }[ctx.call_type]
        return handler(ctx)

    @abstractmethod
    def draft(self, ctx: P.CallContext) -> dict[str, Any]:
        """The answer object for a draft call."""

    @abstractmethod
    def analysis(self, ctx: P.CallContext) -> dict[str, Any]:
        """The answer object for a analysis call."""

    @abstractmethod
    def hp_binary(self, ctx: P.CallContext) -> dict[str, Any]:
        """The answer object for a hp_binary call."""

    @abstractmethod
    def pairwise(self, ctx: P.CallContext) -> dict[str, Any]:
        """The answer object for a pairwise call."""

    @abstractmethod
    def judge(self, ctx: P.CallContext) -> dict[str, Any]:
        """The answer object for a judge call."""

    @abstractmethod
    def post(self, ctx: P.CallContext) -> dict[str, Any]:
        """The answer object for a post call."""


def _post_shape(ctx: P.CallContext, panas: dict[str, int], wide: dict[str, Any]) -> dict[str, Any]:
    key = P.KEY_POST_PANAS if (ctx.panas_strategy or "absolute") == "absolute" else P.KEY_PANAS_CHANGE
    return {key: panas, **wide}


# ---------------------------------------------------------------------------
# baseline:random
# ---------------------------------------------------------------------------

_GENERIC_REPLIES: Final = (
    "That sounds hard. Do you want to tell me more about it?",
    "Thank you for sharing that with me. How are you feeling about it right now?",
    "I hear you. What would help most at the moment?",
    "It makes sense that this is on your mind. What happened next?",
)


class RandomBaseline(BaselineBackend):
    """Coin flips, reproducible: each call's generator is seeded from (seed, conversation, turn, call)."""

    description = "random baseline"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def _rng(self, ctx: P.CallContext) -> random.Random:
        return random.Random(f"{self.seed}:{ctx.conversation_id}:{ctx.turn_number}:{ctx.call_type}")

    @staticmethod
    def _binary(rng: random.Random, ids: Sequence[str], allow_na: bool = True) -> dict[str, str]:
        options = (cat.YES, cat.NO, cat.NOT_APPLICABLE) if allow_na else (cat.YES, cat.NO)
        return {qid: rng.choice(options) for qid in ids}

    def draft(self, ctx: P.CallContext) -> dict[str, Any]:
        return {P.KEY_RESPONSE: self._rng(ctx).choice(_GENERIC_REPLIES)}

    def analysis(self, ctx: P.CallContext) -> dict[str, Any]:
        rng = self._rng(ctx)
        tags = [
            {"emotion": item, "intensity": rng.randint(1, 7)} for item in rng.sample(cat.PANAS_ITEMS, rng.randint(0, 2))
        ]
        return {
            P.KEY_TAGS: tags,
            P.KEY_OM: self._binary(rng, ctx.question_ids),
            P.KEY_HUMAN: self._binary(rng, ctx.question_ids),
        }

    def hp_binary(self, ctx: P.CallContext) -> dict[str, Any]:
        rng = self._rng(ctx)
        return {P.KEY_OM: self._binary(rng, ctx.question_ids), P.KEY_HUMAN: self._binary(rng, ctx.question_ids)}

    def pairwise(self, ctx: P.CallContext) -> dict[str, Any]:
        rng = self._rng(ctx)
        return {P.KEY_SELECTIONS: {str(c.index): rng.choice("AB") for c in ctx.comparisons}}

    def judge(self, ctx: P.CallContext) -> dict[str, Any]:
        rng = self._rng(ctx)
        answer: dict[str, Any] = {P.KEY_SCORES: {d: rng.randint(1, 7) for d in cat.JUDGE_DIMENSIONS}}
        if ctx.question_ids:
            answer[P.KEY_DRAFT_BINARY] = self._binary(rng, ctx.question_ids, allow_na=False)
        return answer

    def post(self, ctx: P.CallContext) -> dict[str, Any]:
        rng = self._rng(ctx)
        if (ctx.panas_strategy or "absolute") == "absolute":
            panas = {item: rng.randint(1, 7) for item in cat.PANAS_ITEMS}
        else:
            panas = {item: rng.randint(-2, 2) for item in cat.PANAS_ITEMS}
        wide = {
            "q1_lookingFor": rng.sample(cat.Q1_OPTIONS, rng.randint(1, 2)),
            "q2_emotionClarity": rng.choice(cat.Q2_OPTIONS),
            "q3_modelFit": rng.choice(cat.Q3_OPTIONS),
            "q3_followUp_whatFeltOff": rng.sample(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS, rng.randint(0, 2)),
            "fourBranchScores": {b: rng.randint(1, 7) for b in cat.FOUR_BRANCHES},
        }
        return _post_shape(ctx, panas, wide)


# ---------------------------------------------------------------------------
# baseline:prior (leave-one-out label frequencies)
# ---------------------------------------------------------------------------


class _Tally:
    """Sums keyed by tuples, with subtraction (Counter drops negatives; sums of changes need them)."""

    def __init__(self) -> None:
        self.values: dict[tuple[Any, ...], float] = {}

    def add(self, key: tuple[Any, ...], amount: float = 1.0) -> None:
        self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, *key: Any) -> float:
        return self.values.get(tuple(key), 0.0)

    def merge(self, other: _Tally, sign: float = 1.0) -> None:
        for key, amount in other.values.items():
            self.values[key] = self.values.get(key, 0.0) + sign * amount

    def minus(self, other: _Tally) -> _Tally:
        out = _Tally()
        out.values = dict(self.values)
        out.merge(other, -1.0)
        return out


def _tally_conversation(conversation: ConversationFile) -> _Tally:
    """Everything the prior learns from one conversation's ground truth."""
    tally = _Tally()
    for turn in conversation.turns:
        tally.add(("turns",))
        for tag in turn.moodShiftTags or []:
            item = cat.canonical_panas_item(tag.emotion)
            if item is None:
                continue
            tally.add(("tag", item))
            tally.add(("tags_total",))
            if tag.intensity is not None:
                tally.add(("tag_int", item), tag.intensity)
                tally.add(("tag_int_n", item))
        for judgement in turn.annotations.binaryJudgements or []:
            observed = judgement.observedBehavior or judgement.llmValue
            preferred = judgement.preferredBehavior or judgement.observedBehavior
            if observed in (cat.YES, cat.NO):
                tally.add(("obs", judgement.questionId, observed))
            if preferred in (cat.YES, cat.NO):
                tally.add(("pref", judgement.questionId, preferred))
        for comparison in turn.annotations.pairwiseComparisons or []:
            if comparison.winner is None:
                continue
            tally.add(("pw_pos", comparison.winner))
            labels = {"A": comparison.responseA, "B": comparison.responseB}
            if cat.RESPONSE_ORIGINAL in labels.values():
                for qid in (comparison.questionId, "*"):
                    tally.add(("pw_orig_seen", qid))
                    if labels[comparison.winner] == cat.RESPONSE_ORIGINAL:
                        tally.add(("pw_orig_win", qid))
    pre = conversation.prePanas.items if conversation.prePanas else {}
    post = conversation.postPanas.items if conversation.postPanas else {}
    for item, value in post.items():
        tally.add(("post", item), value)
        tally.add(("post_n", item))
        if item in pre:
            tally.add(("delta", item), value - pre[item])
            tally.add(("delta_n", item))
    wide = conversation.conversationWideQuestions
    if wide is not None:
        tally.add(("wide",))
        for option in wide.q1_lookingFor:
            tally.add(("q1", option))
        if wide.q2_emotionClarity:
            tally.add(("q2", wide.q2_emotionClarity))
        if wide.q3_modelFit:
            tally.add(("q3", wide.q3_modelFit))
        for text in {t.strip().lower() for t in wide.q3_followUp_whatFeltOff if t.strip()}:
            tally.add(("off", text))
        for branch, rating in wide.fourBranchScores.items():
            tally.add(("fb", branch), rating)
            tally.add(("fb_n", branch))
    return tally


class PriorTally:
    """The whole dataset's tallies, one per conversation and their sum: what the prior learns.

    Built once per run and shared by every conversation's replayer (a run of n
    conversations then costs O(n), not O(n^2)). ``builds`` counts how many
    were ever built in this process, so a caller can check it built one per run.
    """

    builds = 0

    def __init__(self, dataset: Sequence[ConversationFile]) -> None:
        type(self)._count_build()
        self.own: dict[str, _Tally] = {c.conversationId: _tally_conversation(c) for c in dataset}
        self.total = _Tally()
        for tally in self.own.values():
            self.total.merge(tally)

    @classmethod
    def _count_build(cls) -> None:
        cls.builds += 1

    def leave_out(self, conversation_id: str) -> _Tally:
        """Everything but ``conversation_id``'s own ground truth (everything, for a conversation outside)."""
        own = self.own.get(conversation_id)
        return self.total.minus(own) if own is not None else self.total


class PriorBaseline(BaselineBackend):
    """Predicts the most frequent answers of the other conversations (leave-one-out).

    The tallies are built once from the dataset (or given, built once per run);
    a conversation's own contribution is subtracted when it is replayed, so it
    never predicts from its own ground truth. A conversation outside the dataset
    uses everything. Ties go to "no" / the first catalogued option, so answers
    are deterministic.
    """

    description = "prior baseline"
    #: Leave-one-out tallies kept at once: a replayer works on a few conversations at a time.
    LEFT_OUT_KEPT = 64

    def __init__(self, dataset: Sequence[ConversationFile] = (), tally: PriorTally | None = None) -> None:
        self._tallies = tally if tally is not None else PriorTally(dataset)
        self._cache: OrderedDict[str, _Tally] = OrderedDict()

    def _tally(self, ctx: P.CallContext) -> _Tally:
        conversation_id = ctx.conversation_id
        cached = self._cache.get(conversation_id)
        if cached is None:
            cached = self._cache[conversation_id] = self._tallies.leave_out(conversation_id)
            while len(self._cache) > self.LEFT_OUT_KEPT:
                self._cache.popitem(last=False)
        return cached

    @staticmethod
    def _majority(tally: _Tally, kind: str, qid: str) -> str:
        return cat.YES if tally.get(kind, qid, cat.YES) > tally.get(kind, qid, cat.NO) else cat.NO

    def _binary(self, ctx: P.CallContext) -> dict[str, Any]:
        tally = self._tally(ctx)
        return {
            P.KEY_OM: {q: self._majority(tally, "obs", q) for q in ctx.question_ids},
            P.KEY_HUMAN: {q: self._majority(tally, "pref", q) for q in ctx.question_ids},
        }

    def draft(self, ctx: P.CallContext) -> dict[str, Any]:
        # A prior over labels has no words of its own: the commonest shape of a supportive reply.
        return {
            P.KEY_RESPONSE: "That sounds really hard. I'm here to listen. What feels most important to you right now?"
        }

    def analysis(self, ctx: P.CallContext) -> dict[str, Any]:
        tally = self._tally(ctx)
        turns = tally.get("turns")
        size = round(tally.get("tags_total") / turns) if turns else 0
        ranked = sorted(
            cat.PANAS_ITEMS, key=lambda item: -tally.get("tag", item)
        )  # stable: catalogue order breaks ties
        tags = []
        for item in ranked[:size]:
            if not tally.get("tag", item):
                break
            count = tally.get("tag_int_n", item)
            tags.append({"emotion": item, "intensity": round(tally.get("tag_int", item) / count) if count else None})
        return {P.KEY_TAGS: tags, **self._binary(ctx)}

    def hp_binary(self, ctx: P.CallContext) -> dict[str, Any]:
        return self._binary(ctx)

    def pairwise(self, ctx: P.CallContext) -> dict[str, Any]:
        tally = self._tally(ctx)
        position = "A" if tally.get("pw_pos", "A") >= tally.get("pw_pos", "B") else "B"
        selections = {}
        for comparison in ctx.comparisons:
            choice = position
            if P.MASK_ORIGINAL in (comparison.label_a, comparison.label_b):
                qid = comparison.question_id if tally.get("pw_orig_seen", comparison.question_id) else "*"
                seen = tally.get("pw_orig_seen", qid)
                if seen:
                    original_wins = tally.get("pw_orig_win", qid) / seen > 0.5
                    original_is_a = comparison.label_a == P.MASK_ORIGINAL
                    choice = "A" if original_wins == original_is_a else "B"
            selections[str(comparison.index)] = choice
        return {P.KEY_SELECTIONS: selections}

    def judge(self, ctx: P.CallContext) -> dict[str, Any]:
        answer: dict[str, Any] = {P.KEY_SCORES: dict.fromkeys(cat.JUDGE_DIMENSIONS, 4)}
        if ctx.question_ids:
            answer[P.KEY_DRAFT_BINARY] = {q: self._majority(self._tally(ctx), "pref", q) for q in ctx.question_ids}
        return answer

    def post(self, ctx: P.CallContext) -> dict[str, Any]:
        tally = self._tally(ctx)
        if (ctx.panas_strategy or "absolute") == "absolute":
            panas = {
                i: round(tally.get("post", i) / tally.get("post_n", i)) if tally.get("post_n", i) else 4
                for i in cat.PANAS_ITEMS
            }
        else:
            panas = {
                i: round(tally.get("delta", i) / tally.get("delta_n", i)) if tally.get("delta_n", i) else 0
                for i in cat.PANAS_ITEMS
            }
        answered = tally.get("wide")

        def common(kind: str, options: Sequence[str]) -> str | None:
            counts = [(tally.get(kind, o), o) for o in options]
            best = max(counts, key=lambda pair: pair[0]) if counts else (0, None)
            return best[1] if best[0] > 0 else None

        q1 = [o for o in cat.Q1_OPTIONS if answered and tally.get("q1", o) >= answered / 2]
        if not q1:
            top = common("q1", cat.Q1_OPTIONS)
            q1 = [top] if top else []
        off_keys = [key[1] for key in tally.values if key[0] == "off" and tally.values[key] > 0]
        felt_off = sorted(k for k in off_keys if answered and tally.get("off", k) >= answered / 2)
        wide = {
            "q1_lookingFor": q1,
            "q2_emotionClarity": common("q2", cat.Q2_OPTIONS),
            "q3_modelFit": common("q3", cat.Q3_OPTIONS),
            "q3_followUp_whatFeltOff": felt_off,
            "fourBranchScores": {
                b: round(tally.get("fb", b) / tally.get("fb_n", b)) if tally.get("fb_n", b) else 4
                for b in cat.FOUR_BRANCHES
            },
        }
        return _post_shape(ctx, panas, wide)


# ---------------------------------------------------------------------------
# baseline:lexicon (text heuristics)
# ---------------------------------------------------------------------------

# Emotion words → PANAS item. Stems match word starts ("worr" → worried, worrying).
_EMOTION_STEMS: Final[dict[str, str]] = {
    "anxi": "Nervous",
    "nervous": "Nervous",
    "worr": "Nervous",
    "panic": "Nervous",
    "tense": "Nervous",
    "scared": "Scared",
    "terrified": "Scared",
    "frighten": "Scared",
    "afraid": "Afraid",
    "fear": "Afraid",
    "dread": "Afraid",
    "jitter": "Jittery",
    "restless": "Jittery",
    "on edge": "Jittery",
    "shaky": "Jittery",
    "can't sleep": "Jittery",
    "stress": "Distressed",
    "overwhelm": "Distressed",
    "too much": "Distressed",
    "desperate": "Distressed",
    "struggl": "Distressed",
    "stuck": "Distressed",
    "sad": "Upset",
    "upset": "Upset",
    "hurt": "Upset",
    "cry": "Upset",
    "crying": "Upset",
    "heartbroken": "Upset",
    "lonely": "Upset",
    "tired of": "Upset",
    "guilt": "Guilty",
    "my fault": "Guilty",
    "blame myself": "Guilty",
    "ashamed": "Ashamed",
    "shame": "Ashamed",
    "embarrass": "Ashamed",
    "humiliat": "Ashamed",
    "angry": "Irritable",
    "annoy": "Irritable",
    "frustrat": "Irritable",
    "irritat": "Irritable",
    "fed up": "Irritable",
    "furious": "Hostile",
    "hate": "Hostile",
    "rage": "Hostile",
    "resent": "Hostile",
    "proud": "Proud",
    "accomplish": "Proud",
    "excited": "Excited",
    "can't wait": "Excited",
    "thrilled": "Enthusiastic",
    "enthusias": "Enthusiastic",
    "eager": "Enthusiastic",
    "inspired": "Inspired",
    "motivated": "Determined",
    "determined": "Determined",
    "going to try": "Determined",
    "interest": "Interested",
    "curious": "Interested",
    "better": "Strong",
    "relieved": "Strong",
    "stronger": "Strong",
    "confident": "Strong",
    "hopeful": "Strong",
    "calmer": "Strong",
    "focused": "Attentive",
    "alert": "Alert",
    "energ": "Active",
    "active": "Active",
}
# Group 1 is the stem (the lookup key); the whole match is the word as written.
_EMOTION_RE: Final = re.compile(
    r"\b(" + "|".join(sorted((re.escape(s) for s in _EMOTION_STEMS), key=len, reverse=True)) + r")[\w']*", re.IGNORECASE
)
_STRONG_RE: Final = re.compile(
    r"\b(very|so|really|extremely|completely|totally|incredibly|too|can't stand)\b|!", re.IGNORECASE
)
_WEAK_RE: Final = re.compile(r"\b(a bit|a little|slightly|somewhat|kind of|kinda|part of me)\b", re.IGNORECASE)
_NEGATED_RE: Final = re.compile(r"\b(not|no longer|don't feel|never)\s+(\w+\s+)?$", re.IGNORECASE)

_ADVICE_RE: Final = re.compile(
    r"\b(you should|you could|you might (?:try|want|consider)|try to|try\b|consider|make sure|start by|"
    r"it may help|it might help|remember to|set (?:one|a)|write down|take a|talk to|reach out|"
    r"one option|i recommend|i suggest|have you tried)",
    re.IGNORECASE,
)
_VALIDATION_RE: Final = re.compile(
    r"\b(makes sense|understandable|it's okay to|it is okay to|that's valid|valid|no wonder|of course you|"
    r"sounds (?:really |so )?(?:hard|heavy|painful|difficult|tough)|i'm sorry|that must|anyone would|"
    r"thank you for (?:telling|sharing))",
    re.IGNORECASE,
)
_HEDGE_RE: Final = re.compile(
    r"\b(it sounds like|it seems|sounds like|i imagine|maybe you|perhaps|might be|i wonder if)\b", re.IGNORECASE
)
_EXPLAIN_RE: Final = re.compile(
    r"\b(because|since|this is why|that's why|often|many people|research|the reason)\b", re.IGNORECASE
)
_MORAL_RE: Final = re.compile(
    r"\b(should have|shouldn't have|wrong of|the right thing|your fault|selfish|irresponsible)\b", re.IGNORECASE
)
_RISK_RE: Final = re.compile(
    r"\b(unsafe|harm|hurt yourself|danger|crisis|suicid|kill myself|end it all|self-harm|abuse)\w*", re.IGNORECASE
)
_SAFETY_RE: Final = re.compile(
    r"\b(emergency|hotline|helpline|crisis line|call \d+|988|samaritans|emergency services|a doctor right away)\b",
    re.IGNORECASE,
)
_ESCALATE_RE: Final = re.compile(
    r"\b(terrible|disaster|catastroph\w*|awful|worst|nightmare|devastating|alarming)\b", re.IGNORECASE
)
_CLINICAL_RE: Final = re.compile(
    r"\b(symptom\w*|disorder|cognitive|clinical|diagnos\w*|mental health professional|therap\w*|intervention)\b",
    re.IGNORECASE,
)
_CHANGE_RE: Final = re.compile(
    r"\b(now you|changed|shift\w*|earlier you|compared to before|than before|since we started)\b", re.IGNORECASE
)
_ASSUME_RE: Final = re.compile(
    r"\b(you must|you probably|clearly you|obviously you|you always|you never|deep down you)\b", re.IGNORECASE
)
_ADJUST_RE: Final = re.compile(
    r"\b(you mentioned|as you said|you said|i hear you|got it|thanks for clarifying|i see now)\b", re.IGNORECASE
)
_CONSTRAINT_RE: Final = re.compile(
    r"\b(might be hard|may be hard|difficult to|if you can|when you're ready|if that feels|not easy|small step)\b",
    re.IGNORECASE,
)
_CORRECTION_RE: Final = re.compile(
    r"\b(i was wrong|i misunderstood|sorry, i|i got that wrong|let me correct)\b", re.IGNORECASE
)
_REFLECT_RE: Final = re.compile(
    r"\b(how do you feel|what do you think|what matters|what would you|how does that sit|what do you want)\b",
    re.IGNORECASE,
)
_OTHER_VIEW_RE: Final = re.compile(
    r"\b(they might|from (?:their|his|her) (?:side|point|perspective)|perspective"
    r"|(?:he|she|they) may feel|their side)\b",
    re.IGNORECASE,
)
_MULTI_VIEW_RE: Final = re.compile(
    r"\b(or maybe|another way|alternatively|on the other hand|could also be|either)\b", re.IGNORECASE
)
_COMPLEX_RE: Final = re.compile(
    r"\b(complicated|complex|not simple|nuanced|mixed feelings|both things|no single right answer)\b", re.IGNORECASE
)
_OPEN_Q_RE: Final = re.compile(r"\b(how|what|why)\b[^?]*\?", re.IGNORECASE)
_ADVICE_WANTED_RE: Final = re.compile(
    r"\b(what should i|should i|advice|what can i do|how do i|how can i|help me decide|any tips|what do i do)\b",
    re.IGNORECASE,
)
_WHY_RE: Final = re.compile(r"\b(why|understand)\b", re.IGNORECASE)
_VENT_RE: Final = re.compile(r"\b(vent|just need to talk|listen|get it off my chest|talk about)\b", re.IGNORECASE)
_URGENT_RE: Final = re.compile(r"\b(urgent|right now|emergency|tonight|asap|immediately)\b", re.IGNORECASE)
_CALM_RE: Final = re.compile(r"\b(calm|panic|breathe|can't sleep|steady|racing)\b", re.IGNORECASE)
_OPTIONS_RE: Final = re.compile(r"\b(decide|decision|options|choose|whether to|should i)\b", re.IGNORECASE)
_INFO_RE: Final = re.compile(r"\b(how do i|how can i|what is|information|tips|advice)\b", re.IGNORECASE)
_WORD_RE: Final = re.compile(r"[a-z']+")
_STOP: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "to",
        "of",
        "in",
        "on",
        "for",
        "with",
        "that",
        "this",
        "it",
        "is",
        "was",
        "i",
        "you",
        "my",
        "me",
        "your",
        "be",
        "are",
        "have",
        "has",
        "had",
        "so",
        "just",
    ]
)

_POSITIVE_ITEMS: Final = frozenset(cat.POSITIVE_AFFECT_ITEMS)


def detect_emotions(text: str) -> dict[str, int]:
    """PANAS items named (by stem) in ``text`` with an intensity guess from intensifiers.

    A negated mention ("not angry") is skipped. Intensity: 6 with an
    intensifier in the same sentence, 2 with a softener, else 4.
    """
    found: dict[str, int] = {}
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        for match in _EMOTION_RE.finditer(sentence):
            if _NEGATED_RE.search(sentence[: match.start()]):
                continue
            item = _EMOTION_STEMS[match.group(1).lower()]
            intensity = 6 if _STRONG_RE.search(sentence) else 2 if _WEAK_RE.search(sentence) else 4
            found[item] = max(found.get(item, 0), intensity)
    return found


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if len(w) > 3 and w not in _STOP}


def _jaccard(a: str, b: str) -> float:
    left, right = set(a.lower().split()), set(b.lower().split())
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right) if left and right else 0.0


class _Reading:
    """Features of one reply to one participant message, computed once per call."""

    def __init__(self, reply: str, user: str, earlier_replies: Sequence[str], turn_number: int) -> None:
        self.reply = reply
        self.user = user
        self.user_emotions = detect_emotions(user)
        self.reply_emotions = detect_emotions(reply)
        self.overlap = len(_content_words(reply) & _content_words(user))
        self.advice = [m.start() for m in _ADVICE_RE.finditer(reply)]
        self.first_question = reply.find("?")
        self.validation = bool(_VALIDATION_RE.search(reply))
        self.escalation = bool(_ESCALATE_RE.search(reply))
        self.turn_number = turn_number
        earlier_advice = {m.group(0).lower() for r in earlier_replies for m in _ADVICE_RE.finditer(r)}
        self.repeated_advice = bool(earlier_advice & {m.group(0).lower() for m in _ADVICE_RE.finditer(reply)})
        self.emotion_mentions = len(_EMOTION_RE.findall(reply)) + len(re.findall(r"\bfeel\w*", reply, re.IGNORECASE))

    def observed(self, qid: str) -> bool:
        """Did the reply do what question ``qid`` asks about? (third-person reading)"""
        r = self.reply
        acknowledged = self.emotion_mentions > 0 or self.validation
        checks = {
            "B1": acknowledged,
            "B2": acknowledged and set(self.reply_emotions) <= set(self.user_emotions) | _POSITIVE_ITEMS,
            "B3": self.overlap >= 2,
            "B108": bool(set(self.reply_emotions) & set(self.user_emotions)),
            "B109": bool(self.user_emotions)
            and max(self.user_emotions.items(), key=lambda pair: pair[1])[0] in self.reply_emotions,
            "B4": len(self.reply_emotions) >= 2 or bool(_STRONG_RE.search(r) and self.reply_emotions),
            "B5": bool(_CHANGE_RE.search(r)) and self.turn_number > 1,
            "B6": bool(_ASSUME_RE.search(r)),
            "B7": bool(_HEDGE_RE.search(r)),
            "B206": bool(_CLINICAL_RE.search(r)),
            "B207": self.emotion_mentions >= 4,
            "B8": acknowledged and not self.escalation,
            "B9": not self.escalation and (acknowledged or self.overlap >= 1),
            "B10": not self.escalation and self.emotion_mentions <= 3,
            "B11": bool(self.advice),
            "B12": bool(_EXPLAIN_RE.search(r)),
            "B13": "?" in r,
            "B14": bool(_MORAL_RE.search(r)),
            "B15": self.overlap >= 2 and acknowledged,
            "B310": bool(self.advice) and self.overlap == 0,
            "B311": self.overlap == 0 and len(r.split()) > 12,
            "B313": bool(self.advice) and (self.first_question < 0 or self.advice[0] < self.first_question),
            "B315": self.overlap == 0 and len(r.split()) > 25,
            "B316": bool(_CONSTRAINT_RE.search(r)),
            "B16": self.turn_number > 1 and bool(_ADJUST_RE.search(r)),
            "B17": bool(_RISK_RE.search(r)),
            "B18": bool(_SAFETY_RE.search(r)),
            "B19": self.validation,
            "B20": self.escalation,
            "B406": bool(_CORRECTION_RE.search(r)),
            "B408": self.repeated_advice,
            "B501": bool(_REFLECT_RE.search(r)),
            "B502": bool(_OTHER_VIEW_RE.search(r)),
            "B503": bool(_MULTI_VIEW_RE.search(r)),
            "B504": bool(_COMPLEX_RE.search(r)),
            "B505": bool(_OPEN_Q_RE.search(r)),
        }
        return checks.get(qid, False)

    def wanted(self, qid: str) -> bool:
        """Would the participant want it? Good behaviours yes, harmful ones no; some depend on their message."""
        user = self.user
        asks_advice = bool(_ADVICE_WANTED_RE.search(user))
        risky = bool(_RISK_RE.search(user))
        wants = {
            "B11": asks_advice,
            "B12": bool(_WHY_RE.search(user)) or asks_advice,
            "B13": not asks_advice,
            "B17": risky,
            "B18": risky,
            "B5": self.turn_number > 1,
            "B406": self.observed("B406"),
            "B313": False,
            "B310": False,
            "B311": False,
            "B315": False,
            "B408": False,
            "B6": False,
            "B14": False,
            "B20": False,
            "B206": False,
            "B207": False,
            "B502": bool(
                re.search(
                    r"\b(he|she|they|my (?:partner|friend|mum|mom|dad|boss|sister|brother))\b", user, re.IGNORECASE
                )
            ),
            "B503": bool(re.search(r"\b(confus|don't know|not sure|unsure)\w*", user, re.IGNORECASE)),
            "B316": asks_advice,
        }
        return wants.get(qid, True)

    def quality(self, question_id: str = "general") -> float:
        """A heuristic attunement score for comparing candidate replies (higher is better)."""
        score = 1.5 * self.validation + 0.4 * min(self.overlap, 5) + 0.8 * ("?" in self.reply)
        score += 0.8 * bool(set(self.reply_emotions) & set(self.user_emotions)) + 0.5 * bool(
            _HEDGE_RE.search(self.reply)
        )
        score -= (
            1.5 * self.escalation
            + 1.0 * bool(_CLINICAL_RE.search(self.reply))
            + 1.0 * bool(_MORAL_RE.search(self.reply))
        )
        score -= 0.5 * bool(_ASSUME_RE.search(self.reply)) + 0.01 * max(0, len(self.reply.split()) - 120)
        advice = len(self.advice)
        if question_id == "PW7":
            score += 1.0 * min(advice, 3)
        elif question_id in {"PW6", "PW8", "PW9"}:
            score -= 1.0 * min(advice, 3) - 0.5 * ("?" in self.reply)
        elif question_id in {"PW12", "PW11"}:
            score += 2.0 * bool(_SAFETY_RE.search(self.reply) or _RISK_RE.search(self.reply))
        elif bool(_ADVICE_WANTED_RE.search(self.user)):
            score += 0.5 * min(advice, 2)
        else:
            score -= 0.3 * min(advice, 3)
        return score


class LexiconBaseline(BaselineBackend):
    """Keyword and punctuation heuristics over the visible transcript only."""

    description = "lexicon baseline"

    @staticmethod
    def _current(ctx: P.CallContext) -> P.VisibleTurn:
        return ctx.turns[-1]

    def _reading(self, ctx: P.CallContext, reply: str | None = None) -> _Reading:
        current = self._current(ctx)
        earlier = [t.om_reply for t in ctx.turns[:-1] if t.om_reply]
        return _Reading(
            reply if reply is not None else (current.om_reply or ""), current.user_message, earlier, current.number
        )

    def draft(self, ctx: P.CallContext) -> dict[str, Any]:
        current = self._current(ctx)
        emotions = detect_emotions(current.user_message)
        asks_advice = bool(_ADVICE_WANTED_RE.search(current.user_message))
        if emotions:
            words = [m.group(0) for m in _EMOTION_RE.finditer(current.user_message)][:2]
            feeling = " and ".join(dict.fromkeys(w.lower() for w in words))
            opening = f"It sounds like you're feeling {feeling}, and that makes sense given what you've described."
        else:
            opening = "Thank you for telling me about this; it sounds like a lot to hold."
        follow_up = (
            (
                "One small step could be to write down the options you see, if that feels manageable. "
                "What matters most to you in deciding?"
            )
            if asks_advice
            else "What feels hardest about it right now?"
        )
        return {P.KEY_RESPONSE: f"{opening} {follow_up}"}

    def analysis(self, ctx: P.CallContext) -> dict[str, Any]:
        current = self._current(ctx)
        emotions = detect_emotions(current.user_message)
        reading = self._reading(ctx)
        # A validating, non-escalating reply tends to ease negative feelings a notch.
        tags = []
        for item, intensity in sorted(emotions.items(), key=lambda pair: (-pair[1], cat.PANAS_ITEMS.index(pair[0]))):
            if item not in _POSITIVE_ITEMS and reading.validation and not reading.escalation:
                intensity = max(1, intensity - 1)
            tags.append({"emotion": item, "intensity": intensity})
        return {
            P.KEY_TAGS: tags[:3],
            P.KEY_OM: {q: cat.YES if reading.observed(q) else cat.NO for q in ctx.question_ids},
            P.KEY_HUMAN: {q: cat.YES if reading.wanted(q) else cat.NO for q in ctx.question_ids},
        }

    def hp_binary(self, ctx: P.CallContext) -> dict[str, Any]:
        # Wording does not change a keyword reading: first-person answers equal third-person ones.
        answer = self.analysis(ctx)
        return {P.KEY_OM: answer[P.KEY_OM], P.KEY_HUMAN: answer[P.KEY_HUMAN]}

    def pairwise(self, ctx: P.CallContext) -> dict[str, Any]:
        texts = {c.label: c.text for c in ctx.candidates}
        selections = {}
        for comparison in ctx.comparisons:
            a = self._reading(ctx, texts.get(comparison.label_a, "")).quality(comparison.question_id)
            b = self._reading(ctx, texts.get(comparison.label_b, "")).quality(comparison.question_id)
            selections[str(comparison.index)] = "A" if a >= b else "B"
        return {P.KEY_SELECTIONS: selections}

    def judge(self, ctx: P.CallContext) -> dict[str, Any]:
        draft = ctx.draft or ""
        reading = self._reading(ctx, draft)
        similarity = _jaccard(draft, ctx.golden) if ctx.golden else 0.5
        base = max(1.0, min(7.0, 3.0 + 0.6 * reading.quality() + 3.0 * similarity))
        scores = {
            "overall_score": round(base),
            "emotional_appropriateness": round(max(1.0, min(7.0, base + (1 if reading.validation else -1)))),
            "helpfulness": round(max(1.0, min(7.0, base + (0.5 if reading.advice else -0.5)))),
            "tone_match": round(max(1.0, min(7.0, base - (2 if reading.escalation else 0)))),
        }
        answer: dict[str, Any] = {P.KEY_SCORES: scores}
        if ctx.question_ids:
            answer[P.KEY_DRAFT_BINARY] = {q: cat.YES if reading.observed(q) else cat.NO for q in ctx.question_ids}
        return answer

    def post(self, ctx: P.CallContext) -> dict[str, Any]:
        users = [t.user_message for t in ctx.turns]
        replies = [t.om_reply or "" for t in ctx.turns]
        half = max(1, len(users) // 2)
        early: dict[str, int] = {}
        late: dict[str, int] = {}
        for text in users[:half]:
            early.update(detect_emotions(text))
        for text in users[half:] or users[-1:]:
            late.update(detect_emotions(text))
        changes = dict.fromkeys(cat.PANAS_ITEMS, 0)
        for item in set(early) | set(late):
            if item in late and item not in early:
                changes[item] = 1
            elif item in early and item not in late:
                changes[item] = -1
        if (ctx.panas_strategy or "absolute") == "absolute":
            pre_pa, pre_na = ctx.pre_totals or (None, None)
            pa_total, na_total = (pre_pa, pre_na) if pre_pa is not None and pre_na is not None else (40, 40)
            panas = {}
            for item in cat.PANAS_ITEMS:
                base = round((pa_total if item in _POSITIVE_ITEMS else na_total) / 10)
                panas[item] = max(1, min(7, max(base + changes[item], late.get(item, 0))))
        else:
            panas = changes
        readings = [_Reading(r, u, replies[:i], i + 1) for i, (u, r) in enumerate(zip(users, replies, strict=False))]
        all_user = " ".join(users)
        q1 = [
            option
            for option, pattern in (
                (cat.Q1_OPTIONS[0], _VENT_RE),
                (cat.Q1_OPTIONS[1], _WHY_RE),
                (cat.Q1_OPTIONS[2], _OPTIONS_RE),
                (cat.Q1_OPTIONS[3], _URGENT_RE),
                (cat.Q1_OPTIONS[4], _INFO_RE),
                (cat.Q1_OPTIONS[5], _CALM_RE),
            )
            if pattern.search(all_user)
        ] or [cat.Q1_OPTIONS[1]]
        felt = set(early) | set(late)
        if not felt:
            clarity = cat.Q2_OPTIONS[1]
        elif felt & _POSITIVE_ITEMS and felt - _POSITIVE_ITEMS:
            clarity = cat.Q2_OPTIONS[2]
        elif set(early) != set(late) and early and late:
            clarity = cat.Q2_OPTIONS[3]
        else:
            clarity = cat.Q2_OPTIONS[0]
        quality = sum(r.quality() for r in readings) / max(1, len(readings))
        fit = cat.Q3_OPTIONS[0 if quality >= 3 else 1 if quality >= 1.5 else 2 if quality >= 0 else 3]
        felt_off = []
        if sum(len(r.advice) for r in readings) > len(readings):
            felt_off.append("Too much advice")
        if sum("?" in r.reply for r in readings) > 0.8 * len(readings) and len(readings) > 2:
            felt_off.append("Too many questions")
        if any(_CLINICAL_RE.search(r.reply) for r in readings):
            felt_off.append("Too formal or clinical")
        if any(r.overlap == 0 for r in readings):
            felt_off.append("Too generic")
        if any(r.repeated_advice for r in readings):
            felt_off.append("Repeated itself")

        def share(predicate: Any) -> float:
            return sum(1 for r in readings if predicate(r)) / max(1, len(readings))

        four = {
            "perceiving": 2 + 4 * share(lambda r: r.emotion_mentions > 0),
            "facilitating": 2 + 4 * share(lambda r: not r.escalation and r.overlap >= 1),
            "understanding": 2 + 4 * share(lambda r: r.overlap >= 2 or r.validation),
            "managing": 2 + 4 * share(lambda r: r.validation),
        }
        wide = {
            "q1_lookingFor": q1,
            "q2_emotionClarity": clarity,
            "q3_modelFit": fit,
            "q3_followUp_whatFeltOff": felt_off,
            "fourBranchScores": {b: round(v) for b, v in four.items()},
        }
        return _post_shape(ctx, panas, wide)


def make_baseline(
    name: str, dataset: Sequence[ConversationFile] = (), seed: int = 0, prior_tally: PriorTally | None = None
) -> BaselineBackend:
    """The backend for ``baseline:random|prior|lexicon``; ``dataset`` (or its ``prior_tally``) feeds the prior."""
    if name == "baseline:random":
        return RandomBaseline(seed)
    if name == "baseline:prior":
        return PriorBaseline(dataset, tally=prior_tally)
    if name == "baseline:lexicon":
        return LexiconBaseline()
    raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(BASELINE_NAMES)}")
