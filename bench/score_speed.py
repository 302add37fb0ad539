"""Scoring speed benchmark: 200 conversations × 10 turns × 12 (model, mode) runs.

Generates its own seeded data with realistic content (mood tags with
intensities, all 36 behaviour questions with some na and skipped answers,
three or more pairwise comparisons with alternates, drafts, judge scores and a
post-conversation survey), validates it through the canonical pydantic models
as an import would, then times scoring of the whole set.

Usage: .venv/bin/python bench/score_speed.py [--conversations 200] [--turns 10] [--seed 7]

The last line is machine-readable:
``conversations_per_s=<float> total_s=<float> peak_mb=<float>`` where a
"conversation" is one scored (conversation, model, mode) run, total_s is the
wall time of :func:`attunebench.metrics.score_documents` for the whole set and
peak_mb is the peak memory traced while scoring it (inputs excluded).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from figures import figures_line

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile, RunOutput, parse_conversation, parse_run
from attunebench.metrics import score_documents, to_json

MODELS = ("bench/model-a", "bench/model-b", "bench/model-c")
MODES = cat.MODES  # 3 models × 4 modes = 12 runs per conversation
WORDS = [
    "I",
    "feel",
    "really",
    "stuck",
    "with",
    "this",
    "and",
    "keep",
    "going",
    "over",
    "what",
    "happened",
    "at",
    "work",
    "last",
    "week",
    "my",
    "partner",
    "says",
    "I",
    "should",
    "let",
    "it",
    "go",
    "but",
    "it",
    "still",
    "hurts",
    "and",
    "I",
    "am",
    "not",
    "sure",
    "what",
    "to",
    "do",
    "next",
    "maybe",
    "talking",
    "to",
    "someone",
    "would",
    "help",
    "or",
    "maybe",
    "I",
    "just",
    "need",
    "some",
    "time",
    "to",
    "think",
    "it",
    "through",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _answer(rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.03:
        return None
    if roll < 0.12:
        return "na"
    return "yes" if rng.random() < 0.5 else "no"


def _panas(rng: random.Random) -> dict[str, Any]:
    return {"items": {item: rng.randint(1, 7) for item in cat.PANAS_ITEMS}}


def make_conversation(rng: random.Random, index: int, n_turns: int) -> dict[str, Any]:
    category, subtopic = rng.choice(cat.ALL_TOPICS)
    turns = []
    for number in range(1, n_turns + 1):
        comparisons = []
        for qid in rng.sample(cat.PAIRWISE_QUESTION_IDS, k=rng.randint(3, 5)):
            a, b = rng.sample(cat.RESPONSE_LABELS, k=2)
            comparisons.append(
                {
                    "questionId": qid,
                    "responseA": a,
                    "responseB": b,
                    "winner": None if rng.random() < 0.05 else rng.choice(cat.WINNERS),
                }
            )
        turns.append(
            {
                "turnNumber": number,
                "userMessage": _text(rng, 25),
                "llmResponse": _text(rng, 40),
                "moodShiftTags": [
                    {"emotion": e, "intensity": rng.randint(1, 7) if rng.random() < 0.9 else None}
                    for e in rng.sample(cat.PANAS_ITEMS, k=rng.choice((0, 1, 2, 2, 3)))
                ],
                "annotations": {
                    "binaryJudgements": [
                        {
                            "questionId": q,
                            "observedBehavior": _answer(rng),
                            "preferredBehavior": _answer(rng),
                            "llmValue": _answer(rng),
                        }
                        for q in cat.BINARY_QUESTION_IDS
                    ],
                    "alternateResponses": {"llmImproved": _text(rng, 40), "humanEdited": _text(rng, 35)},
                    "pairwiseComparisons": comparisons,
                    "selectedPairwiseQuestions": [c["questionId"] for c in comparisons],
                },
            }
        )
    return {
        "conversationId": f"bench-{index:04d}",
        "metadata": {
            "model": rng.choice(("om/a", "om/b", "om/c")),
            "provider": "bench",
            "timestamp": "2025-03-01T10:00:00Z",
            "category": category,
            "subtopic": subtopic,
            "turnCount": n_turns,
        },
        "participant_profile": {
            "participant_id": f"p{index % 50}",
            "diagnoses": rng.choice((["Anxiety"], ["Depression"], ["None"], None)),
        },
        "prePanas": _panas(rng),
        "postPanas": _panas(rng),
        "conversationWideQuestions": {
            "q1_lookingFor": rng.sample(cat.Q1_OPTIONS, k=rng.randint(1, 3)),
            "q2_emotionClarity": rng.choice(cat.Q2_OPTIONS),
            "q3_modelFit": rng.choice(cat.Q3_OPTIONS),
            "q3_followUp_whatFeltOff": rng.sample(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS, k=rng.randint(0, 3)),
            "fourBranchScores": {b: rng.randint(1, 7) for b in cat.FOUR_BRANCHES},
        },
        "turns": turns,
    }


def make_run(rng: random.Random, conversation: dict[str, Any], em_model: str, mode: str) -> dict[str, Any]:
    turns = []
    for turn in conversation["turns"]:
        qids = [j["questionId"] for j in turn["annotations"]["binaryJudgements"]]
        turns.append(
            {
                "turnNumber": turn["turnNumber"],
                "em_emotion_tags": [
                    {"emotion": e, "intensity": rng.randint(1, 7)}
                    for e in rng.sample(cat.PANAS_ITEMS, k=rng.choice((0, 1, 2, 3)))
                ],
                "em_drafted_response": _text(rng, 40),
                **{
                    key: {q: rng.choice(("yes", "no", "na")) for q in qids}
                    for key in (
                        "em_binary_om_assessment",
                        "em_binary_human_prediction",
                        "em_binary_om_assessment_hp",
                        "em_binary_human_prediction_hp",
                    )
                },
                "em_pairwise_selections": {
                    str(i): rng.choice(cat.WINNERS) for i in range(len(turn["annotations"]["pairwiseComparisons"]))
                },
                "em_draft_judge_scores": {d: rng.randint(1, 7) for d in cat.JUDGE_DIMENSIONS},
                "em_draft_binary_assessment": {q: rng.choice(("yes", "no")) for q in qids},
            }
        )
    return {
        "conversationId": conversation["conversationId"],
        "em_model": em_model,
        "mode": mode,
        "run_timestamp": "2025-04-01T10:00:00Z",
        "turns": turns,
        "post_conversation": {
            "panas_strategy": "absolute",
            "predicted_post_panas": _panas(rng),
            "predicted_conversation_wide": {
                "q1_lookingFor": rng.sample(cat.Q1_OPTIONS, k=2),
                "q2_emotionClarity": rng.choice(cat.Q2_OPTIONS),
                "q3_modelFit": rng.choice(cat.Q3_OPTIONS),
                "q3_followUp_whatFeltOff": rng.sample(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS, k=2),
                "fourBranchScores": {b: rng.randint(1, 7) for b in cat.FOUR_BRANCHES},
            },
        },
        "api_cost": None,
        "duration_seconds": None,
    }


def generate(n_conversations: int, n_turns: int, seed: int) -> tuple[list[ConversationFile], list[RunOutput]]:
    rng = random.Random(seed)
    conversations, runs = [], []
    for i in range(n_conversations):
        raw = make_conversation(rng, i, n_turns)
        conversations.append(parse_conversation(raw, raw["conversationId"]))
        for model in MODELS:
            for mode in MODES:
                runs.append(parse_run(make_run(rng, raw, model, mode), f"{raw['conversationId']}/{model}/{mode}"))
    return conversations, runs


def traced_peak_mb(conversations: list[ConversationFile], runs: list[RunOutput]) -> float:
    """Peak memory allocated while scoring (inputs already in memory are not counted)."""
    gc.collect()
    tracemalloc.start()
    report = score_documents(conversations, runs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del report
    return peak / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="6 conversations × 3 turns: the path, not the timing")
    args = parser.parse_args()
    if args.smoke:
        args.conversations, args.turns = 6, 3

    started = time.perf_counter()
    conversations, runs = generate(args.conversations, args.turns, args.seed)
    print(
        f"generated and validated {len(conversations)} conversations × {args.turns} turns and "
        f"{len(runs)} runs in {time.perf_counter() - started:.2f} s"
    )

    score_documents(conversations[:1], runs[:1])  # import scipy and warm caches outside the timing
    gc.collect()
    started = time.perf_counter()
    report = score_documents(conversations, runs)
    total = time.perf_counter() - started
    assert len(report.conversations) == len(runs)

    started = time.perf_counter()
    size = len(json.dumps(to_json(report), allow_nan=False))
    print(
        f"report: {len(report.aggregates)} aggregate rows, JSON {size / 1e6:.1f} MB "
        f"(serialised in {time.perf_counter() - started:.2f} s)"
    )
    del report

    half = len(conversations) // 2
    half_runs = [r for r in runs if int(r.conversationId.split("-")[1]) < half]
    peak_half = traced_peak_mb(conversations[:half], half_runs)
    peak = traced_peak_mb(conversations, runs)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_s = len(runs) / total
    print(f"scored {len(runs)} runs ({len(runs) * args.turns} turns) in {total:.3f} s: {per_s:.0f} conversations/s")
    print(
        f"peak traced memory while scoring: {peak_half:.1f} MB for half the set, {peak:.1f} MB for all "
        f"(process max RSS {rss:.0f} MB incl. inputs)"
    )
    print(figures_line("score_speed", runs=len(runs), conversations_per_s=per_s, total_s=total, peak_mb=peak))


if __name__ == "__main__":
    main()
