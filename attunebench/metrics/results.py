"""The typed results of scoring and analysis, and the one way they become JSON.

Three families: the scoring report (:class:`ScoringReport`, what
``attune score --json`` writes and every score stored in the database holds),
the leaderboard row (:class:`LeaderboardRow`, the CLI table and CSV; the
dashboard and API extend it) and the SPEC 6 analyses (:class:`Analysis`).
Every consumer (CLI, dashboard and its figures, REST API, exports) reads them
by attribute, so a misspelt field is an error at type check time instead of a
silent ``KeyError`` (or a silently empty column) in one consumer. Field names
are the JSON keys, so ``to_json`` gives the documented shape and
``ScoringReport.model_validate_json`` / ``Analysis.model_validate_json`` read
a saved file back.

The models are frozen and reject unknown fields and NaN/infinity: an analysis
that produced NaN has a missing guard, and must fail where it is built rather
than in a JSON writer later.

Maps keyed by data (row labels, metric names chosen by the caller) stay
dicts; everything with a fixed set of keys is a model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from attunebench.metrics.composite import CAPABILITIES, LEADERBOARD_CAPABILITIES
from attunebench.metrics.keys import METRIC_KEYS

# key -> key -> value: metric x metric for the correlations, row label x row label for outrank probabilities
Matrix = dict[str, dict[str, float | None]]


class Result(BaseModel):
    """Base of every analysis model: immutable, no unknown fields, no NaN or infinity."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def row_label(em_model: str, mode: str) -> str:
    """How a (em_model, mode) row is named in every result, table and chart."""
    return f"{em_model} [{mode}]"


def to_json(result: BaseModel) -> dict[str, Any]:
    """The JSON form of a result model: the one serialiser, for every file written and every API response."""
    return result.model_dump(mode="json")


def _field(result: BaseModel, name: str, allowed: tuple[str, ...], what: str) -> Any:
    """Field ``name`` of ``result``, for code that loops over a tuple of field names (CAPABILITIES)."""
    if name not in allowed:
        raise KeyError(f"unknown {what} {name!r}; expected one of {', '.join(allowed)}")
    return getattr(result, name)


# ---------------------------------------------------------------------------
# Capability profile
# ---------------------------------------------------------------------------


class CapabilityScores(Result):
    """Mean capability scores (0–1) of one row; None when no conversation had the inputs."""

    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None

    def capability(self, name: str) -> float | None:
        """The score of capability ``name`` (one of CAPABILITIES)."""
        value: float | None = _field(self, name, CAPABILITIES, "capability")
        return value


class EmotionTrackingParts(Result):
    emotion_f1: float | None
    emotion_va_score: float | None
    emotion_f1_intensity: float | None
    emotion_intensity_mae: float | None


class BehaviourJudgementParts(Result):
    binary_om_accuracy: float | None
    binary_human_accuracy: float | None
    binary_om_accuracy_hp: float | None
    binary_human_accuracy_hp: float | None
    hp_perspective_gap: float | None
    hp_perspective_alignment: float | None


class PreferencePredictionParts(Result):
    pairwise_accuracy: float | None
    pairwise_kendall_tau: float | None


class ResponseQualityParts(Result):
    response_similarity: float | None
    response_preference_alignment: float | None
    draft_judge_score: float | None
    draft_binary_alignment: float | None


class HolisticComprehensionParts(Result):
    panas: float | None
    conversation_questions: float | None
    four_branch_normalized: float | None


class CapabilityComponents(Result):
    """The row means of the metrics each capability is made of."""

    emotion_tracking: EmotionTrackingParts
    behaviour_judgement: BehaviourJudgementParts
    preference_prediction: PreferencePredictionParts
    response_quality: ResponseQualityParts
    holistic_comprehension: HolisticComprehensionParts


class ProfileRow(Result):
    """One (em_model, mode) row of the capability profile."""

    em_model: str
    mode: str
    label: str
    human_baseline: bool
    n_conversations: int
    coverage: float | None
    composite_score: float | None
    se_composite: float | None
    capabilities: CapabilityScores
    components: CapabilityComponents


# ---------------------------------------------------------------------------
# Independence
# ---------------------------------------------------------------------------


class Spearman(Result):
    rho: Matrix
    p: Matrix


class Kendall(Result):
    tau: Matrix
    p: Matrix


class Independence(Result):
    """Rank correlations between capabilities over rows; matrices are metric -> metric -> value."""

    metrics: list[str]
    n_rows: int
    rankings: dict[str, list[str]]  # metric -> row labels, best first
    spearman: Spearman
    kendall: Kendall
    mean_abs_spearman: float | None
    note: str | None


# ---------------------------------------------------------------------------
# Discrimination
# ---------------------------------------------------------------------------


class PairTest(Result):
    """Paired test of two rows on one metric over their shared conversations."""

    a: str
    b: str
    n_shared: int
    mean_difference: float | None
    statistic: float | None
    p: float | None
    p_holm: float | None
    different: bool | None
    note: str | None


class MetricDiscrimination(Result):
    n_pairs: int
    n_tested: int
    n_different: int
    share_different: float | None
    variance_ratio: float | None
    variance_ratio_note: str | None
    note: str | None
    pairs: list[PairTest]


class Discrimination(Result):
    alpha: float
    correction: str
    test: str
    metrics: dict[str, MetricDiscrimination]  # metric name -> result, in the order asked


# ---------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------


class Interval(Result):
    """Observed mean and percentile bootstrap interval."""

    estimate: float | None
    low: float | None = Field(description="Null below the minimum n for an interval.")
    high: float | None


class SkillIntervals(Result):
    """Skill over the prior baseline of the composite and each capability (1 perfect, 0 the prior, < 0 below it)."""

    composite_score: Interval
    emotion_tracking: Interval
    behaviour_judgement: Interval
    preference_prediction: Interval
    response_quality: Interval
    holistic_comprehension: Interval

    def capability(self, name: str) -> Interval:
        value: Interval = _field(self, name, CAPABILITIES, "capability")
        return value


class BootstrapRow(Result):
    em_model: str
    mode: str
    label: str
    human_baseline: bool
    composite_score: Interval
    emotion_tracking: Interval
    behaviour_judgement: Interval
    preference_prediction: Interval
    response_quality: Interval
    holistic_comprehension: Interval

    # Skill over the prior baseline, (score − prior) / (scale − prior), with the same resamples;
    # None when the report has no prior-baseline row (SPEC 6, docs/benchmark.md "Skill over baselines").
    skill: SkillIntervals | None = None

    def capability(self, name: str) -> Interval:
        """The interval of capability ``name`` (one of CAPABILITIES)."""
        value: Interval = _field(self, name, CAPABILITIES, "capability")
        return value


class Bootstrap(Result):
    seed: int
    n_resamples: int
    confidence: float
    resampling: str
    rows: list[BootstrapRow]
    outrank_probability: Matrix  # row label -> row label -> P(first outranks second); None on the diagonal
    note: str | None
    min_conversations_for_ci: int = 0  # rows with fewer conversations get no interval (low and high null)
    prior_baseline: str | None = None  # label of the row skill is measured against; None: no skill


# ---------------------------------------------------------------------------
# Breakdowns
# ---------------------------------------------------------------------------


class _Summary(Result):
    """Shared behaviour of breakdown rows, which all end with n, composite and the capabilities.

    The fields are written out in each subclass (not inherited) so that the
    grouping keys come first in the JSON, as a reader expects.
    """

    def capability(self, name: str) -> float | None:
        """The mean of capability ``name`` (one of CAPABILITIES) over the group."""
        value: float | None = _field(self, name, CAPABILITIES, "capability")
        return value


class CategoryRow(_Summary):
    """One row's means over the conversations of one topic category."""

    em_model: str
    mode: str
    category: str
    n_conversations: int
    composite_score: float | None
    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None
    composite_ci_low: float | None = None  # mean ± 1.96·SE; null below the minimum n for an interval
    composite_ci_high: float | None = None


class CategoryOverall(_Summary):
    """All rows' means over the conversations of one topic category."""

    category: str
    n_conversations: int
    composite_score: float | None
    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None
    composite_ci_low: float | None = None  # mean ± 1.96·SE; null below the minimum n for an interval
    composite_ci_high: float | None = None


class OriginalModelRow(_Summary):
    """One row's means over the conversations held with one original model."""

    em_model: str
    mode: str
    original_model: str
    n_conversations: int
    composite_score: float | None
    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None
    composite_ci_low: float | None = None  # mean ± 1.96·SE; null below the minimum n for an interval
    composite_ci_high: float | None = None


class OriginalModelOverall(_Summary):
    """All rows' means over the conversations held with one original model."""

    original_model: str
    n_conversations: int
    composite_score: float | None
    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None
    composite_ci_low: float | None = None  # mean ± 1.96·SE; null below the minimum n for an interval
    composite_ci_high: float | None = None


class SpreadTest(Result):
    """Whether one metric differs between the values of a breakdown (e.g. topic categories): Kruskal–Wallis H.

    Over the pooled rows, one value per conversation; values with no conversation are left out.
    """

    metric: str  # composite_score or a capability
    n_conversations: int
    n_groups: int
    statistic: float | None
    p: float | None
    note: str | None


class CategoryBreakdown(Result):
    rows: list[CategoryRow]
    overall: list[CategoryOverall]  # the pooled rows, one value per conversation, hardest (lowest composite) first
    note: str | None
    tests: list[SpreadTest] = []  # composite and each capability across categories (pooled rows)


class OriginalModelBreakdown(Result):
    rows: list[OriginalModelRow]
    overall: list[OriginalModelOverall]
    note: str | None
    tests: list[SpreadTest] = []  # composite and each capability across original models (pooled rows)


class GroupMetric(Result):
    """One metric (composite or a capability) of diagnosed anxiety/depression vs none, Mann–Whitney U."""

    metric: str
    anxiety_depression: float | None  # mean over the group's conversations
    none: float | None
    mann_whitney_u: float | None
    p: float | None
    note: str | None


class GroupComparison(Result):
    """Composite of diagnosed anxiety/depression vs no diagnosis, Mann–Whitney U; ``metrics`` per capability."""

    n_anxiety_depression: int
    n_none: int
    composite_anxiety_depression: float | None
    composite_none: float | None
    mann_whitney_u: float | None
    p: float | None
    note: str | None
    metrics: list[GroupMetric] = []  # composite_score first, then each capability


class GroupRow(Result):
    """GroupComparison of one row's conversations (the same fields after em_model and mode)."""

    em_model: str
    mode: str
    n_anxiety_depression: int
    n_none: int
    composite_anxiety_depression: float | None
    composite_none: float | None
    mann_whitney_u: float | None
    p: float | None
    note: str | None
    metrics: list[GroupMetric] = []


class ParticipantGroups(Result):
    groups: list[str]
    test: str
    rows: list[GroupRow]
    pooled: GroupComparison  # the pooled rows (Breakdowns.pooled_rows), one value per conversation


class HalfComparison(Result):
    """Early vs late half of the conversations for one per-turn metric."""

    early: float | None
    late: float | None
    late_minus_early: float | None
    n_paired_conversations: int
    p: float | None
    note: str | None


class TurnHalves(Result):
    """One HalfComparison per turn-position metric (analysis.TURN_POSITION_METRICS)."""

    emotion_f1: HalfComparison
    emotion_va_score: HalfComparison
    binary_om_accuracy: HalfComparison
    binary_human_accuracy: HalfComparison
    behaviour_accuracy: HalfComparison
    pairwise_accuracy: HalfComparison


class CurvePoint(Result):
    """Means at one 1-based turn number over a row's conversations."""

    turn: int
    n: int  # turns scored at this position (counted on pairwise accuracy)
    emotion_f1: float | None
    emotion_va_score: float | None
    binary_om_accuracy: float | None
    binary_human_accuracy: float | None
    behaviour_accuracy: float | None
    pairwise_accuracy: float | None

    def metric(self, name: str) -> float | None:
        """The mean of turn-position metric ``name`` at this turn."""
        value: float | None = _field(self, name, tuple(TurnHalves.model_fields), "turn-position metric")
        return value


class TurnPositionRow(Result):
    em_model: str
    mode: str
    halves: TurnHalves
    curve: list[CurvePoint]


class TurnPosition(Result):
    metrics: list[str]
    rows: list[TurnPositionRow]
    note: str | None


class Breakdowns(Result):
    by_category: CategoryBreakdown
    by_participant_group: ParticipantGroups
    by_turn_position: TurnPosition
    by_original_model: OriginalModelBreakdown
    # The rows whose scores the pooled lines ("overall", "pooled") average, one value per conversation.
    pooled_rows: list[str] = []
    pool_note: str | None = None


# ---------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------


class PooledHuman(Result):
    """Every human rater together: per conversation the mean over the raters who rated it, then over conversations."""

    label: str
    n_raters: int
    n_conversations: int
    composite_score: float | None
    composite_ci_low: float | None  # mean ± 1.96·SE over conversations; null below the minimum n for an interval
    composite_ci_high: float | None
    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None


class HumanBaseline(Result):
    rows: list[str]  # labels of the human rows
    note: str
    pooled: PooledHuman | None = None  # with at least one human row


class ApartRow(Result):
    """A row left out of the comparison because it was scored on other conversations than the compared rows."""

    em_model: str
    mode: str
    label: str
    human_baseline: bool
    n_conversations: int
    n_in_compared_set: int  # of its conversations, how many belong to the compared set
    conversation_set: str  # short fingerprint of its conversation ids, to tell sets apart
    composite_score: float | None  # its own mean, over its own conversations: not comparable to the compared rows
    reason: str


class HumanPairing(Result):
    """A human row against a compared model row on exactly the conversations the human rated (paired test)."""

    human: str
    model: str
    n_shared: int
    human_composite: float | None
    model_composite: float | None
    mean_difference: float | None  # human − model, composite points
    prior_composite: float | None  # the prior baseline on the same conversations, when there is one
    human_skill: float | None
    model_skill: float | None
    statistic: float | None
    p: float | None
    p_holm: float | None  # Holm over this human's comparisons
    note: str | None


class Comparability(Result):
    """Which rows are compared (one conversation set) and which are shown apart, and why."""

    compared_set: str  # fingerprint of the compared conversation set
    n_compared_conversations: int
    min_conversations_for_ci: int
    collapsed: list[str]  # mode-agnostic baselines shown once: notes naming the modes left out
    apart: list[ApartRow]
    human_pairings: list[HumanPairing]
    test: str


class Analysis(Result):
    """All SPEC 6 analyses over one scoring report: what ``attune analyze --json`` writes."""

    rows: list[str]  # row labels, sorted by (em_model, mode)
    capability_profile: list[ProfileRow]
    independence: Independence
    discrimination: Discrimination
    bootstrap: Bootstrap
    breakdowns: Breakdowns
    human_baseline: HumanBaseline
    notes: list[str]
    comparability: Comparability | None = None


# ---------------------------------------------------------------------------
# The scoring report: what ``attune score --json`` writes
# ---------------------------------------------------------------------------
#
# Field names and order are the report's keys exactly as keys.py lists them
# (CONVERSATION_KEYS, AGGREGATE_KEYS, TURN_KEYS); a test holds the two together.


class BinaryScores(Result):
    """Confusion counts pooled over a row's scored turns, and their metrics (SPEC 5.4)."""

    tp: int
    fp: int
    tn: int
    fn: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    mcc: float


# The per-turn scores are typed mappings rather than models: a report holds one
# per scored turn (24 000 for 200 conversations × 10 turns × 12 rows), and
# plain dicts keep that at a third of the memory of models. Pydantic still
# validates them inside ConversationRecord (no unknown key, no NaN) and mypy
# checks every key read against these declarations.
_TURN_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


@with_config(_TURN_CONFIG)
class TurnBinary(TypedDict):
    """Confusion counts and their metrics for one turn and one prediction set."""

    tp: int
    fp: int
    tn: int
    fn: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    mcc: float


@with_config(_TURN_CONFIG)
class TurnScores(TypedDict):
    """Every SPEC 5.1 metric of one scored EM turn."""

    turnNumber: int
    turn_index: int
    emotion_precision: float
    emotion_recall: float
    emotion_f1: float
    emotion_f1_intensity: float
    emotion_hit_rate: float
    emotion_intensity_mae: float | None
    emotion_va_score: float
    emotion_va_intensity_score: float
    binary_om: TurnBinary
    binary_human: TurnBinary
    binary_om_hp: TurnBinary
    binary_human_hp: TurnBinary
    pairwise_accuracy: float
    pairwise_kendall_tau: float | None
    response_similarity: float
    response_similarity_original: float
    response_similarity_alternate: float
    response_similarity_human: float
    response_preference_alignment: float
    draft_judge_score: float | None
    draft_binary_alignment: float | None


class ConfusionCounts(Result):
    tp: int
    fp: int
    tn: int
    fn: int


class BinaryCounts(Result):
    """A conversation's confusion counts per binary variant, summed over its scored turns."""

    binary_om: ConfusionCounts
    binary_human: ConfusionCounts
    binary_om_hp: ConfusionCounts
    binary_human_hp: ConfusionCounts


class ConversationDetails(Result):
    """What the analyses need beyond the record (``attune score --details``; stored with every score).

    Every field may be missing (None) in a score stored by an older scorer, or
    when the database no longer knows the conversation's metadata.
    """

    n_gt_turns: int | None = None
    n_scored_turns: int | None = None
    panas_pa_error: float | None = None
    panas_na_error: float | None = None
    panas_pa_baseline_adjusted: float | None = None
    panas_na_baseline_adjusted: float | None = None
    panas_item_normalized: float | None = None
    panas_item_baseline_adjusted: float | None = None
    hp_perspective_gap: float | None = None
    hp_perspective_alignment: float | None = None
    capabilities: CapabilityScores | None = None
    binary_counts: BinaryCounts | None = None
    category: str | None = None
    original_model: str | None = None
    participant_group: str | None = None


class ConversationRecord(Result):
    """One scored (conversation, EM, mode): a row of the report's ``conversations``.

    ``post_coverage`` and ``holistic_imputed`` are None only in a score stored
    before the scorer reported them. ``details`` is present only when asked
    for, and is then the last key.
    """

    conversationId: str
    em_model: str
    mode: str
    coverage: float
    post_coverage: float | None = None
    holistic_imputed: bool | None = None
    composite_score: float
    equal_weight_composite: float
    turn_level_average: float
    conversation_wide_average: float
    avg_emotion_hit_rate: float
    avg_emotion_intensity_mae: float | None
    avg_emotion_f1: float
    avg_emotion_f1_intensity: float
    avg_emotion_va_score: float
    avg_emotion_va_intensity_score: float
    avg_binary_om_accuracy: float
    avg_binary_human_accuracy: float
    avg_binary_om_accuracy_hp: float
    avg_binary_human_accuracy_hp: float
    avg_pairwise_accuracy: float
    avg_pairwise_kendall_tau: float | None
    avg_response_similarity: float
    avg_response_preference_alignment: float
    avg_draft_judge_score: float | None
    avg_draft_binary_alignment: float | None
    panas_mae: float | None
    panas_normalized: float | None
    panas_baseline_adjusted: float | None
    panas_item_mae: float | None
    q1_looking_for_score: float
    q2_emotion_clarity_match: float
    q3_model_fit_match: float
    q3_model_fit_ordinal_distance: int
    q3_follow_up_score: float
    four_branch_mae: float
    four_branch_normalized: float
    turns: list[TurnScores]
    details: ConversationDetails | None = Field(default=None, exclude_if=lambda value: value is None)

    def metric(self, name: str) -> float | None:
        """The value of per-conversation metric ``name`` (one of keys.METRIC_KEYS)."""
        value: float | None = _field(self, name, METRIC_KEYS, "metric")
        return value

    def metrics(self) -> dict[str, float | None]:
        """Every metric of keys.METRIC_KEYS by name, for the rules written over names (composite.py)."""
        return {name: getattr(self, name) for name in METRIC_KEYS}


class AggregateRow(Result):
    """One (EM, mode) row of the report's ``aggregates``: per-conversation means (SPEC 5.4)."""

    em_model: str
    mode: str
    n_conversations: int
    coverage: float | None
    post_coverage: float | None
    composite_score: float | None
    equal_weight_composite: float | None
    turn_level_average: float | None
    conversation_wide_average: float | None
    avg_emotion_hit_rate: float | None
    avg_emotion_intensity_mae: float | None
    avg_emotion_f1: float | None
    avg_emotion_f1_intensity: float | None
    avg_emotion_va_score: float | None
    avg_emotion_va_intensity_score: float | None
    avg_binary_om_accuracy: float | None
    avg_binary_human_accuracy: float | None
    avg_binary_om_accuracy_hp: float | None
    avg_binary_human_accuracy_hp: float | None
    avg_pairwise_accuracy: float | None
    avg_pairwise_kendall_tau: float | None
    avg_response_similarity: float | None
    avg_response_preference_alignment: float | None
    avg_draft_judge_score: float | None
    avg_draft_binary_alignment: float | None
    panas_mae: float | None
    panas_normalized: float | None
    panas_baseline_adjusted: float | None
    panas_item_mae: float | None
    q1_looking_for_score: float | None
    q2_emotion_clarity_match: float | None
    q3_model_fit_match: float | None
    q3_model_fit_ordinal_distance: float | None
    q3_follow_up_score: float | None
    four_branch_mae: float | None
    four_branch_normalized: float | None
    se_composite: float | None
    z_score: float
    pooled_binary_om_metrics: BinaryScores
    pooled_binary_human_metrics: BinaryScores

    def metric(self, name: str) -> float | None:
        """The row mean of per-conversation metric ``name`` (one of keys.METRIC_KEYS)."""
        value: float | None = _field(self, name, METRIC_KEYS, "metric")
        return value


class ScoringReport(Result):
    """The scoring report: ``{"conversations": [...], "aggregates": [...]}``."""

    conversations: list[ConversationRecord]
    aggregates: list[AggregateRow]  # leaderboard order: composite descending, then model, mode


# ---------------------------------------------------------------------------
# Leaderboard
# ---------------------------------------------------------------------------


class LeaderboardCapabilities(Result):
    """Mean capability scores (0–1) of one leaderboard row; None when the row has no conversation."""

    emotion_tracking: float | None
    behaviour_judgement: float | None
    preference_prediction: float | None
    response_quality: float | None
    holistic_comprehension: float | None

    def capability(self, name: str) -> float | None:
        """The score of leaderboard capability ``name`` (one of LEADERBOARD_CAPABILITIES)."""
        value: float | None = _field(self, name, LEADERBOARD_CAPABILITIES, "leaderboard capability")
        return value


class LeaderboardRow(Result):
    """One (EM, mode) row of the leaderboard, as ``attune score`` prints it and the CSV lists it.

    The dashboard and the API extend it (research.results.evaluation.DashboardRow)
    rather than building a parallel row, so every consumer spells a column the same way.
    """

    em_model: str
    mode: str
    label: str
    human_baseline: bool
    n_conversations: int
    composite_score: float | None = Field(description="Mean SPEC 5.3 composite (0–100).")
    se_composite: float | None
    capabilities: LeaderboardCapabilities = Field(description="Mean capability scores, 0–1.")
    coverage: float | None = Field(description="Mean share of turns the model answered.")
    post_coverage: float | None = Field(
        description="Share of conversations with a usable post-conversation prediction; null when no "
        "conversation of the row recorded it (stored by an older scorer)."
    )
    holistic_imputed: int = Field(
        description="Conversations whose holistic score rests on defaults for a missing post-conversation answer."
    )
