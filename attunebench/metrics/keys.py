"""The scoring report's key names, in the order ``attune score --json`` writes them.

Kept in one module so that the engine, the aggregator, the CLI and the tests
agree on the exact JSON shape researchers will parse.
"""

from __future__ import annotations

from typing import Final, Literal

# Per-conversation average key -> per-turn source ("outer.inner" reads a nested value).
TURN_AVERAGES: Final[dict[str, str]] = {
    "avg_emotion_hit_rate": "emotion_hit_rate",
    "avg_emotion_intensity_mae": "emotion_intensity_mae",
    "avg_emotion_f1": "emotion_f1",
    "avg_emotion_f1_intensity": "emotion_f1_intensity",
    "avg_emotion_va_score": "emotion_va_score",
    "avg_emotion_va_intensity_score": "emotion_va_intensity_score",
    "avg_binary_om_accuracy": "binary_om.accuracy",
    "avg_binary_human_accuracy": "binary_human.accuracy",
    "avg_binary_om_accuracy_hp": "binary_om_hp.accuracy",
    "avg_binary_human_accuracy_hp": "binary_human_hp.accuracy",
    "avg_pairwise_accuracy": "pairwise_accuracy",
    "avg_pairwise_kendall_tau": "pairwise_kendall_tau",
    "avg_response_similarity": "response_similarity",
    "avg_response_preference_alignment": "response_preference_alignment",
    "avg_draft_judge_score": "draft_judge_score",
    "avg_draft_binary_alignment": "draft_binary_alignment",
}
# SPEC 5.3: τ, intensity MAE and the judge metrics average non-null values only, null when none.
NULLABLE_TURN_AVERAGES: Final[frozenset[str]] = frozenset(
    {
        "avg_emotion_intensity_mae",
        "avg_pairwise_kendall_tau",
        "avg_draft_judge_score",
        "avg_draft_binary_alignment",
    }
)

COMPOSITE_KEYS: Final[tuple[str, ...]] = (
    "composite_score",
    "equal_weight_composite",
    "turn_level_average",
    "conversation_wide_average",
)
CONVERSATION_LEVEL_KEYS: Final[tuple[str, ...]] = (
    "panas_mae",
    "panas_normalized",
    "panas_baseline_adjusted",
    "panas_item_mae",
    "q1_looking_for_score",
    "q2_emotion_clarity_match",
    "q3_model_fit_match",
    "q3_model_fit_ordinal_distance",
    "q3_follow_up_score",
    "four_branch_mae",
    "four_branch_normalized",
)
# Every numeric per-conversation key that an aggregate row averages.
METRIC_KEYS: Final[tuple[str, ...]] = COMPOSITE_KEYS + tuple(TURN_AVERAGES) + CONVERSATION_LEVEL_KEYS

# Coverage: ``coverage`` is turn coverage (scored GT turns / GT turns, SPEC 5.1);
# ``post_coverage`` is 1.0 when the run has a usable post-conversation prediction
# (predicted PANAS and conversation-wide answers) and 0.0 otherwise, averaged over
# conversations in an aggregate row; ``holistic_imputed`` is true when the
# holistic score rests on a missing post-conversation answer (defaults in its place).
COVERAGE_KEYS: Final[tuple[str, ...]] = ("coverage", "post_coverage")
CONVERSATION_KEYS: Final[tuple[str, ...]] = (
    "conversationId",
    "em_model",
    "mode",
    *COVERAGE_KEYS,
    "holistic_imputed",
    *METRIC_KEYS,
    "turns",
)
AGGREGATE_KEYS: Final[tuple[str, ...]] = (
    "em_model",
    "mode",
    "n_conversations",
    *COVERAGE_KEYS,
    *METRIC_KEYS,
    "se_composite",
    "z_score",
    "pooled_binary_om_metrics",
    "pooled_binary_human_metrics",
)

BinaryVariant = Literal["binary_om", "binary_human", "binary_om_hp", "binary_human_hp"]
BINARY_VARIANTS: Final[tuple[BinaryVariant, ...]] = ("binary_om", "binary_human", "binary_om_hp", "binary_human_hp")
POOLED_METRIC_KEYS: Final[tuple[str, ...]] = ("tp", "fp", "tn", "fn", "accuracy", "precision", "recall", "f1", "mcc")

TURN_KEYS: Final[tuple[str, ...]] = (
    "turnNumber",
    "turn_index",
    "emotion_precision",
    "emotion_recall",
    "emotion_f1",
    "emotion_f1_intensity",
    "emotion_hit_rate",
    "emotion_intensity_mae",
    "emotion_va_score",
    "emotion_va_intensity_score",
    *BINARY_VARIANTS,
    "pairwise_accuracy",
    "pairwise_kendall_tau",
    "response_similarity",
    "response_similarity_original",
    "response_similarity_alternate",
    "response_similarity_human",
    "response_preference_alignment",
    "draft_judge_score",
    "draft_binary_alignment",
)

HUMAN_PREFIX: Final = "human:"


def is_human(em_model: str) -> bool:
    """Human baseline rows are named ``human:<who>`` and scored exactly like models (SPEC 6)."""
    return em_model.startswith(HUMAN_PREFIX)
