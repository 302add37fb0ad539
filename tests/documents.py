"""Small hand-written canonical documents for tests (no randomness, every section filled)."""

from __future__ import annotations

import copy
from typing import Any

_BASE: dict[str, Any] = {
    "conversationId": "test-conv-1",
    "metadata": {
        "model": "acme/chat-large",
        "provider": "acme",
        "timestamp": "2025-03-01T09:30:00Z",
        "category": "Work",
        "subtopic": "Stress and burnout",
        "turnCount": 2,
        "synthetic": True,
    },
    "participant_profile": {
        "participant_id": "test-p1",
        "age": "25-34",
        "traits": ["Direct"],
        "goals": ["Feel heard"],
        "responses": {"topic_attitude": "I have mixed feelings about it"},
        "diagnoses": ["Anxiety"],
    },
    "prePanas": {
        "items": dict.fromkeys(
            (
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
            ),
            3,
        )
    },
    "postPanas": {"totalPositiveAffect": 35, "totalNegativeAffect": 22, "items": {}},
    "conversationWideQuestions": {
        "q1_lookingFor": ["To just listen or let me vent"],
        "q2_emotionClarity": "Mixed or conflicted",
        "q3_modelFit": "Mostly well-matched",
        "q3_followUp_whatFeltOff": ["Too much advice"],
        "fourBranchScores": {"perceiving": 5, "facilitating": 4, "understanding": 6, "managing": 3},
    },
    "turns": [
        {
            "turnNumber": 1,
            "userMessage": "Work has been relentless and I feel like I'm drowning.",
            "llmResponse": "That sounds exhausting. What has been the hardest part this week?",
            "moodShiftTags": [{"emotion": "Distressed", "intensity": 5}],
            "annotations": {
                "binaryJudgements": [
                    {"questionId": "B1", "observedBehavior": "yes", "preferredBehavior": "yes", "llmValue": None},
                    {"questionId": "B13", "observedBehavior": "yes", "preferredBehavior": "yes", "llmValue": None},
                    {"questionId": "B313", "observedBehavior": "no", "preferredBehavior": "no", "llmValue": None},
                ],
                "alternateResponses": {
                    "llmImproved": "That sounds exhausting, like there's no room to breathe. What's weighing most?",
                    "humanEdited": "That sounds exhausting. I'm here to listen.",
                },
                "pairwiseComparisons": [
                    {"questionId": "general", "responseA": "human", "responseB": "original", "winner": "A"},
                    {"questionId": "PW4", "responseA": "alternate", "responseB": "original", "winner": "B"},
                ],
                "selectedPairwiseQuestions": ["general", "PW4"],
            },
        },
        {
            "turnNumber": 2,
            "userMessage": "Probably the deadlines. My manager keeps adding more.",
            "llmResponse": "You should talk to your manager and set boundaries.",
            "moodShiftTags": [],
            "annotations": {
                "binaryJudgements": [
                    {"questionId": "B11", "observedBehavior": "yes", "preferredBehavior": "no", "llmValue": None},
                    {"questionId": "B17", "observedBehavior": "na", "preferredBehavior": "na", "llmValue": None},
                ],
                "alternateResponses": None,
                "pairwiseComparisons": [],
                "selectedPairwiseQuestions": [],
            },
        },
    ],
}


def conversation_dict(conversation_id: str = "test-conv-1", **overrides: Any) -> dict[str, Any]:
    """A fresh deep copy of the base conversation with top-level overrides."""
    data = copy.deepcopy(_BASE)
    data["conversationId"] = conversation_id
    data.update(overrides)
    return data
