"""Per-turn metrics (SPEC 5.1) as small pure functions over plain Python values.

Every function takes already-decoded values (strings, ints, dicts) rather than
pydantic models so that the same code serves the hand-checked unit tests and
the fast path in :mod:`attunebench.metrics.engine`, which pre-normalises the
ground-truth side of a conversation once and scores many runs against it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from attunebench import catalogue as cat

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
    if deltas:
        f1_intensity = f1 * (sum(1 - d / _INTENSITY_RANGE for d in deltas) / len(deltas))
    else:
        f1_intensity = 0.0  # SPEC 5.1: F1×I is 0 when no shared emotion has both intensities
    return EmotionSetScores(precision, recall, f1, f1_intensity, recall, mae)


def emotion_scores(gt_tags: Sequence[Tag], pred_tags: Sequence[Tag]) -> EmotionSetScores:
    """Convenience wrapper over raw (word, intensity) lists."""
    return emotion_set_scores(tag_intensities(gt_tags), tag_intensities(pred_tags))


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


def emotion_va_scores(gt_tags: Sequence[Tag], pred_tags: Sequence[Tag]) -> tuple[float, float]:
    """Emotion VA scores over raw tag lists (lists, not sets: repeats are matched too)."""
    return emotion_va_from_indices(
        [(va_index(norm_emotion(w)), i) for w, i in gt_tags],
        [(va_index(norm_emotion(w)), i) for w, i in pred_tags],
    )


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


def scored_targets(pairs: Iterable[tuple[str, str | None]]) -> list[tuple[str, bool]]:
    """Keep only yes/no ground truth (SPEC 5.1), as (question id, target is yes)."""
    return [(qid, t == cat.YES) for qid, t in pairs if t == cat.YES or t == cat.NO]


def split_targets(targets: Sequence[tuple[str, bool]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(question ids whose target is yes, ids whose target is no)."""
    return tuple(q for q, yes in targets if yes), tuple(q for q, yes in targets if not yes)


def confusion_split(
    yes_ids: Sequence[str], no_ids: Sequence[str], predictions: Mapping[str, str | None] | None
) -> tuple[int, int, int, int]:
    """(tp, fp, tn, fn) from pre-split targets; the hot path of binary scoring.

    Only an explicit 'yes' prediction is positive: a missing or 'na' prediction
    counts as 'no' (SPEC 5.1).
    """
    if not predictions:
        return 0, 0, len(no_ids), len(yes_ids)
    get = predictions.get
    tp = list(map(get, yes_ids)).count(cat.YES)
    fp = list(map(get, no_ids)).count(cat.YES)
    return tp, fp, len(no_ids) - fp, len(yes_ids) - tp


def confusion(
    targets: Sequence[tuple[str, bool]], predictions: Mapping[str, str | None] | None
) -> tuple[int, int, int, int]:
    """(tp, fp, tn, fn); a missing or 'na' prediction counts as 'no' (SPEC 5.1)."""
    return confusion_split(*split_targets(targets), predictions)


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


def binary_scores_split(
    yes_ids: Sequence[str], no_ids: Sequence[str], predictions: Mapping[str, str | None] | None, has_judgements: bool
) -> dict[str, float | int]:
    """Confusion counts and metrics for one turn and one prediction set.

    A turn with no judgements at all scores accuracy 1 with empty counts, while a
    turn whose judgements are all na/unanswered scores accuracy 0 (SPEC 5.1).
    """
    tp, fp, tn, fn = confusion_split(yes_ids, no_ids, predictions)
    out: dict[str, float | int] = {"tp": tp, "fp": fp, "tn": tn, "fn": fn}
    out.update(confusion_metrics(tp, fp, tn, fn))
    if not has_judgements:
        out["accuracy"] = 1.0  # SPEC 5.1: no judgements at all -> accuracy 1
    return out


def binary_scores(
    targets: Sequence[tuple[str, bool]], predictions: Mapping[str, str | None] | None, has_judgements: bool
) -> dict[str, float | int]:
    """:func:`binary_scores_split` over (question id, target is yes) pairs."""
    return binary_scores_split(*split_targets(targets), predictions, has_judgements)


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
    comparisons: Sequence[Comparison], selections: Mapping[str, str | None] | None
) -> float | None:
    """Kendall τ between GT and EM label rankings, or None (SPEC 5.1).

    None when fewer than 2 labels take part or the EM selected nothing for any
    of this turn's comparisons (selections for indices the turn lacks are ignored).
    """
    labels = comparison_labels(comparisons)
    letters = em_letters(len(comparisons), selections)
    if len(labels) < 2 or not letters:
        return None
    return kendall_tau_from_ranks(
        rank_positions(gt_wins(comparisons)), rank_positions(wins_per_label(comparisons, letters))
    )


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


def token_jaccard(a: str | None, b: str | None) -> float:
    return jaccard(tokens(a), tokens(b))


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
    """Win-share-weighted Jaccard of the draft with each GT-winning label's text.

    No GT winner -> the overall similarity; no draft -> 0 (SPEC 5.1).
    """
    if draft is None:
        return 0.0
    total = sum(wins.values())
    if total == 0:
        return overall_similarity
    return sum(
        (count / total) * jaccard(draft, references.get(label, frozenset())) for label, count in wins.items() if count
    )


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


def draft_binary_alignment_split(
    yes_ids: Sequence[str], no_ids: Sequence[str], answers: Mapping[str, str | None] | None
) -> float | None:
    """Share of answered preferred targets the judge's draft answers match (SPEC 5.1).

    A missing or na answer counts as wrong. None when the judge gave no binary
    answers for this turn or the participant answered no preferred target, since
    then there is nothing to align with.
    """
    n = len(yes_ids) + len(no_ids)
    if answers is None or n == 0:
        return None
    get = answers.get
    matched = list(map(get, yes_ids)).count(cat.YES) + list(map(get, no_ids)).count(cat.NO)
    return matched / n


def draft_binary_alignment(
    preferred: Sequence[tuple[str, bool]], answers: Mapping[str, str | None] | None
) -> float | None:
    """:func:`draft_binary_alignment_split` over (question id, preferred is yes) pairs."""
    return draft_binary_alignment_split(*split_targets(preferred), answers)
