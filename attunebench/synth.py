"""Seeded random conversations and EM runs for load, scale and scoring tests.

The hand-written files in ``sample_data/`` are for people to read; these are for
machines to chew on. Everything here is schema-valid by construction (each
document goes through the same pydantic models an import uses) and fully
determined by the seed, so a failing scale test can be replayed exactly.

``synth_run`` fakes an evaluated model whose predictions copy the ground truth
with probability ``skill`` and are random otherwise. Scores therefore rise with
skill, which lets scoring and analysis code be tested for separability without
any model call. Pure Python: no Django, no I/O except ``write_documents``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from attunebench import catalogue as cat
from attunebench.canonical import (
    ConversationFile,
    RunOutput,
    dumps_canonical,
    format_timestamp,
    parse_conversation,
    parse_run,
    parse_timestamp,
)

SYNTH_MODELS: Final[tuple[tuple[str, str], ...]] = (
    ("om-provider-a/chat-large", "provider-a"),
    ("om-provider-b/assistant-7b", "provider-b"),
    ("om-provider-c/helper-v2", "provider-c"),
)
# Conversations are spread over a fixed window so timestamps are seed-determined.
_EPOCH: Final = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
_WINDOW_MINUTES: Final = 60 * 24 * 180

# Small vocabularies: enough variety that token-Jaccard similarity between
# drafts and references spreads over (0, 1) instead of collapsing to 0 or 1.
_OPENERS: Final = (
    "I keep thinking about",
    "Honestly I'm struggling with",
    "Can I talk about",
    "Something happened with",
    "I don't know what to do about",
    "Today was hard because of",
    "I wanted to update you on",
    "I'm a bit lost with",
)
_FEELINGS: Final = (
    "it makes me anxious",
    "I feel stuck",
    "I'm tired of it",
    "part of me is relieved",
    "I'm angry and also sad",
    "I can't sleep well",
    "I feel a bit better than yesterday",
    "I feel guilty about it",
    "I'm proud I said something",
    "it all feels too much",
)
_DETAILS: Final = (
    "my sister said it was my fault",
    "the deadline moved again",
    "nobody replied to my message",
    "I checked my bank account twice",
    "we argued in the car",
    "the doctor has not called back",
    "I skipped the meeting",
    "I wrote a long text and deleted it",
    "my friend cancelled again",
    "I finally asked for help",
)
_REPLY_MOVES: Final = (
    "That sounds really heavy to carry.",
    "It makes sense that you feel this way.",
    "Thank you for telling me about it.",
    "One option could be to write down what you want to say.",
    "You might try taking a short break before deciding.",
    "Many people find this kind of situation confusing.",
    "It may help to talk to someone you trust.",
    "There is no single right answer here.",
    "You have already done something difficult.",
    "Setting one small goal for tomorrow might help.",
)
_QUESTIONS: Final = (
    "What feels most pressing right now?",
    "How did you feel when that happened?",
    "What would a good outcome look like for you?",
    "Who else knows about this?",
    "What have you tried so far?",
)
_FELT_OFF: Final = (*cat.Q3_WHAT_FELT_OFF_SUGGESTIONS, "Changed the subject", "Felt rushed")


def _sentence(rng: random.Random, subtopic: str) -> str:
    return (
        f"{rng.choice(_OPENERS)} {subtopic.lower()}. {rng.choice(_DETAILS).capitalize()}, and {rng.choice(_FEELINGS)}."
    )


def _reply(rng: random.Random, asks: bool) -> str:
    parts = rng.sample(_REPLY_MOVES, k=rng.randint(1, 3))
    if asks:
        parts.append(rng.choice(_QUESTIONS))
    return " ".join(parts)


def _panas_items(rng: random.Random, positive_centre: float, negative_centre: float) -> dict[str, int]:
    items: dict[str, int] = {}
    for item in cat.POSITIVE_AFFECT_ITEMS:
        items[item] = min(7, max(1, round(rng.gauss(positive_centre, 1.2))))
    for item in cat.NEGATIVE_AFFECT_ITEMS:
        items[item] = min(7, max(1, round(rng.gauss(negative_centre, 1.2))))
    return items


def _tags(rng: random.Random) -> list[dict[str, Any]]:
    # Roughly one turn in six is "Neutral / no change", stored as an empty list (SPEC 2.1).
    if rng.random() < 0.16:
        return []
    chosen = rng.sample(cat.PANAS_ITEMS, k=rng.choice((1, 1, 2, 2, 3)))
    return [{"emotion": item, "intensity": None if rng.random() < 0.08 else rng.randint(1, 7)} for item in chosen]


def _yes_no_na(rng: random.Random, p_yes: float, p_na: float = 0.07) -> str | None:
    roll = rng.random()
    if roll < 0.02:
        return None  # skipped by the participant
    if roll < 0.02 + p_na:
        return cat.NOT_APPLICABLE
    return cat.YES if rng.random() < p_yes else cat.NO


def _judgements(rng: random.Random, asks: bool) -> list[dict[str, Any]]:
    if rng.random() < 0.25:
        asked = list(cat.BINARY_QUESTION_IDS)
    else:
        asked = rng.sample(cat.BINARY_QUESTION_IDS, k=rng.randint(6, 12))
    out = []
    for qid in asked:
        observed = _yes_no_na(rng, 0.5)
        if qid == "B13":
            observed = cat.YES if asks else cat.NO  # keep the obvious one coherent with the text
        out.append(
            {
                "questionId": qid,
                "observedBehavior": observed,
                "preferredBehavior": _yes_no_na(rng, 0.55),
                "llmValue": _yes_no_na(rng, 0.5) if observed is None else None,
            }
        )
    return out


def _pairwise(rng: random.Random) -> tuple[list[dict[str, Any]], list[str]]:
    questions = rng.sample(cat.PAIRWISE_QUESTION_IDS, k=rng.randint(0, 4))
    comparisons = []
    for qid in questions:
        first, second = rng.sample(cat.RESPONSE_LABELS, k=2)
        comparisons.append(
            {
                "questionId": qid,
                "responseA": first,
                "responseB": second,
                "winner": None if rng.random() < 0.05 else rng.choice(cat.WINNERS),
            }
        )
    return comparisons, questions


def _conversation_wide(rng: random.Random) -> dict[str, Any]:
    fit = rng.choice(cat.Q3_OPTIONS)
    perfect = fit == cat.Q3_OPTIONS[0]
    return {
        "q1_lookingFor": rng.sample(cat.Q1_OPTIONS, k=rng.randint(1, 3)),
        "q2_emotionClarity": rng.choice(cat.Q2_OPTIONS),
        "q3_modelFit": fit,
        "q3_followUp_whatFeltOff": [] if perfect else rng.sample(_FELT_OFF, k=rng.randint(1, 3)),
        "fourBranchScores": {branch: rng.randint(1, 7) for branch in cat.FOUR_BRANCHES},
    }


def _profile(rng: random.Random, seed: int, index: int) -> dict[str, Any] | None:
    if rng.random() < 0.05:
        return None  # profile withheld: the format allows null
    diagnoses = rng.choice(
        (
            ["Anxiety"],
            ["Depression"],
            ["Anxiety", "Depression"],
            [cat.DIAGNOSIS_NONE],
            [cat.DIAGNOSIS_NONE],
            [cat.DIAGNOSIS_PREFER_NOT_TO_SAY],
            ["ADHD"],
            None,
        )
    )
    return {
        "participant_id": f"synth-p{seed}-{index % 97:02d}",
        "age": rng.choice(cat.AGE_BANDS),
        "traits": rng.sample(cat.TRAIT_OPTIONS, k=rng.randint(1, 3)),
        "goals": rng.sample(cat.GOAL_OPTIONS, k=rng.randint(1, 2)),
        "responses": {"topic_attitude": rng.choice(cat.TOPIC_ATTITUDE_OPTIONS)},
        "diagnoses": diagnoses,
    }


def synth_conversation_dict(seed: int, index: int, min_turns: int = 3, max_turns: int = 8) -> dict[str, Any]:
    """The raw (pre-validation) dict of conversation ``index`` for ``seed``.

    Each conversation has its own generator seeded from (seed, index), so
    conversation 17 is the same whether 20 or 2,000 are generated.
    """
    rng = random.Random(f"attune-synth:{seed}:{index}")
    category, subtopic = rng.choice(cat.ALL_TOPICS)
    model, provider = rng.choice(SYNTH_MODELS)
    n_turns = rng.randint(min_turns, max_turns)
    pre_pa, pre_na = rng.uniform(2, 5), rng.uniform(2, 5.5)
    turns = []
    for number in range(1, n_turns + 1):
        asks = rng.random() < 0.55
        reply = _reply(rng, asks)
        comparisons, selected = _pairwise(rng)
        has_alternates = bool(comparisons) or rng.random() < 0.5
        turns.append(
            {
                "turnNumber": number,
                "userMessage": _sentence(rng, subtopic),
                "llmResponse": reply,
                "moodShiftTags": _tags(rng),
                "annotations": {
                    "binaryJudgements": _judgements(rng, asks),
                    "alternateResponses": {
                        "llmImproved": _reply(rng, True),
                        "humanEdited": _reply(rng, rng.random() < 0.5),
                    }
                    if has_alternates
                    else None,
                    "pairwiseComparisons": comparisons,
                    "selectedPairwiseQuestions": selected,
                },
            }
        )
    moment = _EPOCH + timedelta(minutes=rng.randrange(_WINDOW_MINUTES))
    return {
        "conversationId": f"synth-{seed}-{index}",
        "metadata": {
            "model": model,
            "provider": provider,
            "timestamp": format_timestamp(moment),
            "category": category,
            "subtopic": subtopic,
            "turnCount": n_turns,
            "synthetic": True,
        },
        "participant_profile": _profile(rng, seed, index),
        "prePanas": {"items": _panas_items(rng, pre_pa, pre_na)},
        "postPanas": {"items": _panas_items(rng, pre_pa + rng.uniform(-1, 1.5), pre_na + rng.uniform(-2, 1))},
        "conversationWideQuestions": _conversation_wide(rng),
        "turns": turns,
    }


def synth_conversations(
    n: int,
    seed: int,
    min_turns: int = 3,
    max_turns: int = 8,
    start: int = 0,
) -> list[ConversationFile]:
    """``n`` validated random conversations, identical for identical arguments.

    ``start`` offsets the index so that batches can be generated in chunks
    (indices start..start+n-1) without holding everything in memory.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if not 1 <= min_turns <= max_turns:
        raise ValueError("need 1 <= min_turns <= max_turns")
    return [
        parse_conversation(synth_conversation_dict(seed, i, min_turns, max_turns), f"synth-{seed}-{i}")
        for i in range(start, start + n)
    ]


# ---------------------------------------------------------------------------
# Fake evaluated-model runs
# ---------------------------------------------------------------------------


def _guess_yes_no(rng: random.Random, truth: str | None, skill: float) -> str:
    if truth in (cat.YES, cat.NO) and rng.random() < skill:
        return truth
    return rng.choice((cat.YES, cat.NO))


def _guess_tags(rng: random.Random, truth: list[dict[str, Any]], skill: float) -> list[dict[str, Any]]:
    if rng.random() < skill:
        out = []
        for tag in truth:
            intensity = tag["intensity"]
            if intensity is not None:
                intensity = min(7, max(1, intensity + rng.choice((-1, 0, 0, 1))))
            out.append({"emotion": tag["emotion"], "intensity": intensity})
        return out
    return _tags(rng)


def _guess_wide(rng: random.Random, truth: dict[str, Any] | None, skill: float) -> dict[str, Any]:
    guess = _conversation_wide(rng)
    if truth is None:
        return guess
    for key in ("q1_lookingFor", "q2_emotionClarity", "q3_modelFit", "q3_followUp_whatFeltOff"):
        if rng.random() < skill:
            guess[key] = truth[key]
    truth_branches = truth.get("fourBranchScores") or {}
    for branch in cat.FOUR_BRANCHES:
        if branch in truth_branches and rng.random() < skill:
            guess["fourBranchScores"][branch] = truth_branches[branch]
    return guess


def synth_run(
    conversation: ConversationFile,
    em_model: str,
    mode: str,
    seed: int,
    skill: float = 0.5,
    drop_rate: float = 0.0,
    panas_strategy: str = "absolute",
    with_judge: bool = True,
) -> RunOutput:
    """A validated EM run (SPEC 3.2) whose answers are right with probability ``skill``.

    Preconditions: 0 <= skill <= 1 and 0 <= drop_rate < 1. With probability
    ``drop_rate`` a turn is left out, as a replay that gave up on a turn
    would, so coverage reporting can be tested. Deterministic for a given
    (conversation id, em_model, mode, seed, skill, drop_rate).
    """
    if not 0.0 <= skill <= 1.0:
        raise ValueError("skill must be between 0 and 1")
    if not 0.0 <= drop_rate < 1.0:
        raise ValueError("drop_rate must be in [0, 1)")
    rng = random.Random(f"attune-run:{seed}:{conversation.conversationId}:{em_model}:{mode}:{skill}:{drop_rate}")
    truth = conversation.model_dump(mode="json")
    turns = []
    for turn in truth["turns"]:
        if drop_rate and rng.random() < drop_rate:
            continue
        annotations = turn["annotations"]
        observed = {j["questionId"]: j["observedBehavior"] or j["llmValue"] for j in annotations["binaryJudgements"]}
        preferred = {
            j["questionId"]: j["preferredBehavior"] or j["observedBehavior"] for j in annotations["binaryJudgements"]
        }
        alternates = annotations["alternateResponses"] or {}
        golden = alternates.get("humanEdited") or alternates.get("llmImproved") or turn["llmResponse"]
        draft = golden if rng.random() < skill else _reply(rng, rng.random() < 0.5)
        judge_centre = 1 + 6 * skill
        selections = {}
        for index, comparison in enumerate(annotations["pairwiseComparisons"]):
            winner = comparison["winner"]
            selections[str(index)] = winner if winner and rng.random() < skill else rng.choice(cat.WINNERS)
        turns.append(
            {
                "turnNumber": turn["turnNumber"],
                "em_emotion_tags": _guess_tags(rng, turn["moodShiftTags"], skill),
                "em_drafted_response": draft,
                "em_binary_om_assessment": {q: _guess_yes_no(rng, v, skill) for q, v in observed.items()},
                "em_binary_human_prediction": {q: _guess_yes_no(rng, v, skill) for q, v in preferred.items()},
                "em_binary_om_assessment_hp": {q: _guess_yes_no(rng, v, skill) for q, v in observed.items()},
                "em_binary_human_prediction_hp": {q: _guess_yes_no(rng, v, skill) for q, v in preferred.items()},
                "em_pairwise_selections": selections,
                "em_draft_judge_scores": {
                    dim: float(min(7, max(1, round(rng.gauss(judge_centre, 1.0))))) for dim in cat.JUDGE_DIMENSIONS
                }
                if with_judge
                else None,
                "em_draft_binary_assessment": {q: _guess_yes_no(rng, v, skill) for q, v in preferred.items()}
                if with_judge
                else None,
            }
        )
    post_truth = truth["postPanas"]
    if post_truth and post_truth["items"] and rng.random() < skill:
        items = {k: min(7, max(1, v + rng.choice((-1, 0, 0, 1)))) for k, v in post_truth["items"].items()}
    else:
        items = _panas_items(rng, rng.uniform(2, 5), rng.uniform(2, 5))
    started = parse_timestamp(truth["metadata"]["timestamp"]) + timedelta(days=30, seconds=rng.randrange(86400))
    run = {
        "conversationId": conversation.conversationId,
        "em_model": em_model,
        "mode": mode,
        "run_timestamp": format_timestamp(started),
        "turns": turns,
        "post_conversation": {
            "panas_strategy": panas_strategy,
            "predicted_post_panas": {"items": items},
            "predicted_conversation_wide": _guess_wide(rng, truth["conversationWideQuestions"], skill),
        },
        "api_cost": 0.0,
        "duration_seconds": round(rng.uniform(5, 90), 2),
        "synthetic": True,
    }
    return parse_run(run, f"{conversation.conversationId}/{em_model}/{mode}")


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """A file-name-safe form of an id or model name ('om/x:1' -> 'om_x_1')."""
    return _UNSAFE.sub("_", text).strip("_") or "unnamed"


def document_filename(document: ConversationFile | RunOutput) -> str:
    """Conversation files by id; run files by id, EM and mode, so several runs can share a folder."""
    if isinstance(document, RunOutput):
        return f"{slug(document.conversationId)}__{slug(document.em_model)}__{document.mode}.json"
    return f"{slug(document.conversationId)}.json"


def write_documents(docs: Iterable[BaseModel], out_dir: str | Path) -> list[Path]:
    """Write each document as canonical JSON, one file each; returns the paths written.

    The folder is created if needed; an existing file of the same name is
    overwritten, so re-running with the same seed reproduces the same tree.
    """
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for doc in docs:
        if not isinstance(doc, (ConversationFile, RunOutput)):
            raise TypeError(f"not a canonical document: {type(doc).__name__}")
        path = folder / document_filename(doc)
        path.write_text(dumps_canonical(doc), encoding="utf-8")
        written.append(path)
    return written


def synth_runs(
    conversations: Sequence[ConversationFile],
    em_model: str,
    mode: str,
    seed: int,
    skill: float = 0.5,
    drop_rate: float = 0.0,
) -> list[RunOutput]:
    """One run per conversation for one (EM, mode), as ``synth_run`` makes them."""
    return [synth_run(c, em_model, mode, seed, skill=skill, drop_rate=drop_rate) for c in conversations]
