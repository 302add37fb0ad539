"""Per-conversation (post-conversation) metrics, SPEC 5.2.

Inputs are plain values (totals, item dicts, lists of strings) so that tests
can state them directly; :mod:`attunebench.metrics.engine` unpacks the
canonical models into them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from attunebench import catalogue as cat
from attunebench.metrics.turn_metrics import jaccard, tokens

_PANAS_TOTAL_RANGE = 60.0  # totals run 10-70 (SPEC 2.1)
_PANAS_ITEM_RANGE = 6.0  # items run 1-7
_FOUR_BRANCH_RANGE = 6.0
_FUZZY_THRESHOLD = 0.3  # SPEC 5.2: best token Jaccard counts only if >= 0.3


@dataclass(frozen=True, slots=True)
class PanasSide:
    """A PANAS object reduced to what scoring needs: two totals and the item ratings.

    Built by the engine from a read ``canonical.Panas``, whose totals the reader
    already derived with ``catalogue.panas_totals`` (SPEC 5.2: totals from items when missing).
    """

    positive: int | None
    negative: int | None
    items: Mapping[str, int]


def baseline_adjusted(post: float, predicted: float, pre: float, max_error: float) -> float | None:
    """How much better than "no change from pre" the prediction is, in −1..1 (SPEC 5.2).

    None when post == pre: the naive forecast is then perfect and no gain is measurable.
    """
    if post == pre:
        return None
    naive = max(0.0, 1 - abs(post - pre) / max_error)
    raw = max(0.0, 1 - abs(post - predicted) / max_error)
    if naive >= 1.0:  # unreachable for post != pre; kept so a float edge cannot divide by 0
        return None
    return min(1.0, max(-1.0, (raw - naive) / (1 - naive)))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def panas_scores(post: PanasSide | None, predicted: PanasSide | None, pre: PanasSide | None) -> dict[str, float | None]:
    """PANAS errors, normalised score and baseline adjustments (SPEC 5.2).

    A side counts as present when at least one end (post or predicted) has a
    total; the missing end then uses the midpoint 40. With no side present the
    total-level values are None.
    """
    out: dict[str, float | None] = {}
    side_errors: list[float] = []
    adjusted: list[float] = []
    for key, attr in (("pa", "positive"), ("na", "negative")):
        gt_total = getattr(post, attr) if post else None
        pred_total = getattr(predicted, attr) if predicted else None
        pre_total = getattr(pre, attr) if pre else None
        if gt_total is None and pred_total is None:
            out[f"panas_{key}_error"] = None
        else:
            error = abs(
                (gt_total if gt_total is not None else cat.PANAS_TOTAL_MIDPOINT)
                - (pred_total if pred_total is not None else cat.PANAS_TOTAL_MIDPOINT)
            )
            out[f"panas_{key}_error"] = float(error)
            side_errors.append(error)
        side_adj = None
        if gt_total is not None and pred_total is not None and pre_total is not None:
            side_adj = baseline_adjusted(gt_total, pred_total, pre_total, _PANAS_TOTAL_RANGE)
        out[f"panas_{key}_baseline_adjusted"] = side_adj
        if side_adj is not None:
            adjusted.append(side_adj)
    mae = _mean(side_errors)
    out["panas_mae"] = mae
    out["panas_normalized"] = None if mae is None else max(0.0, 1 - mae / _PANAS_TOTAL_RANGE)
    out["panas_baseline_adjusted"] = _mean(adjusted)

    # Item level: items rated both in the participant's post survey and the prediction.
    post_items = post.items if post else {}
    pred_items = predicted.items if predicted else {}
    pre_items = pre.items if pre else {}
    item_errors = []
    item_adjusted = []
    for item, gt_value in post_items.items():
        pred_value = pred_items.get(item)
        if pred_value is None:
            continue
        item_errors.append(abs(gt_value - pred_value))
        pre_value = pre_items.get(item)
        if pre_value is not None:
            value = baseline_adjusted(gt_value, pred_value, pre_value, _PANAS_ITEM_RANGE)
            if value is not None:
                item_adjusted.append(value)
    item_mae = _mean(item_errors)
    out["panas_item_mae"] = item_mae
    out["panas_item_normalized"] = None if item_mae is None else 1 - item_mae / _PANAS_ITEM_RANGE
    out["panas_item_baseline_adjusted"] = _mean(item_adjusted)
    return out


def _norm(text: str | None) -> str:
    # SPEC 5.2 says trim and lower-case; casefold would also equate "Straße" and "STRASSE".
    return text.strip().lower() if text else ""


def set_f1(gt: Sequence[str], predicted: Sequence[str]) -> float:
    """Case-insensitive exact set F1; both empty 1, one empty 0 (SPEC 5.2, Q1)."""
    g = {_norm(x) for x in gt if _norm(x)}
    p = {_norm(x) for x in predicted if _norm(x)}
    if not g and not p:
        return 1.0
    if not g or not p:
        return 0.0
    tp = len(g & p)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(p), tp / len(g)
    return 2 * precision * recall / (precision + recall)


def option_match(gt: str | None, predicted: str | None) -> float:
    """1.0 if the two answers are equal after trim + lower-case, else 0.0 (SPEC 5.2, Q2/Q3).

    Two unanswered values are equal; this mirrors the ordinal distance, where
    "both unknown" is distance 0.
    """
    return 1.0 if _norm(gt) == _norm(predicted) else 0.0


def q3_ordinal_distance(gt: str | None, predicted: str | None) -> int:
    """Distance between positions on the four fit options; both unknown 0, one unknown 3."""
    options = [o.lower() for o in cat.Q3_OPTIONS]
    g, p = _norm(gt), _norm(predicted)
    gi = options.index(g) if g in options else None
    pi = options.index(p) if p in options else None
    if gi is None and pi is None:
        return 0
    if gi is None or pi is None:
        return len(options) - 1
    return abs(gi - pi)


def fuzzy_list_f1(gt: Sequence[str], predicted: Sequence[str]) -> float:
    """Fuzzy F1 of the two "what felt off" lists (SPEC 5.2, Q3 follow-up).

    Lists, not sets: each entry is trimmed and lower-cased, duplicates are kept
    and each earns its own credit, nothing is dropped. An entry exactly equal to
    some entry of the other list earns 1, else its best token Jaccard with the
    other list's entries if ≥ 0.3, else 0. Recall averages the GT entries'
    credits, precision the predicted entries'. Both empty 1, one empty 0.
    """
    g = [_norm(x) for x in gt]
    p = [_norm(x) for x in predicted]
    if not g and not p:
        return 1.0
    if not g or not p:
        return 0.0

    def credits(own: list[str], other: list[str]) -> float:
        other_set = set(other)
        other_tokens = [tokens(x) for x in other]
        total = 0.0
        for entry in own:
            if entry in other_set:
                total += 1.0
                continue
            best = max(jaccard(tokens(entry), t) for t in other_tokens)
            total += best if best >= _FUZZY_THRESHOLD else 0.0
        return total

    precision = credits(p, g) / len(p)
    recall = credits(g, p) / len(g)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def four_branch(gt: Mapping[str, int] | None, predicted: Mapping[str, int] | None) -> tuple[float, float]:
    """(MAE, normalised) over the branches the participant rated (SPEC 5.2).

    A missing prediction counts as 4, the scale midpoint; no GT rating -> (0, 1).
    """
    gt = gt or {}
    predicted = predicted or {}
    errors = [
        abs(rating - predicted.get(branch, cat.FOUR_BRANCH_DEFAULT_PREDICTION))
        for branch, rating in gt.items()
        if rating is not None
    ]
    if not errors:
        return 0.0, 1.0
    mae = sum(errors) / len(errors)
    return mae, max(0.0, 1 - mae / _FOUR_BRANCH_RANGE)
