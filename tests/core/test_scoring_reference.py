"""The engine's per-key outputs equal simple reference implementations of SPEC 5 (hypothesis).

The engine is written for speed (ground truth prepared once, split target
tuples, a cached similarity table, scipy's assignment solver). The references
below are written for reading: straight from the SPEC text, brute force where
that is clearer (every permutation instead of the Hungarian method). Random
conversations and runs are scored by ``score_documents`` and every per-turn and
per-conversation key is compared with its reference.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile, RunOutput, RunTurn, Turn, parse_conversation, parse_run
from attunebench.metrics import score_documents, to_json
from tests.core.test_scoring_properties import conversations, random_runs

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
approx = pytest.approx

# ---------------------------------------------------------------------------
# Reference implementations, SPEC 5.1
# ---------------------------------------------------------------------------


def ref_emotion(gt: list[tuple[str, int | None]], pred: list[tuple[str, int | None]]) -> dict[str, Any]:
    def as_map(tags: list[tuple[str, int | None]]) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for word, intensity in tags:
            key = word.strip().lower()
            if out.get(key) is None:  # a repeated emotion keeps its first known intensity
                out[key] = intensity
        return out

    g, p = as_map(gt), as_map(pred)
    shared = [w for w in g if w in p and g[w] is not None and p[w] is not None]
    mae = sum(abs(g[w] - p[w]) for w in shared) / len(shared) if shared else None  # type: ignore[operator]
    if not g:
        v = 1.0 if not p else 0.0
        return {"precision": v, "recall": v, "f1": v, "f1_intensity": v, "hit_rate": v, "intensity_mae": mae}
    tp = len(set(g) & set(p))
    precision = tp / len(p) if p else 0.0
    recall = tp / len(g)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    f1i = f1 * sum(1 - abs(g[w] - p[w]) / 6 for w in shared) / len(shared) if shared else 0.0  # type: ignore[operator]
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "f1_intensity": f1i,
        "hit_rate": recall,
        "intensity_mae": mae,
    }


def ref_va(gt: list[tuple[str, int | None]], pred: list[tuple[str, int | None]]) -> tuple[float, float]:
    if not gt and not pred:
        return 1.0, 1.0
    if not gt or not pred:
        return 0.0, 0.0

    def sim(a: tuple[str, int | None], b: tuple[str, int | None]) -> float:
        return cat.emotion_similarity(a[0], b[0])

    def combined(a: tuple[str, int | None], b: tuple[str, int | None]) -> float:
        isim = 1 - abs(a[1] - b[1]) / 6 if a[1] is not None and b[1] is not None else 0.0
        return 0.7 * sim(a, b) + 0.3 * isim

    def best(score: Any) -> float:
        short, long_ = (gt, pred) if len(gt) <= len(pred) else (pred, gt)
        ordered = (lambda s, t: score(s, t)) if short is gt else (lambda s, t: score(t, s))
        total = max(
            sum(ordered(s, t) for s, t in zip(short, chosen, strict=True))
            for chosen in itertools.permutations(long_, len(short))
        )
        # mean matched similarity (total / len(short)) × coverage (len(short) / len(long_))
        return total / len(short) * len(short) / len(long_)

    return best(sim), best(combined)


def ref_targets(turn: Turn) -> dict[str, dict[str, str]]:
    om, human = {}, {}
    for j in turn.annotations.binaryJudgements:
        t_om = j.observedBehavior if j.observedBehavior is not None else j.llmValue
        t_human = j.preferredBehavior if j.preferredBehavior is not None else j.observedBehavior
        if t_om in ("yes", "no"):
            om[j.questionId] = t_om
        if t_human in ("yes", "no"):
            human[j.questionId] = t_human
    return {"om": om, "human": human}


def ref_binary(turn: Turn, targets: dict[str, str], predictions: dict[str, str | None]) -> dict[str, float]:
    tp = sum(1 for q, t in targets.items() if t == "yes" and predictions.get(q) == "yes")
    fn = sum(1 for q, t in targets.items() if t == "yes" and predictions.get(q) != "yes")
    fp = sum(1 for q, t in targets.items() if t == "no" and predictions.get(q) == "yes")
    tn = sum(1 for q, t in targets.items() if t == "no" and predictions.get(q) != "yes")
    total = tp + fp + tn + fn
    accuracy = (tp + tn) / total if total else 0.0
    if not turn.annotations.binaryJudgements:
        accuracy = 1.0
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "accuracy": accuracy}


def ref_pairwise(turn: Turn, selections: dict[str, str | None]) -> tuple[float, float | None]:
    comparisons = turn.annotations.pairwiseComparisons
    if comparisons:
        correct = sum(
            1 for i, c in enumerate(comparisons) if c.winner is not None and selections.get(str(i)) == c.winner
        )
        accuracy = correct / len(comparisons)
    else:
        accuracy = 1.0
    labels = sorted({label for c in comparisons for label in (c.responseA, c.responseB)})
    em_picks = {i: selections.get(str(i)) for i in range(len(comparisons)) if selections.get(str(i)) in ("A", "B")}
    if len(labels) < 2 or not em_picks:
        return accuracy, None

    def ranks(letters: dict[int, str | None]) -> dict[str, int]:
        wins = dict.fromkeys(labels, 0)
        for i, letter in letters.items():
            if letter == "A":
                wins[comparisons[i].responseA] += 1
            elif letter == "B":
                wins[comparisons[i].responseB] += 1
        order = sorted(labels, key=lambda label: -wins[label])  # stable over the alphabetical order
        return {label: order.index(label) for label in labels}

    gt_rank = ranks({i: c.winner for i, c in enumerate(comparisons)})
    em_rank = ranks(em_picks)
    c = d = 0
    for a, b in itertools.combinations(labels, 2):
        product = (gt_rank[a] - gt_rank[b]) * (em_rank[a] - em_rank[b])
        c += product > 0
        d += product < 0
    return accuracy, (c - d) / (c + d) if c + d else 0.0


def ref_jaccard(a: str | None, b: str | None) -> float:
    x, y = set((a or "").lower().split()), set((b or "").lower().split())
    if not x and not y:
        return 1.0
    if not x or not y:
        return 0.0
    return len(x & y) / len(x | y)


def ref_similarity(turn: Turn, em: RunTurn) -> dict[str, float]:
    alternates = turn.annotations.alternateResponses
    texts = {
        "original": turn.llmResponse,
        "alternate": alternates.llmImproved if alternates else "",
        "human": alternates.humanEdited if alternates else "",
    }
    draft = em.em_drafted_response
    if draft is None or not draft.strip():
        return {"original": 0.0, "alternate": 0.0, "human": 0.0, "overall": 0.0, "alignment": 0.0}
    out = {label: ref_jaccard(draft, text) for label, text in texts.items()}
    out["overall"] = max(out.values())
    wins: dict[str, int] = {}
    for c in turn.annotations.pairwiseComparisons:
        if c.winner is not None:
            label = c.responseA if c.winner == "A" else c.responseB
            wins[label] = wins.get(label, 0) + 1
    n = sum(wins.values())
    if n == 0:
        out["alignment"] = out["overall"]
    else:
        with_text = {label: w / n for label, w in wins.items() if texts[label].strip()}
        out["alignment"] = (
            sum(w * ref_jaccard(draft, texts[label]) for label, w in with_text.items()) / sum(with_text.values())
            if with_text
            else 0.0
        )
    return out


def ref_judge(scores: dict[str, float | None] | None) -> float | None:
    present = [v for v in (scores or {}).values() if v is not None]
    if not present:
        return None
    return min(1.0, max(0.0, (sum(present) / len(present) - 1) / 6))


def ref_draft_binary(targets: dict[str, str], answers: dict[str, str | None] | None) -> float | None:
    if not answers or not targets:
        return None
    return sum(1 for q, t in targets.items() if answers.get(q) == t) / len(targets)


# ---------------------------------------------------------------------------
# Reference implementations, SPEC 5.2
# ---------------------------------------------------------------------------


def ref_set_f1(gt: list[str], pred: list[str]) -> float:
    g = {x.strip().lower() for x in gt if x.strip()}
    p = {x.strip().lower() for x in pred if x.strip()}
    if not g and not p:
        return 1.0
    if not g or not p or not g & p:
        return 0.0
    precision, recall = len(g & p) / len(p), len(g & p) / len(g)
    return 2 * precision * recall / (precision + recall)


def ref_fuzzy(gt: list[str], pred: list[str]) -> float:
    g = [x.strip().lower() for x in gt]
    p = [x.strip().lower() for x in pred]
    if not g and not p:
        return 1.0
    if not g or not p:
        return 0.0

    def credit(entry: str, other: list[str]) -> float:
        if entry in other:
            return 1.0
        best = max(ref_jaccard(entry, o) for o in other)
        return best if best >= 0.3 else 0.0

    precision = sum(credit(x, g) for x in p) / len(p)
    recall = sum(credit(x, p) for x in g) / len(g)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def ref_conversation(conversation: ConversationFile, run: RunOutput) -> dict[str, Any]:
    post = run.post_conversation
    wide = conversation.conversationWideQuestions
    pwide = post.predicted_conversation_wide if post else None
    ppanas = post.predicted_post_panas if post else None

    def total(panas: Any, attr: str) -> int | None:
        return getattr(panas, attr) if panas is not None and not panas.is_empty else None

    errors = []
    for attr in ("totalPositiveAffect", "totalNegativeAffect"):
        g, p = total(conversation.postPanas, attr), total(ppanas, attr)
        if g is not None or p is not None:
            errors.append(abs((40 if g is None else g) - (40 if p is None else p)))
    mae = sum(errors) / len(errors) if errors else None
    options = [o.lower() for o in cat.Q3_OPTIONS]
    g3 = (wide.q3_modelFit or "").strip().lower() if wide else ""
    p3 = (pwide.q3_modelFit or "").strip().lower() if pwide else ""
    gi, pi = (options.index(g3) if g3 in options else None), (options.index(p3) if p3 in options else None)
    distance = 0 if gi is None and pi is None else 3 if gi is None or pi is None else abs(gi - pi)
    branch_errors = [
        abs(r - (pwide.fourBranchScores.get(b, 4) if pwide else 4))
        for b, r in (wide.fourBranchScores if wide else {}).items()
    ]
    return {
        "panas_mae": mae,
        "panas_normalized": None if mae is None else max(0.0, 1 - mae / 60),
        "q1_looking_for_score": ref_set_f1(wide.q1_lookingFor if wide else [], pwide.q1_lookingFor if pwide else []),
        "q2_emotion_clarity_match": float(
            ((wide.q2_emotionClarity or "") if wide else "").strip().lower()
            == ((pwide.q2_emotionClarity or "") if pwide else "").strip().lower()
        ),
        "q3_model_fit_match": float(g3 == p3),
        "q3_model_fit_ordinal_distance": distance,
        "q3_follow_up_score": ref_fuzzy(
            wide.q3_followUp_whatFeltOff if wide else [], pwide.q3_followUp_whatFeltOff if pwide else []
        ),
        "four_branch_mae": sum(branch_errors) / len(branch_errors) if branch_errors else 0.0,
        # an empty predicted PANAS object predicts nothing: not usable
        "post_coverage": 1.0 if ppanas is not None and not ppanas.is_empty and pwide is not None else 0.0,
    }


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------


@SETTINGS
@given(st.data())
def test_every_key_matches_its_reference(data: st.DataObject) -> None:
    raw = data.draw(conversations())
    conversation = parse_conversation(raw)
    run = parse_run(data.draw(random_runs(raw)))
    record = to_json(score_documents([conversation], [run]).conversations[0])  # named as the reference names them
    gt_turns = {t.turnNumber: t for t in conversation.turns}
    em_turns = {t.turnNumber: t for t in run.turns}
    assert [t["turnNumber"] for t in record["turns"]] == [n for n in em_turns if n in gt_turns]
    assert record["coverage"] == approx(len(record["turns"]) / len(gt_turns))
    for scored in record["turns"]:
        gt, em = gt_turns[scored["turnNumber"]], em_turns[scored["turnNumber"]]
        gt_tags = [(t.emotion, t.intensity) for t in gt.moodShiftTags]
        em_tags = [(t.emotion, t.intensity) for t in em.em_emotion_tags]
        for key, value in ref_emotion(gt_tags, em_tags).items():
            assert scored[f"emotion_{key}"] == approx(value), key
        assert (scored["emotion_va_score"], scored["emotion_va_intensity_score"]) == approx(ref_va(gt_tags, em_tags))
        targets = ref_targets(gt)
        for variant, kind, predictions in (
            ("binary_om", "om", em.em_binary_om_assessment),
            ("binary_human", "human", em.em_binary_human_prediction),
            ("binary_om_hp", "om", em.em_binary_om_assessment_hp),
            ("binary_human_hp", "human", em.em_binary_human_prediction_hp),
        ):
            expected = ref_binary(gt, targets[kind], predictions)
            assert {k: scored[variant][k] for k in expected} == approx(expected), variant
        accuracy, tau = ref_pairwise(gt, em.em_pairwise_selections)
        assert scored["pairwise_accuracy"] == approx(accuracy)
        assert scored["pairwise_kendall_tau"] == (None if tau is None else approx(tau))
        similarity = ref_similarity(gt, em)
        assert scored["response_similarity"] == approx(similarity["overall"])
        for label in ("original", "alternate", "human"):
            assert scored[f"response_similarity_{label}"] == approx(similarity[label])
        assert scored["response_preference_alignment"] == approx(similarity["alignment"])
        judge = ref_judge(em.em_draft_judge_scores)
        assert scored["draft_judge_score"] == (None if judge is None else approx(judge))
        alignment = ref_draft_binary(targets["human"], em.em_draft_binary_assessment)
        assert scored["draft_binary_alignment"] == (None if alignment is None else approx(alignment))
    for key, value in ref_conversation(conversation, run).items():
        assert record[key] == (None if value is None else approx(value)), key
