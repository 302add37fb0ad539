"""Composite scores (SPEC 5.3) and the capability scores reported beside them.

The capability scores exist because SPEC 1 warns against reading a single
composite: each is built only from keys of the per-conversation record, so
they can be recomputed from a saved report as well as from a live scoring run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The four capability scores of the leaderboard (SPEC 1) plus response quality (SPEC 6).
CAPABILITIES: tuple[str, ...] = (
    "emotion_tracking",
    "behaviour_judgement",
    "preference_prediction",
    "response_quality",
    "holistic_comprehension",
)
# The leaderboard shows every capability the profile shows, response quality included.
LEADERBOARD_CAPABILITIES: tuple[str, ...] = CAPABILITIES
CAPABILITY_LABELS: dict[str, str] = {
    "emotion_tracking": "emotion",
    "behaviour_judgement": "behaviour",
    "preference_prediction": "preference",
    "response_quality": "response",
    "holistic_comprehension": "holistic",
}


# Full names for figures, dashboards and reports; CAPABILITY_LABELS are the short column heads.
CAPABILITY_TITLES: dict[str, str] = {
    "emotion_tracking": "Emotion tracking",
    "behaviour_judgement": "Behaviour judgement",
    "preference_prediction": "Preference prediction",
    "response_quality": "Response quality",
    "holistic_comprehension": "Holistic comprehension",
}


def panas_part(baseline_adjusted: float | None) -> float:
    """(baseline_adjusted + 1)/2, or 0.5 if null (SPEC 5.3)."""
    return 0.5 if baseline_adjusted is None else (baseline_adjusted + 1) / 2


def composite_parts(record: Mapping[str, Any]) -> dict[str, float]:
    """The SPEC 5.3 building blocks from a per-conversation record's keys."""
    emotion = 0.5 * record["avg_emotion_f1"] + 0.5 * record["avg_emotion_va_score"]
    binary = (record["avg_binary_om_accuracy"] + record["avg_binary_human_accuracy"]) / 2
    pairwise = record["avg_pairwise_accuracy"]
    evalq = 0.5 * binary + 0.5 * pairwise
    panas = panas_part(record["panas_baseline_adjusted"])
    convq = (
        record["q1_looking_for_score"]
        + record["q2_emotion_clarity_match"]
        + record["q3_model_fit_match"]
        + record["q3_follow_up_score"]
    ) / 4
    four_branch = record["four_branch_normalized"]
    holistic = 0.4 * panas + 0.3 * convq + 0.3 * four_branch
    return {
        "emotion": emotion,
        "binary": binary,
        "pairwise": pairwise,
        "evalq": evalq,
        "panas": panas,
        "convq": convq,
        "four_branch": four_branch,
        "holistic": holistic,
    }


def composite_scores(record: Mapping[str, Any]) -> dict[str, float]:
    """composite_score, equal_weight_composite, turn_level_average, conversation_wide_average."""
    p = composite_parts(record)
    turn_level = (p["emotion"] + p["binary"] + p["pairwise"]) / 3
    conversation_wide = (p["panas"] + p["convq"] + p["four_branch"]) / 3
    return {
        "composite_score": round(100 * (0.24 * p["emotion"] + 0.49 * p["evalq"] + 0.27 * p["holistic"]), 2),
        "equal_weight_composite": round(100 * (turn_level + conversation_wide) / 2, 2),
        "turn_level_average": turn_level,
        "conversation_wide_average": conversation_wide,
    }


def hp_perspective(human_accuracy: float | None, human_accuracy_hp: float | None) -> tuple[float | None, float | None]:
    """(hp_perspective_gap, hp_perspective_alignment) per SPEC 5.3.

    gap = human acc − human acc (HP wording); alignment = HP-wording accuracy /
    third-person accuracy, None when the third-person accuracy is 0 (no ratio).
    """
    if human_accuracy is None or human_accuracy_hp is None:
        return None, None
    gap = human_accuracy - human_accuracy_hp
    alignment = human_accuracy_hp / human_accuracy if human_accuracy else None
    return gap, alignment


def capability_scores(record: Mapping[str, Any]) -> dict[str, float]:
    """Capability scores (0–1) of one conversation record.

    emotion_tracking = SPEC 5.3 emotion part; behaviour_judgement = binary part;
    preference_prediction = mean pairwise accuracy; holistic_comprehension =
    holistic part; response_quality = mean of the draft similarity and, when a
    judge ran, the judge score (a run without drafts has similarity 0, SPEC 5.1).
    """
    p = composite_parts(record)
    quality = [v for v in (record["avg_response_similarity"], record["avg_draft_judge_score"]) if v is not None]
    return {
        "emotion_tracking": p["emotion"],
        "behaviour_judgement": p["binary"],
        "preference_prediction": p["pairwise"],
        "response_quality": sum(quality) / len(quality),
        "holistic_comprehension": p["holistic"],
    }
