"""Agreement between human raters who took the evaluated model's seat on the same conversations.

Krippendorff's alpha, nominal, computed from the coincidence matrix:

    alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c * n_k

where a unit rated by m >= 2 raters adds n_uc * n_uk / (m - 1) to o_ck (and
n_uc * (n_uc - 1) / (m - 1) to o_cc), n_c are the row sums of o and n their
total. Units with fewer than two ratings carry no information and are left
out. Alpha is undefined (None) when there is no pairable unit or a single
value is ever used (the expected disagreement is then 0).

Units:

- emotion tags: one unit per (conversation, turn, PANAS item) over all 20
  items, valued "tagged" or "not tagged" by every rater who answered that
  turn. Two raters who picked the same words therefore agree on the 18 or so
  items neither picked as well as on the ones both picked; counting only words
  somebody tagged (so that agreement could only ever be disagreement) is what
  made alpha negative for raters who agree almost everywhere.
- per item: the same units, one alpha per PANAS item.
- behaviour questions: one unit per (conversation, turn, question, wording
  about the OM or the participant), valued yes / no / na.
- pairwise choices: one unit per (conversation, turn, comparison), valued by
  the masked label picked (or "none" for no preference); labels are masked
  per (conversation, turn) the same way for every rater, so they compare.

Confidence intervals are percentile bootstraps over units: each resample
draws as many units as there are, with replacement, each unit keeping all of
its raters' values (so the dependence between raters within a unit is kept),
and recomputes alpha. The generator is seeded, so an interval is
reproducible. Resamples where alpha is undefined are dropped; no interval is
given when fewer than half of them are defined.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from attunebench import catalogue as cat
from attunebench.metrics.results import Result

N_BOOTSTRAP = 1000
SEED = 0
CONFIDENCE = 0.95

Ratings = Mapping[Any, Mapping[str, Hashable]]
"""unit -> rater -> value; a rater who did not rate a unit is simply absent from it."""


class AlphaEstimate(Result):
    """Nominal Krippendorff's alpha with its bootstrap interval; None where undefined."""

    alpha: float | None = Field(description="Nominal Krippendorff's alpha; null when undefined.")
    ci_low: float | None
    ci_high: float | None
    units: int = Field(description="Units with two or more ratings.")
    values: int = Field(description="Ratings in those units (n of the coincidence matrix).")


class RaterAgreement(Result):
    """Every agreement figure between the raters of shared conversations."""

    raters: list[str]
    conversations: int = Field(description="Conversations finished by two or more raters.")
    emotion: AlphaEstimate = Field(description="Emotion tags: one unit per (conversation, turn, PANAS item).")
    per_item: dict[str, AlphaEstimate] = Field(description="The emotion units of each item.")
    binary: AlphaEstimate = Field(description="Behaviour questions, OM and participant wording (yes/no/na).")
    pairwise: AlphaEstimate = Field(description="Pairwise choices.")
    n_bootstrap: int = Field(description="Bootstrap resamples of units behind each 95% interval.")
    seed: int


def _unit_coincidences(ratings: Ratings) -> tuple[NDArray[np.float64], int]:
    """Per pairable unit, its flattened contribution to the coincidence matrix; and the number of values."""
    per_unit = [list(raters.values()) for raters in ratings.values() if len(raters) >= 2]
    categories = sorted({repr(v) for values in per_unit for v in values})
    index = {c: i for i, c in enumerate(categories)}
    v = len(categories)
    rows = np.zeros((len(per_unit), v * v))
    for u, values in enumerate(per_unit):
        counts = np.zeros(v)
        for value in values:
            counts[index[repr(value)]] += 1
        pair = np.outer(counts, counts) - np.diag(counts)  # n_uc * n_uk, and n_uc * (n_uc - 1) on the diagonal
        rows[u] = (pair / (len(values) - 1)).ravel()
    return rows, v


def _alpha_from(coincidence: NDArray[np.float64], v: int) -> NDArray[np.float64]:
    """Alpha of each row of flattened coincidence matrices (NaN where undefined)."""
    o = coincidence.reshape(-1, v, v)
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    off = ~np.eye(v, dtype=bool)
    observed = o[:, off].sum(axis=1)
    expected = (n_c[:, :, None] * n_c[:, None, :])[:, off].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * observed / expected
    return np.where((expected > 0) & (n > 1), alpha, np.nan)


def nominal_alpha(ratings: Ratings) -> float | None:
    """Nominal Krippendorff's alpha of the ratings; None when undefined."""
    return alpha_with_ci(ratings, n_bootstrap=0).alpha


def alpha_with_ci(
    ratings: Ratings, *, n_bootstrap: int = N_BOOTSTRAP, seed: int = SEED, confidence: float = CONFIDENCE
) -> AlphaEstimate:
    """Alpha and a seeded percentile-bootstrap interval over units (see the module docstring)."""
    rows, v = _unit_coincidences(ratings)
    n_units = rows.shape[0]
    n_values = round(float(rows.sum())) if n_units else 0
    if n_units == 0 or v < 2:
        return AlphaEstimate(alpha=None, ci_low=None, ci_high=None, units=n_units, values=n_values)
    point = float(_alpha_from(rows.sum(axis=0, keepdims=True), v)[0])
    if not np.isfinite(point):
        return AlphaEstimate(alpha=None, ci_low=None, ci_high=None, units=n_units, values=n_values)
    low = high = None
    if n_bootstrap > 0 and n_units >= 2:
        # Drawing n units with replacement is drawing a multinomial count of each distinct kind of unit
        # (units with the same coincidence contribution are interchangeable), which keeps this fast.
        kinds, counts = np.unique(rows, axis=0, return_counts=True)
        rng = np.random.default_rng(seed)
        weights = rng.multinomial(n_units, counts / n_units, size=n_bootstrap)
        alphas = _alpha_from(weights @ kinds, v)
        defined = alphas[np.isfinite(alphas)]
        if defined.size * 2 >= n_bootstrap:
            tail = (1.0 - confidence) / 2 * 100
            low, high = (float(x) for x in np.percentile(defined, [tail, 100 - tail]))
    return AlphaEstimate(alpha=point, ci_low=low, ci_high=high, units=n_units, values=n_values)


# ---------------------------------------------------------------------------
# Units from run outputs (SPEC 3.2 shape)
# ---------------------------------------------------------------------------

_BINARY_VARIANTS = ("em_binary_om_assessment", "em_binary_human_prediction")  # the _hp copies repeat these for people


def _turns(output: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    return {int(t["turnNumber"]): t for t in output.get("turns", []) if "turnNumber" in t}


def _tagged(turn: Mapping[str, Any]) -> set[str]:
    words = (cat.canonical_panas_item(str(t.get("emotion", ""))) for t in turn.get("em_emotion_tags") or [])
    return {w for w in words if w is not None}


def emotion_units(shared: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[tuple[str, int, str], dict[str, int]]:
    """(conversation, turn, PANAS item) -> rater -> 1 tagged / 0 not, for every item of every answered turn."""
    units: dict[tuple[str, int, str], dict[str, int]] = {}
    for cid, outputs in shared.items():
        for rater, output in outputs.items():
            for number, turn in _turns(output).items():
                tagged = _tagged(turn)
                for item in cat.PANAS_ITEMS:
                    units.setdefault((cid, number, item), {})[rater] = int(item in tagged)
    return units


def binary_units(
    shared: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> dict[tuple[str, int, str, str], dict[str, str]]:
    """(conversation, turn, question, OM-or-participant wording) -> rater -> yes/no/na."""
    units: dict[tuple[str, int, str, str], dict[str, str]] = {}
    for cid, outputs in shared.items():
        for rater, output in outputs.items():
            for number, turn in _turns(output).items():
                for variant in _BINARY_VARIANTS:
                    for qid, answer in (turn.get(variant) or {}).items():
                        if answer in cat.YES_NO_NA:
                            units.setdefault((cid, number, qid, variant), {})[rater] = answer
    return units


def pairwise_units(shared: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[tuple[str, int, str], dict[str, str]]:
    """(conversation, turn, comparison) -> rater -> masked label picked ("none" for no preference)."""
    units: dict[tuple[str, int, str], dict[str, str]] = {}
    for cid, outputs in shared.items():
        for rater, output in outputs.items():
            for number, turn in _turns(output).items():
                for key, winner in (turn.get("em_pairwise_selections") or {}).items():
                    units.setdefault((cid, number, str(key)), {})[rater] = "none" if winner is None else str(winner)
    return units


def rater_agreement(
    outputs: Mapping[str, Mapping[str, Mapping[str, Any]]], *, n_bootstrap: int = N_BOOTSTRAP, seed: int = SEED
) -> RaterAgreement:
    """Agreement over conversations that two or more raters finished.

    ``outputs`` maps conversation id -> rater -> that rater's run output
    (SPEC 3.2 shape); conversations with a single rater are ignored.
    """
    shared = {cid: dict(raters) for cid, raters in outputs.items() if len(raters) >= 2}
    raters = sorted({r for by_rater in shared.values() for r in by_rater})
    emotions = emotion_units(shared)
    by_item: dict[str, dict[Hashable, dict[str, int]]] = {item: {} for item in cat.PANAS_ITEMS}
    for key, values in emotions.items():
        by_item[key[2]][key] = values
    return RaterAgreement(
        raters=raters,
        conversations=len(shared),
        emotion=alpha_with_ci(emotions, n_bootstrap=n_bootstrap, seed=seed),
        per_item={item: alpha_with_ci(units, n_bootstrap=n_bootstrap, seed=seed) for item, units in by_item.items()},
        binary=alpha_with_ci(binary_units(shared), n_bootstrap=n_bootstrap, seed=seed),
        pairwise=alpha_with_ci(pairwise_units(shared), n_bootstrap=n_bootstrap, seed=seed),
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
