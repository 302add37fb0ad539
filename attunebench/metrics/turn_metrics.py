"""Per-turn metrics (SPEC 5.1) as small pure functions over plain Python values.

Every function takes already-decoded values (strings, ints, dicts) rather than
pydantic models: :mod:`attunebench.metrics.engine` pre-normalises the
ground-truth side of a conversation once and scores many runs against it with
exactly these functions (tests go through the engine too, so they check the
path production runs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from attunebench import catalogue as cat
from attunebench.metrics.results import TurnBinary

# An emotion tag as (word, intensity 1-7 or None).
Tag = tuple[str, int | None]
# A pairwise comparison as (label in position A, label in position B, winner "A"/"B"/None).
Comparison = tuple[str, str, str | None]

_INTENSITY_RANGE = 6.0  # intensities are 1-7, so the largest difference is 6 (SPEC 5.1)

# ---------------------------------------------------------------------------
# Valence-arousal similarity table, computed once
# ---------------------------------------------------------------------------

_VA_WORDS: tuple[str, ...] = tuple(sorted(cat.VALENCE_AROUSAL))
_VA_INDEX: dict[str, int] = {word: i for i, word in enumerate(_VA_WORDS)}
# _VA_SIM[i][j] == cat.emotion_similarity(_VA_WORDS[i], _VA_WORDS[j]) (already rounded to 4 places).
_VA_SIM: tuple[tuple[float, ...], ...] = tuple(
    tuple(cat.emotion_similarity(a, b) for b in _VA_WORDS) for a in _VA_WORDS
)


def norm_emotion(word: str) -> str:
    """Emotions are compared after trim + lower-case (SPEC 5 notation)."""
    return word.strip().lower()


def va_index(word: str) -> int:
    """Row of the similarity table for a normalised word; -1 outside the 20 items."""
    return _VA_INDEX.get(word, -1)


def va_similarity_by_index(i: int, j: int) -> float:
    """Similarity from table rows; a word outside the 20 is 0 with everything (SPEC 2.1)."""
    if i < 0 or j < 0:
        return 0.0
    return _VA_SIM[i][j]


# ---------------------------------------------------------------------------
# Emotion set metrics: F1, F1 x intensity, hit rate, intensity MAE
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EmotionSetScores:
    precision: float
    recall: float
    f1: float
    f1_intensity: float
    hit_rate: float
    intensity_mae: float | None


def tag_intensities(tags: Iterable[Tag]) -> dict[str, int | None]:
    """Normalised emotion -> intensity; a repeated emotion keeps its first known intensity.

    SPEC 5.1 treats tags as a set for F1, so a word listed twice must count once;
    the first intensity given is the one the annotator committed to first.
    """
    out: dict[str, int | None] = {}
    for word, intensity in tags:
        key = norm_emotion(word)
        if key not in out or out[key] is None:
            out[key] = intensity
    return out


def emotion_set_scores(gt: Mapping[str, int | None], pred: Mapping[str, int | None]) -> EmotionSetScores:
    """Emotion F1, F1×I, hit rate and intensity MAE from normalised emotion -> intensity maps."""
    n_g, n_p = len(gt), len(pred)
    deltas = [abs(gi - pi) for word, gi in gt.items() if gi is not None and (pi := pred.get(word)) is not None]
    mae = sum(deltas) / len(deltas) if deltas else None  # SPEC 5.1: null if no shared emotion with both intensities
    if n_g == 0:
        # SPEC 5.1: both empty -> everything 1; g empty but p not -> everything 0.
        value = 1.0 if n_p == 0 else 0.0
        return EmotionSetScores(value, value, value, value, value, mae)
    tp = sum(1 for word in pred if word in gt)
    precision = tp / n_p if n_p else 0.0  # SPEC 5.1: 0 when the denominator is 0
    recall = tp / n_g
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    # SPEC 5.1: F1×I is 0 when no shared emotion has both intensities
    f1_intensity = f1 * (sum(1 - d / _INTENSITY_RANGE for d in deltas) / len(deltas)) if deltas else 0.0
    return EmotionSetScores(precision, recall, f1, f1_intensity, recall, mae)


# ---------------------------------------------------------------------------
# Emotion VA with optimal one-to-one matching (Hungarian)
# ---------------------------------------------------------------------------

_linear_sum_assignment = None


def _assignment(cost: list[list[float]]) -> list[tuple[int, int]]:
    """Optimal matching minimising total cost; scipy imported on first use only."""
    global _linear_sum_assignment
    if _linear_sum_assignment is None:
        from scipy.optimize import linear_sum_assignment

        _linear_sum_assignment = linear_sum_assignment
    rows, cols = _linear_sum_assignment(cost)
    return list(zip(rows.tolist(), cols.tolist(), strict=True))


def _best_match_mean(sim: list[list[float]]) -> float:
    """Mean similarity of the optimal one-to-one matching of a similarity matrix.

    Minimising Σ(1 − sim) over a full matching of size min(n, m) is the same as
    maximising Σ sim, so single-row/column cases reduce to a max and skip scipy.
    """
    n, m = len(sim), len(sim[0])
    if n == 1:
        return max(sim[0])
    if m == 1:
        return max(row[0] for row in sim)
    pairs = _assignment([[1.0 - s for s in row] for row in sim])
    return sum(sim[i][j] for i, j in pairs) / len(pairs)


def emotion_va_from_indices(
    gt: Sequence[tuple[int, int | None]], pred: Sequence[tuple[int, int | None]]
) -> tuple[float, float]:
    """(emotion_va_score, emotion_va_intensity_score) over (table row, intensity) lists."""
    n_g, n_p = len(gt), len(pred)
    if n_g == 0 and n_p == 0:
        return 1.0, 1.0  # SPEC 5.1: both empty -> (1, 1)
    if n_g == 0 or n_p == 0:
        return 0.0, 0.0  # SPEC 5.1: one empty -> (0, 0)
    sim = [[va_similarity_by_index(gi, pi) for pi, _ in pred] for gi, _ in gt]
    combined = [
        [
            0.7 * sim[r][c]
            + 0.3
            * (
                1 - abs(g_int - p_int) / _INTENSITY_RANGE
                if g_int is not None and p_int is not None
                else 0.0  # SPEC 5.1: isim is 0 unless both intensities are known
            )
            for c, (_, p_int) in enumerate(pred)
        ]
        for r, (_, g_int) in enumerate(gt)
    ]
    coverage = min(n_g, n_p) / max(n_g, n_p)
    return _best_match_mean(sim) * coverage, _best_match_mean(combined) * coverage


# ---------------------------------------------------------------------------
# Binary behaviour judgements
# ---------------------------------------------------------------------------

BINARY_METRIC_KEYS = ("accuracy", "precision", "recall", "f1", "mcc")


def om_target(observed: str | None, llm_value: str | None) -> str | None:
    """OM target = observed, else llmValue (SPEC 5.1); 'else' means observed is missing."""
    return observed if observed is not None else llm_value


def human_target(preferred: str | None, observed: str | None) -> str | None:
    """Human target = preferred, else observed (SPEC 5.1)."""
    return preferred if preferred is not None else observed


def counted_as(prediction: str | None) -> str:
    """How a binary prediction counts: only an explicit 'yes' is positive (SPEC 5.1)."""
    return cat.YES if prediction == cat.YES else cat.NO


def confusion(
    yes_ids: Sequence[str], no_ids: Sequence[str], predictions: Mapping[str, str | None] | None
) -> tuple[int, int, int, int]:
    """(tp, fp, tn, fn) from the question ids whose target is yes and those whose target is no.

    Only an explicit 'yes' prediction is positive: a missing or 'na' prediction
    counts as 'no' (SPEC 5.1).
    """
    if not predictions:
        return 0, 0, len(no_ids), len(yes_ids)
    get = predictions.get
    tp = list(map(get, yes_ids)).count(cat.YES)
    fp = list(map(get, no_ids)).count(cat.YES)
    return tp, fp, len(no_ids) - fp, len(yes_ids) - tp


def confusion_metrics(tp: int, fp: int, tn: int, fn: int) -> dict[str, float]:
    """Accuracy, precision, recall, F1, MCC; each 0 when its denominator is 0 (SPEC 5.1)."""
    total = tp + fp + tn + fn
    accuracy = (tp + tn) / total if total else 0.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    mcc = (tp * tn - fp * fn) / math.sqrt(denominator) if denominator else 0.0
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1, "mcc": mcc}


def binary_scores(
    yes_ids: Sequence[str], no_ids: Sequence[str], predictions: Mapping[str, str | None] | None, has_judgements: bool
) -> TurnBinary:
    """Confusion counts and metrics for one turn and one prediction set.

    A turn with no judgements at all scores accuracy 1 with empty counts, while a
    turn whose judgements are all na/unanswered scores accuracy 0 (SPEC 5.1).
    """
    tp, fp, tn, fn = confusion(yes_ids, no_ids, predictions)
    m = confusion_metrics(tp, fp, tn, fn)
    return TurnBinary(
        tp=tp,
        fp=fp,
        tn=tn,
        fn=fn,
        accuracy=m["accuracy"] if has_judgements else 1.0,  # SPEC 5.1: no judgements at all -> accuracy 1
        precision=m["precision"],
        recall=m["recall"],
        f1=m["f1"],
        mcc=m["mcc"],
    )


# ---------------------------------------------------------------------------
# Pairwise preferences
# ---------------------------------------------------------------------------


def pairwise_accuracy(comparisons: Sequence[Comparison], selections: Mapping[str, str | None] | None) -> float:
    """Share of comparisons whose EM letter equals the GT winner; none -> 1 (SPEC 5.1)."""
    if not comparisons:
        return 1.0
    if not selections:
        return 0.0
    correct = 0
    for i, comparison in enumerate(comparisons):
        winner = comparison[2]
        if winner is not None and selections.get(str(i)) == winner:  # a null winner can't be matched
            correct += 1
    return correct / len(comparisons)


def comparison_labels(comparisons: Sequence[Comparison]) -> list[str]:
    """All labels appearing in a turn's comparisons, alphabetically."""
    return sorted({label for a, b, _ in comparisons for label in (a, b)})


def wins_per_label(comparisons: Sequence[Comparison], letters: Iterable[tuple[int, str | None]]) -> dict[str, int]:
    """Wins per label given (comparison index, winning letter) pairs."""
    wins = dict.fromkeys(comparison_labels(comparisons), 0)
    for i, letter in letters:
        if letter == "A":
            wins[comparisons[i][0]] += 1
        elif letter == "B":
            wins[comparisons[i][1]] += 1
    return wins


def gt_wins(comparisons: Sequence[Comparison]) -> dict[str, int]:
    """Wins per label under the participant's own choices."""
    return wins_per_label(comparisons, ((i, c[2]) for i, c in enumerate(comparisons)))


def rank_positions(wins: Mapping[str, int]) -> dict[str, int]:
    """SPEC 5.1 ranking rule: sort alphabetically, then stable sort by wins descending."""
    ordered = sorted(sorted(wins), key=lambda label: -wins[label])
    return {label: position for position, label in enumerate(ordered)}


def kendall_tau_from_ranks(gt_rank: Mapping[str, int], em_rank: Mapping[str, int]) -> float:
    """τ = (C − D)/(C + D) over label pairs by rank position; 0 if no pairs (SPEC 5.1)."""
    labels = sorted(gt_rank)
    concordant = discordant = 0
    for x in range(len(labels)):
        for y in range(x + 1, len(labels)):
            a, b = labels[x], labels[y]
            product = (gt_rank[a] - gt_rank[b]) * (em_rank[a] - em_rank[b])
            if product > 0:
                concordant += 1
            elif product < 0:
                discordant += 1
    pairs = concordant + discordant
    return (concordant - discordant) / pairs if pairs else 0.0


def em_letters(n_comparisons: int, selections: Mapping[str, str | None] | None) -> list[tuple[int, str]]:
    """The EM's A/B letters for this turn's comparison indices (others ignored)."""
    selections = selections or {}
    out = []
    for i in range(n_comparisons):
        letter = selections.get(str(i))
        if letter == "A" or letter == "B":
            out.append((i, letter))
    return out


def pairwise_kendall_tau(
    comparisons: Sequence[Comparison], gt_rank: Mapping[str, int], selections: Mapping[str, str | None] | None
) -> float | None:
    """Kendall τ between the GT ranking (``rank_positions(gt_wins(comparisons))``) and the EM's, or None.

    None when fewer than 2 labels take part or the EM selected nothing for any
    of this turn's comparisons; selections for indices the turn lacks are
    ignored (SPEC 5.1).
    """
    if len(gt_rank) < 2:
        return None
    letters = em_letters(len(comparisons), selections)
    if not letters:
        return None
    return kendall_tau_from_ranks(gt_rank, rank_positions(wins_per_label(comparisons, letters)))


# ---------------------------------------------------------------------------
# Response similarity and preference alignment
# ---------------------------------------------------------------------------


def tokens(text: str | None) -> frozenset[str]:
    """Lower-case whitespace tokens (SPEC 5.1)."""
    return frozenset(text.lower().split()) if text else frozenset()


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Token Jaccard; both empty -> 1, one empty -> 0 (SPEC 5.1)."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def response_similarity(draft: frozenset[str] | None, references: Mapping[str, frozenset[str]]) -> dict[str, float]:
    """Jaccard of the draft with each reference label's text, plus overall = max.

    ``draft`` is None when the EM wrote no draft: then every value is 0 (SPEC 5.1).
    """
    if draft is None:
        out = dict.fromkeys(references, 0.0)
        out["overall"] = 0.0
        return out
    out = {label: jaccard(draft, text) for label, text in references.items()}
    out["overall"] = max(out.values()) if out else 0.0
    return out


def preference_alignment(
    draft: frozenset[str] | None,
    references: Mapping[str, frozenset[str]],
    wins: Mapping[str, int],
    overall_similarity: float,
) -> float:
    """Win-weighted Jaccard of the draft with the text of each label the participant preferred (SPEC 5.1).

    Weights are wins/n over the non-null GT winners, renormalised over the
    winning labels that have text: a winning label without text (an empty
    reference) is left out of both sums rather than counted as 0. No GT winner
    -> the overall similarity; no winning label has text -> 0; no draft -> 0.
    """
    if draft is None:
        return 0.0
    if sum(wins.values()) == 0:
        return overall_similarity
    weighted = [
        (count, jaccard(draft, text)) for label, count in wins.items() if count and (text := references.get(label))
    ]
    weight = sum(count for count, _ in weighted)
    if weight == 0:
        return 0.0  # SPEC 5.1: no winning label has text
    return sum(count * similarity for count, similarity in weighted) / weight


# ---------------------------------------------------------------------------
# Judge of the draft
# ---------------------------------------------------------------------------


def draft_judge_score(scores: Mapping[str, float | None] | None) -> float | None:
    """(mean of present judge dimensions − 1)/6 clamped to 0–1; None if nothing was judged."""
    if not scores:
        return None
    present = [float(v) for v in scores.values() if v is not None]
    if not present:
        return None
    return min(1.0, max(0.0, (sum(present) / len(present) - 1) / 6))


def draft_binary_alignment(
    yes_ids: Sequence[str], no_ids: Sequence[str], answers: Mapping[str, str | None] | None
) -> float | None:
    """Share of the turn's targets the judge's answers about the draft match (SPEC 5.1).

    Targets are the human-accuracy targets (preferred, else observed; yes/no
    only), split into ids whose target is yes and ids whose target is no. A
    missing or na answer counts as wrong. None when the judge gave no binary
    answers (absent or empty) or no target is left: there is nothing to align.
    """
    n = len(yes_ids) + len(no_ids)
    if not answers or n == 0:
        return None
    get = answers.get
    matched = list(map(get, yes_ids)).count(cat.YES) + list(map(get, no_ids)).count(cat.NO)
    return matched / n
