"""The typed results of the SPEC 6 analyses, and the one way they become JSON.

Every consumer of :func:`attunebench.metrics.analysis.analyze` (the ``attune
analyze`` text and JSON, the evaluation dashboard and its figures, the REST
API) reads these models by attribute, so a misspelt field is an error at type
check time instead of a silent ``KeyError`` (or a silently empty column) in one
consumer. Field names are the JSON keys, so ``to_json`` gives the documented
shape and ``Analysis.model_validate_json`` reads a saved file back.

The models are frozen and reject unknown fields and NaN/infinity: an analysis
that produced NaN has a missing guard, and must fail where it is built rather
than in a JSON writer later.

Maps keyed by data (row labels, metric names chosen by the caller) stay
dicts; everything with a fixed set of keys is a model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from attunebench.metrics.composite import CAPABILITIES

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
    low: float | None
    high: float | None


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


class CategoryBreakdown(Result):
    rows: list[CategoryRow]
    overall: list[CategoryOverall]  # all rows pooled, hardest (lowest composite) first
    note: str | None


class OriginalModelBreakdown(Result):
    rows: list[OriginalModelRow]
    overall: list[OriginalModelOverall]
    note: str | None


class GroupComparison(Result):
    """Composite of diagnosed anxiety/depression vs no diagnosis, Mann–Whitney U."""

    n_anxiety_depression: int
    n_none: int
    composite_anxiety_depression: float | None
    composite_none: float | None
    mann_whitney_u: float | None
    p: float | None
    note: str | None


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


class ParticipantGroups(Result):
    groups: list[str]
    test: str
    rows: list[GroupRow]
    pooled: GroupComparison


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


# ---------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------


class HumanBaseline(Result):
    rows: list[str]  # labels of the human rows
    note: str


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
