"""Scoring whole runs: ground truth prepared once, many runs scored against it.

A conversation is typically replayed by a dozen (EM, mode) pairs, so every
ground-truth-only quantity (targets, label ranks, token sets, VA rows) is
computed once in :func:`prepare_conversation` and reused; the per-run work is
then mostly dictionary look-ups. This is what keeps the 200 × 10 × 12
benchmark well under its 5 s budget without multiprocessing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from attunebench import catalogue as cat
from attunebench.canonical import ConversationFile, ConversationWide, Panas, Problem, RunOutput, RunTurn, Turn
from attunebench.metrics import conversation_metrics as cm
from attunebench.metrics import turn_metrics as tm
from attunebench.metrics.aggregate import aggregate_rows
from attunebench.metrics.composite import capability_scores, composite_scores, hp_perspective
from attunebench.metrics.keys import (
    BINARY_VARIANTS,
    CONVERSATION_KEYS,
    NULLABLE_TURN_AVERAGES,
    TURN_AVERAGES,
)
from attunebench.metrics.results import ConversationDetails, ConversationRecord, ScoringReport, TurnScores

# ---------------------------------------------------------------------------
# Ground truth, prepared once per conversation
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class PreparedTurn:
    number: int
    index: int
    emotions: dict[str, int | None]
    va: list[tuple[int, int | None]]
    om_targets: tuple[tuple[str, ...], tuple[str, ...]]  # (ids with target yes, ids with target no)
    human_targets: tuple[tuple[str, ...], tuple[str, ...]]
    has_judgements: bool
    comparisons: list[tm.Comparison]
    gt_rank: dict[str, int]
    gt_wins: dict[str, int]
    references: dict[str, frozenset[str]]


@dataclass(slots=True)
class PreparedConversation:
    conversation: ConversationFile
    turns: list[PreparedTurn]
    by_number: dict[int, PreparedTurn]
    post: cm.PanasSide | None
    pre: cm.PanasSide | None
    wide: ConversationWide | None


def panas_side(panas: Panas | None) -> cm.PanasSide | None:
    """What scoring needs of a PANAS object (totals already derived by the reader); None if empty."""
    if panas is None or panas.is_empty:
        return None
    return cm.PanasSide(panas.totalPositiveAffect, panas.totalNegativeAffect, dict(panas.items))


def prepare_turn(turn: Turn, index: int) -> PreparedTurn:
    """Everything about one ground-truth turn that does not depend on the EM."""
    tags = [(t.emotion, t.intensity) for t in turn.moodShiftTags or []]
    ann = turn.annotations
    judgements = ann.binaryJudgements or []
    om_yes: list[str] = []
    om_no: list[str] = []
    human_yes: list[str] = []
    human_no: list[str] = []
    for j in judgements:
        qid, observed, preferred = j.questionId, j.observedBehavior, j.preferredBehavior
        # only yes/no ground truth is scored (SPEC 5.1)
        for target, yes, no in (
            (tm.om_target(observed, j.llmValue), om_yes, om_no),
            (tm.human_target(preferred, observed), human_yes, human_no),
        ):
            if target == cat.YES:
                yes.append(qid)
            elif target == cat.NO:
                no.append(qid)
    comparisons = [(c.responseA, c.responseB, c.winner) for c in ann.pairwiseComparisons or []]
    alternates = ann.alternateResponses
    wins = tm.gt_wins(comparisons)
    return PreparedTurn(
        number=turn.turnNumber,
        index=index,
        emotions=tm.tag_intensities(tags),
        va=[(tm.va_index(tm.norm_emotion(w)), i) for w, i in tags],
        om_targets=(tuple(om_yes), tuple(om_no)),
        human_targets=(tuple(human_yes), tuple(human_no)),
        has_judgements=bool(judgements),
        comparisons=comparisons,
        gt_rank=tm.rank_positions(wins),
        gt_wins=wins,
        references={
            cat.RESPONSE_ORIGINAL: tm.tokens(turn.llmResponse),
            cat.RESPONSE_ALTERNATE: tm.tokens(alternates.llmImproved if alternates else None),
            cat.RESPONSE_HUMAN: tm.tokens(alternates.humanEdited if alternates else None),
        },
    )


def prepare_conversation(conversation: ConversationFile) -> PreparedConversation:
    """Ground truth of one conversation in the shape every run of it is scored against.

    A turn with a step the participant never answered (null, only in exports that include
    unfinished conversations) has no complete ground truth: it is left out like a turn
    that does not exist, so it neither scores nor lowers coverage (SPEC 5.1).
    """
    turns = [prepare_turn(t, i) for i, t in enumerate(conversation.turns) if not t.unanswered_steps]
    return PreparedConversation(
        conversation=conversation,
        turns=turns,
        by_number={t.number: t for t in turns},
        post=panas_side(conversation.postPanas),
        pre=panas_side(conversation.prePanas),
        wide=conversation.conversationWideQuestions,
    )


# ---------------------------------------------------------------------------
# One turn
# ---------------------------------------------------------------------------


def score_turn(gt: PreparedTurn, em: RunTurn) -> TurnScores:
    """Every SPEC 5.1 metric of one EM turn against its prepared ground truth."""
    pred_tags = [(t.emotion, t.intensity) for t in em.em_emotion_tags]
    emo = tm.emotion_set_scores(gt.emotions, tm.tag_intensities(pred_tags))
    va, va_intensity = tm.emotion_va_from_indices(gt.va, [(tm.va_index(tm.norm_emotion(w)), i) for w, i in pred_tags])

    draft_text = em.em_drafted_response
    # A blank draft is treated like no draft: there is no reply to compare (SPEC 5.1 "No draft").
    draft = tm.tokens(draft_text) if draft_text is not None and draft_text.strip() else None
    similarity = tm.response_similarity(draft, gt.references)
    alignment = tm.preference_alignment(draft, gt.references, gt.gt_wins, similarity["overall"])

    selections = em.em_pairwise_selections

    return {
        "turnNumber": gt.number,
        "turn_index": gt.index,
        "emotion_precision": emo.precision,
        "emotion_recall": emo.recall,
        "emotion_f1": emo.f1,
        "emotion_f1_intensity": emo.f1_intensity,
        "emotion_hit_rate": emo.hit_rate,
        "emotion_intensity_mae": emo.intensity_mae,
        "emotion_va_score": va,
        "emotion_va_intensity_score": va_intensity,
        "binary_om": tm.binary_scores(*gt.om_targets, em.em_binary_om_assessment, gt.has_judgements),
        "binary_human": tm.binary_scores(*gt.human_targets, em.em_binary_human_prediction, gt.has_judgements),
        "binary_om_hp": tm.binary_scores(*gt.om_targets, em.em_binary_om_assessment_hp, gt.has_judgements),
        "binary_human_hp": tm.binary_scores(*gt.human_targets, em.em_binary_human_prediction_hp, gt.has_judgements),
        "pairwise_accuracy": tm.pairwise_accuracy(gt.comparisons, selections),
        "pairwise_kendall_tau": tm.pairwise_kendall_tau(gt.comparisons, gt.gt_rank, selections),
        "response_similarity": similarity["overall"],
        "response_similarity_original": similarity[cat.RESPONSE_ORIGINAL],
        "response_similarity_alternate": similarity[cat.RESPONSE_ALTERNATE],
        "response_similarity_human": similarity[cat.RESPONSE_HUMAN],
        "response_preference_alignment": alignment,
        "draft_judge_score": tm.draft_judge_score(em.em_draft_judge_scores),
        "draft_binary_alignment": tm.draft_binary_alignment(*gt.human_targets, em.em_draft_binary_assessment),
    }


@dataclass(frozen=True, slots=True)
class JudgementDetail:
    """How the scorer treated one behaviour judgement for one prediction set.

    ``variant`` is a binary variant (``binary_om``, ``binary_human``, their
    ``_hp`` twins) or ``draft_binary``. ``target`` is None when the judgement
    is not scored for that variant (no yes/no target), and then ``correct`` is
    None too. Pages that show agreement read this instead of re-deriving it.
    """

    question_id: str
    variant: str
    target: str | None
    prediction: str | None
    counted_as: str | None
    correct: bool | None


def judgement_details(turn: Turn, em: RunTurn | None) -> list[JudgementDetail]:
    """Target, prediction, what it counted as and whether it was right, per judgement and variant (SPEC 5.1).

    Accuracy variants count a missing or na prediction as "no"; the draft
    binary alignment counts it as wrong. Without an EM turn every prediction is
    missing. Draft rows appear only when the judge answered about the draft.
    """
    em = em or RunTurn(turnNumber=turn.turnNumber)
    predictions = {
        "binary_om": em.em_binary_om_assessment,
        "binary_human": em.em_binary_human_prediction,
        "binary_om_hp": em.em_binary_om_assessment_hp,
        "binary_human_hp": em.em_binary_human_prediction_hp,
    }
    draft = em.em_draft_binary_assessment
    out: list[JudgementDetail] = []
    for j in turn.annotations.binaryJudgements or []:
        om = tm.om_target(j.observedBehavior, j.llmValue)
        human = tm.human_target(j.preferredBehavior, j.observedBehavior)
        targets = {"binary_om": om, "binary_human": human, "binary_om_hp": om, "binary_human_hp": human}
        for variant, answers in predictions.items():
            target = targets[variant] if targets[variant] in (cat.YES, cat.NO) else None
            prediction = answers.get(j.questionId)
            counted = tm.counted_as(prediction)
            out.append(
                JudgementDetail(
                    j.questionId, variant, target, prediction, counted, None if target is None else counted == target
                )
            )
        if draft:
            target = human if human in (cat.YES, cat.NO) else None
            prediction = draft.get(j.questionId)
            out.append(
                JudgementDetail(
                    j.questionId,
                    "draft_binary",
                    target,
                    prediction,
                    prediction,
                    None if target is None else prediction == target,
                )
            )
    return out


_PLAIN_AVERAGES = tuple((k, v) for k, v in TURN_AVERAGES.items() if "." not in v)
_NESTED_AVERAGES = tuple((k, *v.split(".")) for k, v in TURN_AVERAGES.items() if "." in v)


def turn_averages(turns: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Means over scored turns (SPEC 5.3): nullable metrics over non-null values only.

    With no scored turn, nullable averages are None and every other one is 0.
    """
    out: dict[str, float | None] = {}
    for key, source in _PLAIN_AVERAGES:
        values = [v for t in turns if (v := t[source]) is not None]
        out[key] = sum(values) / len(values) if values else (None if key in NULLABLE_TURN_AVERAGES else 0.0)
    for key, outer, inner in _NESTED_AVERAGES:
        values = [t[outer][inner] for t in turns]
        out[key] = sum(values) / len(values) if values else 0.0
    return {key: out[key] for key in TURN_AVERAGES}


# ---------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class ConversationScore:
    """One scored (conversation, EM, mode): the report record plus analysis details."""

    record: ConversationRecord
    details: ConversationDetails = field(default_factory=ConversationDetails)


def score_conversation_output(prepared: PreparedConversation, run: RunOutput) -> ConversationScore:
    """Score one run against its prepared conversation.

    Precondition: ``run.conversationId`` is the prepared conversation's id.
    EM turns whose number is not a GT turn are ignored; GT turns without an EM
    turn are skipped and lower the coverage (SPEC 5.1).
    """
    turns = [score_turn(gt, em) for em in run.turns if (gt := prepared.by_number.get(em.turnNumber)) is not None]
    n_gt = len(prepared.turns)
    averages = turn_averages(turns)

    post = run.post_conversation
    predicted_panas = panas_side(post.predicted_post_panas) if post else None
    predicted_wide = post.predicted_conversation_wide if post else None
    # A failed post-conversation call leaves the holistic part on defaults (PANAS 40s,
    # Four-Branch 4s, empty answers): report that instead of letting it pass as a score.
    post_usable = predicted_panas is not None and predicted_wide is not None
    panas = cm.panas_scores(prepared.post, predicted_panas, prepared.pre)
    wide = prepared.wide
    four_mae, four_norm = cm.four_branch(
        wide.fourBranchScores if wide else None, predicted_wide.fourBranchScores if predicted_wide else None
    )

    def gt_attr(name: str, default: Any) -> Any:
        return getattr(wide, name) if wide is not None else default

    def pred_attr(name: str, default: Any) -> Any:
        return getattr(predicted_wide, name) if predicted_wide is not None else default

    values: dict[str, Any] = {
        "conversationId": run.conversationId,
        "em_model": run.em_model,
        "mode": run.mode,
        "coverage": len(turns) / n_gt if n_gt else 0.0,  # SPEC 5.3: no scored turn -> coverage 0
        "post_coverage": 1.0 if post_usable else 0.0,
        "holistic_imputed": not post_usable,
        **averages,
        "panas_mae": panas["panas_mae"],
        "panas_normalized": panas["panas_normalized"],
        "panas_baseline_adjusted": panas["panas_baseline_adjusted"],
        "panas_item_mae": panas["panas_item_mae"],
        "q1_looking_for_score": cm.set_f1(gt_attr("q1_lookingFor", []), pred_attr("q1_lookingFor", [])),
        "q2_emotion_clarity_match": cm.option_match(
            gt_attr("q2_emotionClarity", None), pred_attr("q2_emotionClarity", None)
        ),
        "q3_model_fit_match": cm.option_match(gt_attr("q3_modelFit", None), pred_attr("q3_modelFit", None)),
        "q3_model_fit_ordinal_distance": cm.q3_ordinal_distance(
            gt_attr("q3_modelFit", None), pred_attr("q3_modelFit", None)
        ),
        "q3_follow_up_score": cm.fuzzy_list_f1(
            gt_attr("q3_followUp_whatFeltOff", []), pred_attr("q3_followUp_whatFeltOff", [])
        ),
        "four_branch_mae": four_mae,
        "four_branch_normalized": four_norm,
        "turns": turns,
    }
    values.update(composite_scores(values))
    record = {key: values[key] for key in CONVERSATION_KEYS}

    gap, alignment = hp_perspective(record["avg_binary_human_accuracy"], record["avg_binary_human_accuracy_hp"])
    pooled = {}
    for variant in BINARY_VARIANTS:
        counts = [0, 0, 0, 0]
        for t in turns:
            b = t[variant]
            counts[0] += b["tp"]
            counts[1] += b["fp"]
            counts[2] += b["tn"]
            counts[3] += b["fn"]
        pooled[variant] = dict(zip(("tp", "fp", "tn", "fn"), counts, strict=True))
    meta = prepared.conversation.metadata
    profile = prepared.conversation.participant_profile
    details = {
        "n_gt_turns": n_gt,
        "n_scored_turns": len(turns),
        **{
            k: panas[k]
            for k in (
                "panas_pa_error",
                "panas_na_error",
                "panas_pa_baseline_adjusted",
                "panas_na_baseline_adjusted",
                "panas_item_normalized",
                "panas_item_baseline_adjusted",
            )
        },
        "hp_perspective_gap": gap,
        "hp_perspective_alignment": alignment,
        "capabilities": capability_scores(record),
        "binary_counts": pooled,
        "category": meta.category,
        "original_model": meta.model,
        "participant_group": cat.participant_group(profile.consented_diagnoses() if profile else None),
    }
    return ConversationScore(
        record=ConversationRecord.model_validate(record), details=ConversationDetails.model_validate(details)
    )


# ---------------------------------------------------------------------------
# Many runs
# ---------------------------------------------------------------------------


@dataclass
class ScoringResult:
    """Scores of every matched run plus a problem for every run that was skipped."""

    scores: list[ConversationScore]
    skipped: list[Problem]

    def report(self, include_details: bool = False) -> ScoringReport:
        """The scoring report ({"conversations": [...], "aggregates": [...]} once serialised)."""
        records = [s.record for s in self.scores]
        conversations = (
            [s.record.model_copy(update={"details": s.details}) for s in self.scores] if include_details else records
        )
        return ScoringReport(conversations=conversations, aggregates=aggregate_rows(records))


@dataclass(frozen=True)
class ScoredPair:
    """A run scored against its conversation ahead of ``score_runs`` (``score_pair``), with the objects it was
    made from, so it is used only for exactly them."""

    conversation: ConversationFile
    run: RunOutput
    score: ConversationScore


def score_pair(conversation: ConversationFile, run: RunOutput) -> ScoredPair:
    """One conversation's score, made as its run arrives (a replay scores each as it finishes)."""
    return ScoredPair(conversation, run, score_conversation_output(prepare_conversation(conversation), run))


def score_runs(
    conversations: Iterable[ConversationFile],
    runs: Iterable[RunOutput],
    run_sources: Sequence[str] | None = None,
    precomputed: Mapping[str, ScoredPair] | None = None,
) -> ScoringResult:
    """Match runs to conversations and score each; unmatched or duplicate runs are skipped.

    ``run_sources`` (parallel to ``runs``) names each run in skip messages; by
    default a run is named by conversation id, EM and mode. When two
    conversations share an id the first wins and runs are scored against it.
    ``precomputed`` holds scores already made by ``score_pair``, by conversation
    id: one is used only for the very conversation and run objects it was made
    from (a conversation's score depends on nothing else), so the result is the
    same as scoring them here.
    """
    documents: dict[str, ConversationFile] = {}
    prepared: dict[str, PreparedConversation] = {}
    skipped: list[Problem] = []
    for conversation in conversations:
        if conversation.conversationId in documents:
            skipped.append(
                Problem(
                    source=conversation.conversationId,
                    path="conversationId",
                    message="a conversation with this id was already read; this copy is ignored",
                )
            )
            continue
        documents[conversation.conversationId] = conversation
        known = (precomputed or {}).get(conversation.conversationId)
        if known is None or known.conversation is not conversation:  # scored already: not prepared again
            prepared[conversation.conversationId] = prepare_conversation(conversation)

    scores: list[ConversationScore] = []
    seen: set[tuple[str, str, str]] = set()
    for i, run in enumerate(runs):
        source = run_sources[i] if run_sources is not None else f"{run.conversationId}/{run.em_model}/{run.mode}"
        document = documents.get(run.conversationId)
        if document is None:
            skipped.append(
                Problem(
                    source=source,
                    path="conversationId",
                    message=f"no conversation {run.conversationId!r} was found; run skipped",
                )
            )
            continue
        key = (run.conversationId, run.em_model, run.mode)
        if key in seen:
            skipped.append(
                Problem(
                    source=source,
                    path="",
                    message=f"a run for ({run.conversationId}, {run.em_model}, {run.mode}) was already scored; "
                    "duplicate skipped",
                )
            )
            continue
        seen.add(key)
        known = (precomputed or {}).get(run.conversationId)
        if known is not None and known.run is run and known.conversation is document:
            scores.append(known.score)
        else:
            if run.conversationId not in prepared:
                prepared[run.conversationId] = prepare_conversation(document)
            scores.append(score_conversation_output(prepared[run.conversationId], run))
    scores.sort(key=lambda s: (s.record.em_model, s.record.mode, s.record.conversationId))
    return ScoringResult(scores=scores, skipped=skipped)


class UnmatchedRunsError(ValueError):
    """Raised by :func:`score_documents` when some runs could not be scored."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def score_documents(
    conversations: list[ConversationFile], runs: list[RunOutput], include_details: bool = False
) -> ScoringReport:
    """Score runs against conversations; the entry point for scripts and benchmarks.

    Returns the report whose JSON (``results.to_json``) is ``{"conversations":
    [...], "aggregates": [...]}`` with exactly the keys of keys.py (plus a
    ``details`` object per conversation when asked).
    Raises :class:`UnmatchedRunsError` if a run names a missing conversation or
    duplicates another run, because a silently smaller leaderboard would mislead;
    use :func:`score_runs` to skip such runs instead.
    """
    result = score_runs(conversations, runs)
    if result.skipped:
        raise UnmatchedRunsError(result.skipped)
    return result.report(include_details=include_details)
