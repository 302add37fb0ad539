"""The evaluation dashboard's data: which runs form the leaderboard, their report and analyses.

The database holds one ConversationScore per (run, conversation) whose
``metrics`` is the scorer's per-conversation record (SPEC 5). This module turns
the chosen runs back into the scorer's report shape and hands it to
``attunebench.metrics.analysis.analyze``, so the dashboard, the API and the
``attune analyze`` command all compute SPEC 6 the same way. Conversation
metadata (topic, original model, participant group, turn count) comes from the
database, not from the stored scores, so breakdowns also work for scores
stored without details.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from django.core.cache import cache
from django.db.models import Count, Max, Q, QuerySet, TextField
from django.db.models.functions import Cast
from pydantic import ConfigDict, Field, ValidationError

from attunebench import catalogue as cat
from attunebench.metrics.aggregate import aggregate_rows, mean_or_none, standard_error
from attunebench.metrics.comparison import DEFAULT_BOOTSTRAP, ci_allowed, split_comparable
from attunebench.metrics.composite import CAPABILITY_TITLES, LEADERBOARD_CAPABILITIES
from attunebench.metrics.keys import CONVERSATION_KEYS
from attunebench.metrics.report import leaderboard_rows as core_leaderboard_rows
from attunebench.metrics.results import (
    Analysis,
    Comparability,
    ConversationDetails,
    ConversationRecord,
    LeaderboardRow,
    ScoringReport,
    SkillIntervals,
    row_label,
)
from collection.models import Conversation
from datasets.exchange import consented_diagnoses, withdrawn_conversations
from scoring.models import ConversationScore, EvaluatedModel, EvaluationRun, RunScore

# One statistics path: the dashboard and the API use the core's resample count and seed, as
# ``attune analyze`` does by default, so the same runs give the same intervals everywhere.
N_BOOTSTRAP = DEFAULT_BOOTSTRAP
CACHE_VERSION = 8  # part of the cache key: bump when the cached report or analysis changes shape
# How long a page's own computation stays cached; the precompute on score change keeps its entry longer
# (research.results.precompute). Either way an entry is never stale: its key changes with the scores.
CACHE_SECONDS = 600
Z_95 = 1.959964

SORT_KEYS = ("composite", "skill", "label", "n", "coverage", "post_coverage", "cost", *LEADERBOARD_CAPABILITIES)
# Added to the scorer's record after scores were first stored: older stored records may lack them.
POST_KEYS = ("post_coverage", "holistic_imputed")

LIVE = "live"  # set key of runs launched on the live selection (no dataset version)

RUN_CHOICE_TEXT: dict[str, str] = {
    "latest complete": "the latest run that scored every conversation of its selection (never a smaller run)",
    "pinned": "chosen explicitly (run= in the address)",
    "incomplete": "no run scored its whole selection: the largest partial run is shown",
    "human": "a human rater's run (rated conversation by conversation)",
}


class SelectionError(ValueError):
    """A comparison set or pinned run that does not exist or cannot be shown; the message says which."""


class PoolError(SelectionError):
    """A name to pool in the breakdowns that is not a compared row or model; the message lists the rows."""


@dataclass(frozen=True)
class ConversationSet:
    """A dataset version (or the live data) and the topic selection runs were launched on."""

    key: str  # "v<dataset version id>" or "live", then ":Cat1,Cat2" when restricted to topics
    label: str
    n_rows: int  # (model, mode) rows with a scored run on this selection
    newest: Any  # creation time of its newest run, for the default choice


def set_key(run: EvaluationRun) -> str:
    """The comparison set a run belongs to: its dataset version (or the live data) and its topic selection."""
    base = f"v{run.dataset_version_id}" if run.dataset_version_id else LIVE
    selection = run.selection if isinstance(run.selection, dict) else {}
    categories = sorted(str(c) for c in selection.get("topic_categories") or [])
    return base + (":" + ",".join(categories) if categories else "")


def _set_label(run: EvaluationRun) -> str:
    version = f"dataset {run.dataset_version.name}" if run.dataset_version else "live conversations (no version)"
    selection = run.selection if isinstance(run.selection, dict) else {}
    categories = sorted(str(c) for c in selection.get("topic_categories") or [])
    return version + (" · " + ", ".join(categories) if categories else " · all topics")


@dataclass
class EvaluationData:
    """Everything the dashboard draws, computed once per set of scored runs.

    What is cached is what the pages show, never the scored records, in two entries: a small one read
    on every load (the leaderboard rows of the compared set and of the rows apart under either
    weighting in ``board``, the models for the colours, how many records there were, the compared
    conversations, the bootstrap's settings) and the SPEC 6 analyses (``analysis``), read only when
    something needs them, such as a page whose rendered HTML is not cached yet (``key`` names both).
    Neither grows with the conversations, only with the rows compared.
    """

    runs: list[EvaluationRun]
    skipped: list[str] = field(default_factory=list)
    sets: list[ConversationSet] = field(default_factory=list)
    current_set: ConversationSet | None = None
    choice: dict[int, str] = field(default_factory=dict)  # run pk -> how it was chosen (RUN_CHOICE_TEXT key)
    board: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)  # part -> weighting -> rows
    models: list[str] = field(default_factory=list)
    n_records: int = 0
    reference: tuple[str, ...] = ()  # sorted conversation ids of the compared set
    n_resamples: int | None = None
    seed: int | None = None
    prior_baseline: str | None = None
    comparability: Comparability | None = None  # the analyses' small part the leaderboard API reads
    has_analysis: bool = False
    key: str = ""  # the cache key of this comparison's entries ("" when nothing is scored)
    load_analysis: Callable[[], Analysis | None] | None = field(default=None, repr=False)
    _analysis: Analysis | None = field(default=None, repr=False)

    @property
    def analysis(self) -> Analysis | None:
        """The SPEC 6 analyses, read from their cache entry (or recomputed) on first use."""
        if self._analysis is None and self.has_analysis and self.load_analysis is not None:
            self._analysis = self.load_analysis()
        return self._analysis

    @property
    def run_by_label(self) -> dict[str, EvaluationRun]:
        return {row_label(r.evaluated_model.name, r.mode): r for r in self.runs}


def _scored_runs() -> list[EvaluationRun]:
    """Every run with at least one score that may be shown: finished model runs, and human runs as they fill."""
    return list(
        EvaluationRun.objects.select_related("evaluated_model", "judge_model", "dataset_version")
        .annotate(n_scores=Count("conversation_scores"))
        .filter(n_scores__gt=0)
        .filter(Q(status=EvaluationRun.Status.DONE) | Q(evaluated_model__kind=EvaluatedModel.Kind.HUMAN))
        .order_by("-created_at", "-pk")
    )


def _is_human(run: EvaluationRun) -> bool:
    return run.evaluated_model.kind == EvaluatedModel.Kind.HUMAN


def _complete(run: EvaluationRun) -> bool:
    n_scores: int = getattr(run, "n_scores", 0)
    return n_scores >= run.conversations_total > 0 and run.conversations_failed == 0


def comparison_sets(runs: Sequence[EvaluationRun]) -> list[ConversationSet]:
    """The selections model runs were made on, most (model, mode) rows first, then newest."""
    rows: dict[str, set[tuple[str, str]]] = {}
    first: dict[str, EvaluationRun] = {}
    for run in runs:
        if _is_human(run):
            continue
        key = set_key(run)
        rows.setdefault(key, set()).add((run.evaluated_model.name, run.mode))
        first.setdefault(key, run)  # runs come newest first
    sets = [
        ConversationSet(key=k, label=_set_label(first[k]), n_rows=len(v), newest=first[k].created_at)
        for k, v in rows.items()
    ]
    sets.sort(key=lambda s: (-s.n_rows, -s.newest.timestamp(), s.key))
    return sets


def choose_set(
    sets: Sequence[ConversationSet], key: str | None = None, dataset_version_id: int | None = None
) -> ConversationSet | None:
    """The set asked for; else the dataset version's set with most rows; else the set with most rows."""
    if key:
        for s in sets:
            if s.key == key:
                return s
        raise SelectionError(f"no scored runs on set {key!r}; known sets: {', '.join(s.key for s in sets) or 'none'}")
    if dataset_version_id is not None:
        prefix = f"v{dataset_version_id}"
        matching = [s for s in sets if s.key == prefix or s.key.startswith(prefix + ":")]
        return matching[0] if matching else None
    return sets[0] if sets else None


def leaderboard_runs(
    dataset_version_id: int | None = None, set_key_: str | None = None, pinned: Sequence[int] = ()
) -> tuple[list[EvaluationRun], dict[int, str], list[ConversationSet], ConversationSet | None]:
    """One run per (EM, mode) on one comparison set, chosen explicitly, plus every human rater's run.

    Default per row: the newest run that scored its whole selection; among
    several, the one with most scored conversations first, so a small test run
    never replaces a full one. Without a complete run, the largest partial run
    is shown (and, being on another conversation set, ends up apart). A pinned
    run (``pinned`` run ids) replaces the default of its (EM, mode).
    """
    runs = _scored_runs()
    sets = comparison_sets(runs)
    current = choose_set(sets, set_key_, dataset_version_id)
    by_pk = {r.pk: r for r in runs}
    chosen: dict[tuple[str, str], EvaluationRun] = {}
    choice: dict[int, str] = {}
    for run in runs:
        if _is_human(run):
            key = (run.evaluated_model.name, run.mode)
            if key not in chosen:
                chosen[key] = run
                choice[run.pk] = "human"
    candidates: dict[tuple[str, str], list[EvaluationRun]] = {}
    for run in runs:
        if not _is_human(run) and current is not None and set_key(run) == current.key:
            candidates.setdefault((run.evaluated_model.name, run.mode), []).append(run)
    for key, group in candidates.items():
        best = max(group, key=lambda r: (_complete(r), getattr(r, "n_scores", 0), r.created_at, r.pk))
        chosen[key] = best
        choice[best.pk] = "latest complete" if _complete(best) else "incomplete"
    for pk in pinned:
        pinned_run = by_pk.get(pk)
        if pinned_run is None:
            raise SelectionError(f"run {pk} has no scores or is not finished, so it cannot be shown")
        key = (pinned_run.evaluated_model.name, pinned_run.mode)
        if key in chosen:
            choice.pop(chosen[key].pk, None)
        chosen[key] = pinned_run
        choice[pinned_run.pk] = "pinned"
    ordered = sorted(chosen.values(), key=lambda r: (r.evaluated_model.name, r.mode))
    return ordered, choice, sets, current


def conversation_info(conversation_pks: Iterable[int], model_identity: bool = False) -> dict[int, dict[str, Any]]:
    """pk -> conversationId, category, original model, participant group (under recorded consent), GT turn count.

    The original model is its alias, as exports write it, unless ``model_identity`` asks for its real name.
    """
    rows = list(
        Conversation.objects.filter(pk__in=list(conversation_pks))
        .annotate(n_turns=Count("turns"))
        .values_list(
            "pk",
            "conversation_id",
            "topic__category",
            "original_model__alias",
            "original_model__name",
            "participant_id",
            "n_turns",
        )
    )
    # SPEC 2.5: a diagnosis counts only where consent is recorded, exactly as the export writes it.
    diagnoses = consented_diagnoses({r[5] for r in rows if r[5]})
    return {
        pk: {
            "conversationId": cid,
            "category": category,
            "original_model": (name or alias) if model_identity else alias,
            "participant_group": cat.participant_group(diagnoses.get(participant)),
            "n_gt_turns": n_turns,
        }
        for pk, cid, category, alias, name, participant, n_turns in rows
    }


def stored_record(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scorer's record inside a stored ConversationScore.metrics (top level, or under 'record')."""
    inner = metrics.get("record")
    return inner if isinstance(inner, Mapping) else metrics


DB_DETAILS = ("category", "original_model", "participant_group", "n_gt_turns")  # read from the database, not the score


def build_report(runs: Sequence[EvaluationRun], model_identity: bool = False) -> tuple[ScoringReport, list[str]]:
    """The scorer's report over the runs' stored scores, each record carrying DB details.

    A stored record missing keys the scorer defines, or holding a value of the
    wrong type, is skipped with a message rather than crashing the dashboard:
    it was written by an older scorer.

    Each stored record is read as JSON text and validated from it in one pass
    (:func:`_record_from_text`); decoding it into Python objects first and
    validating those cost three times as much, and at thousands of
    conversations × dozens of rows that was most of a first computation.
    A record that does not read that way (stored by an older scorer) takes the
    tolerant path, :func:`_record_from_stored`.
    """
    run_by_pk = {r.pk: r for r in runs}
    scores = list(
        _current_scores(runs)
        .annotate(metrics_text=Cast("metrics", output_field=TextField()))
        .values_list("run_id", "conversation_id", "metrics_text", "post_coverage")
    )
    info = conversation_info({s[1] for s in scores}, model_identity)
    records: list[ConversationRecord] = []
    skipped: list[str] = []
    for run_pk, conversation_pk, text, post_coverage in scores:
        run = run_by_pk[run_pk]
        meta = info.get(conversation_pk, {})
        identity = {
            "conversationId": meta.get("conversationId", str(conversation_pk)),
            "em_model": run.evaluated_model.name,
            "mode": run.mode,
            # The column is what the scorer reported; None means "not known" for a score stored before it existed.
            "post_coverage": post_coverage,
        }
        record = _record_from_text(text, identity, meta)
        if record is None:
            where = f"run {run_pk}, conversation {meta.get('conversationId')}"
            stored = stored_record(json.loads(text) if text else {})
            record = _record_from_stored(stored, identity, meta, where, skipped)
        if record is not None:
            records.append(record)
    records.sort(key=lambda r: (r.em_model, r.mode, r.conversationId))
    return ScoringReport(conversations=records, aggregates=aggregate_rows(records)), skipped


def _record_from_text(
    text: str | None, identity: Mapping[str, Any], meta: Mapping[str, Any]
) -> ConversationRecord | None:
    """The record of a stored score written whole by the current scorer, validated from its JSON text; else None.

    The same record :func:`_record_from_stored` makes of it: the stored keys validated as the record's,
    then the run's identity and the database's details put in their place.
    """
    if not text:
        return None
    try:
        record = ConversationRecord.model_validate_json(text)
    except ValidationError:
        return None
    stored_details = record.details.model_dump(exclude_unset=True) if record.details else {}
    details = ConversationDetails.model_validate({**stored_details, **{k: meta.get(k) for k in DB_DETAILS}})
    return record.model_copy(update={**identity, "details": details})


def _record_from_stored(
    stored: Mapping[str, Any], identity: Mapping[str, Any], meta: Mapping[str, Any], where: str, skipped: list[str]
) -> ConversationRecord | None:
    """The record of a stored score of any scorer's version, or None with the reason in ``skipped``."""
    required = set(CONVERSATION_KEYS) - {"conversationId", "em_model", "mode", *POST_KEYS}
    missing = required - stored.keys()
    if missing:
        skipped.append(f"{where}: stored score lacks {', '.join(sorted(missing))}")
        return None
    stored_details = stored.get("details")
    details = {k: v for k, v in (stored_details or {}).items() if k in ConversationDetails.model_fields}
    details.update({k: meta.get(k) for k in DB_DETAILS})
    fields = {k: stored[k] for k in CONVERSATION_KEYS if k in stored}
    fields.update({**identity, "details": details})
    try:
        return ConversationRecord.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        skipped.append(f"{where}: stored score does not read as a record ({problems})")
        return None


def _current_scores(runs: Sequence[EvaluationRun]) -> QuerySet[ConversationScore]:
    """Scores of the runs, without any of a withdrawn conversation.

    Withdrawal re-scores the runs (scoring/withdrawal.py); until that has run, a
    withdrawn conversation's stored score is still left out here, and the cache
    key (which counts these rows) changes at once.
    """
    return ConversationScore.objects.filter(run__in=runs).exclude(
        conversation_id__in=withdrawn_conversations().values("pk")
    )


def _cache_key(runs: Sequence[EvaluationRun]) -> str:
    stamps = _current_scores(runs).values("run_id").annotate(n=Count("id"), last=Max("id")).order_by("run_id")
    # Re-scoring updates rows in place (same ids and count): the newest scoring time tells it apart.
    scored = RunScore.objects.filter(run__in=runs).aggregate(last=Max("scored_at"))["last"]
    text = "|".join(f"{s['run_id']}:{s['n']}:{s['last']}" for s in stamps) + f"|{scored}"
    return "research:evaluation:" + hashlib.sha256(text.encode()).hexdigest()


def evaluation_data(
    dataset_version_id: int | None = None,
    n_bootstrap: int = N_BOOTSTRAP,
    *,
    set_key: str | None = None,
    pinned: Sequence[int] = (),
    pool: Sequence[str] = (),
    model_identity: bool = False,
    cache_seconds: int = CACHE_SECONDS,
) -> EvaluationData:
    """Report and SPEC 6 analyses of the chosen runs on one comparison set, cached until any score changes.

    ``pool`` names the rows (``model [mode]``) or models the breakdowns' pooled lines average;
    empty means the core's default (every model row, baselines apart). Original models are named by their
    aliases, as exports name them, unless ``model_identity`` asks for their real names. Raises SelectionError
    for an unknown set, an unusable pinned run or a pooled name that is not a compared row.
    """
    runs, choice, sets, current = leaderboard_runs(dataset_version_id, set_key, pinned)
    if not runs:
        return EvaluationData(runs=[], sets=sets, current_set=current)
    pool = sorted(set(pool))
    pool_key = hashlib.sha256("\n".join(pool).encode()).hexdigest()[:16]
    names = "names" if model_identity else "aliases"
    key = _cache_key(runs) + f":{n_bootstrap}:{pool_key}:{names}:v{CACHE_VERSION}"
    analysis_key = key + ":analysis"

    def compute() -> tuple[dict[str, Any], Analysis | None]:
        from attunebench.metrics.analysis import analyze  # numpy/scipy: loaded only when a dashboard needs them

        report, skipped = build_report(runs, model_identity)
        try:
            analysis = analyze(report, n_bootstrap=n_bootstrap, pool=pool) if report.conversations else None
        except ValueError as exc:  # a pooled name that is not a compared row
            raise PoolError(str(exc)) from None
        # The split pools every record (linear in the study): computed once with the analyses, not per page.
        split = split_comparable(report)
        summary = {
            "skipped": skipped,
            "board": {
                part: {w: _board_rows(analysis, records, w, apart=part == "apart") for w in WEIGHTINGS}
                for part, records in (("compared", split.compared), ("apart", split.apart))
            },
            "models": sorted({r.em_model for r in report.conversations}),
            "n_records": len(report.conversations),
            "reference": tuple(split.reference),
            "n_resamples": analysis.bootstrap.n_resamples if analysis else None,
            "seed": analysis.bootstrap.seed if analysis else None,
            "prior_baseline": analysis.bootstrap.prior_baseline if analysis else None,
            "comparability": analysis.comparability if analysis else None,
            "has_analysis": analysis is not None,
        }
        # The analyses first: a reader that finds the summary finds them too (unless evicted, then recomputed).
        cache.set(analysis_key, analysis, timeout=cache_seconds)
        cache.set(key, summary, timeout=cache_seconds)
        return summary, analysis

    def load_analysis() -> Analysis | None:
        found = cache.get(analysis_key)
        return found if found is not None else compute()[1]

    summary = cache.get(key)
    analysis = None
    if summary is None:
        summary, analysis = compute()
    return EvaluationData(
        runs=runs,
        skipped=summary["skipped"],
        sets=sets,
        current_set=current,
        choice=choice,
        board=summary["board"],
        models=summary["models"],
        n_records=summary["n_records"],
        reference=summary["reference"],
        n_resamples=summary["n_resamples"],
        seed=summary["seed"],
        prior_baseline=summary["prior_baseline"],
        comparability=summary["comparability"],
        has_analysis=summary["has_analysis"],
        key=key,
        load_analysis=load_analysis,
        _analysis=analysis,
    )


# ---------------------------------------------------------------------------
# Leaderboard
# ---------------------------------------------------------------------------


def _normal_ci(values: Sequence[float]) -> tuple[float | None, float | None]:
    """mean ± 1.96·SE with SE = sample sd/√n (SPEC 5.4); None with fewer than 2 values."""
    se = standard_error(values)
    if se is None:
        return None, None
    m = math.fsum(values) / len(values)
    return m - Z_95 * se, m + Z_95 * se


class DashboardRow(LeaderboardRow):
    """A leaderboard row as the dashboard, its chart and the API show it: the core row plus web columns.

    ``composite`` is the composite under the chosen weighting with its 95% CI
    (``ci_low``, ``ci_high``); ``run`` is the primary key of the row's run.
    The API's schema calls it LeaderboardRow (its title), the name clients know.
    """

    model_config = ConfigDict(title="LeaderboardRow")

    rank: int
    weighting: Literal["spec", "equal"]
    composite: float | None = Field(description="The composite under the chosen weighting.")
    ci_low: float | None = Field(description="Null below the minimum n for an interval (MIN_CONVERSATIONS_FOR_CI).")
    ci_high: float | None
    skill: SkillIntervals | None = Field(
        description="Skill over the prior baseline (1 perfect, 0 the prior) of the SPEC composite and each "
        "capability; null without a prior row."
    )
    run: int | None = Field(description="Primary key of the row's run.")
    run_choice: str | None = Field(
        description="How the row's run was chosen: latest complete, pinned, incomplete or human."
    )
    cost: float | None = Field(
        description="What every call of the row's run cost (USD), judge calls included, whichever run paid for "
        "them: cost_paid + cost_reused, so it does not depend on the order models were launched in."
    )
    cost_paid: float | None = Field(description="Of the cost, what the row's run paid the providers itself (USD).")
    cost_reused: float | None = Field(
        description="Of the cost, answers reused from the call cache, at what they cost when paid (USD)."
    )


# Sort keys the page accepts -> the row field they sort by (capabilities are looked up in row.capabilities).
SORT_FIELDS = {
    "composite": "composite",
    "skill": "skill",
    "label": "label",
    "n": "n_conversations",
    "coverage": "coverage",
    "post_coverage": "post_coverage",
    "cost": "cost",
}


WEIGHTINGS = ("spec", "equal")


def _board_rows(
    analysis: Analysis | None, report: ScoringReport, weighting: str, apart: bool = False
) -> list[dict[str, Any]]:
    """The leaderboard rows of one part of the report under one weighting, without their runs' columns.

    Computed with the analyses and cached with them: these are the only figures of the page that read
    the scored records. Compared rows under the SPEC weighting take the bootstrap's interval; under equal
    weights, and for rows apart (their own mean over their own conversations), a normal interval from
    their own standard error, at or above the minimum n.
    """
    shown: Literal["spec", "equal"] = "equal" if weighting == "equal" else "spec"
    bootstrap_rows = {r.label: r for r in analysis.bootstrap.rows} if analysis and not apart else {}
    by_row: dict[tuple[str, str], list[ConversationRecord]] = {}
    for record in report.conversations:
        by_row.setdefault((record.em_model, record.mode), []).append(record)
    rows: list[dict[str, Any]] = []
    for base in sorted(core_leaderboard_rows(report), key=lambda r: (r.em_model, r.mode)):
        boot = bootstrap_rows.get(base.label)
        records = by_row.get((base.em_model, base.mode), [])
        if shown == "equal" or apart:
            values = [r.equal_weight_composite if shown == "equal" else r.composite_score for r in records]
            estimate = mean_or_none(values)
            low, high = _normal_ci(values) if ci_allowed(len(values)) else (None, None)
        else:
            ci = boot.composite_score if boot else None
            estimate, low, high = (ci.estimate, ci.low, ci.high) if ci else (base.composite_score, None, None)
        rows.append(
            {
                **dict(base),
                "weighting": shown,
                "composite": estimate,
                "ci_low": low,
                "ci_high": high,
                # Rows apart get no skill: it is measured on the compared set (humans get it paired).
                "skill": boot.skill if boot else None,
            }
        )
    return rows


def _rows_of(data: EvaluationData, part: str, weighting: str) -> list[dict[str, Any]]:
    """The cached rows of ``part`` (compared or apart) with their runs' columns, which are read per request."""
    shown = "equal" if weighting == "equal" else "spec"
    runs = data.run_by_label
    rows = []
    for cached in data.board.get(part, {}).get(shown, []):
        run = runs.get(cached["label"])
        rows.append(
            {
                **cached,
                "run": run.pk if run else None,
                "run_choice": data.choice.get(run.pk) if run else None,
                "cost": run.cost_total_usd if run else None,
                "cost_paid": run.cost_usd if run else None,
                "cost_reused": run.cost_reused_usd if run else None,
            }
        )
    return rows


def leaderboard_rows(
    data: EvaluationData, weighting: str = "spec", sort: str = "composite", descending: bool = True
) -> list[DashboardRow]:
    """Ranked rows of the leaderboard: the (EM, mode) rows compared on one conversation set.

    ``weighting='spec'`` shows the SPEC 5.3 composite with a percentile
    bootstrap CI over conversations; ``'equal'`` shows the equal-weight
    composite with a normal CI from its standard error. Either CI is left out
    below MIN_CONVERSATIONS_FOR_CI conversations. Rows on another set are in
    :func:`apart_rows`, never ranked here.
    """
    rows = _rows_of(data, "compared", weighting)
    sort = sort if sort in SORT_KEYS else "composite"

    def key(row: dict[str, Any]) -> Any:
        if sort in LEADERBOARD_CAPABILITIES:
            value = row["capabilities"].capability(sort)
        elif sort == "skill":
            value = row["skill"].composite_score.estimate if row["skill"] else None
        else:
            value = row[SORT_FIELDS[sort]]
        if sort == "label":
            return value
        return -math.inf if value is None else value

    rows.sort(key=key, reverse=descending)
    return [DashboardRow(**row, rank=rank) for rank, row in enumerate(rows, start=1)]


def apart_rows(data: EvaluationData, weighting: str = "spec") -> list[DashboardRow]:
    """Rows scored on another conversation set (humans included), with their own n and no rank among the compared.

    Their composite is their own mean over their own conversations; they get
    an interval only at or above the minimum n (a normal one, from their own SE).
    """
    return [DashboardRow(**row, rank=0) for row in _rows_of(data, "apart", weighting)]


def capability_columns() -> list[tuple[str, str]]:
    """(key, short column title); the full name is the column's tooltip and the chart's panel title."""
    return [(c, CAPABILITY_TITLES[c].split(" ")[0]) for c in LEADERBOARD_CAPABILITIES]
