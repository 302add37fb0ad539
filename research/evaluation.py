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
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from django.core.cache import cache
from django.db.models import Count, Max, Q, QuerySet
from pydantic import ValidationError

from attunebench import catalogue as cat
from attunebench.metrics.aggregate import aggregate_rows, mean_or_none, standard_error
from attunebench.metrics.composite import CAPABILITY_TITLES, LEADERBOARD_CAPABILITIES
from attunebench.metrics.keys import CONVERSATION_KEYS
from attunebench.metrics.report import leaderboard_rows as core_leaderboard_rows
from attunebench.metrics.results import (
    Analysis,
    ConversationDetails,
    ConversationRecord,
    LeaderboardRow,
    ScoringReport,
    row_label,
)
from collection.models import Conversation, SensitiveProfile
from datasets.exchange import withdrawn_conversations
from scoring.models import ConversationScore, EvaluatedModel, EvaluationRun, RunScore

N_BOOTSTRAP = 1000
CACHE_VERSION = 3  # part of the cache key: bump when the cached report or analysis changes shape
Z_95 = 1.959964

SORT_KEYS = ("composite", "label", "n", "coverage", "post_coverage", "cost", *LEADERBOARD_CAPABILITIES)
# Added to the scorer's record after scores were first stored: older stored records may lack them.
POST_KEYS = ("post_coverage", "holistic_imputed")


@dataclass
class EvaluationData:
    """Everything the dashboard draws, computed once per set of scored runs."""

    runs: list[EvaluationRun]
    report: ScoringReport
    analysis: Analysis | None
    skipped: list[str] = field(default_factory=list)

    @property
    def run_by_label(self) -> dict[str, EvaluationRun]:
        return {row_label(r.evaluated_model.name, r.mode): r for r in self.runs}


def leaderboard_runs(dataset_version_id: int | None = None) -> list[EvaluationRun]:
    """One run per (EM, mode): the newest with scores.

    Model runs count once finished (done); human-baseline runs count as soon as
    a conversation is scored, because raters finish conversations one by one.
    Restricting to a dataset version compares models on the same conversations.
    """
    queryset = (
        EvaluationRun.objects.select_related("evaluated_model", "judge_model", "dataset_version")
        .annotate(n_scores=Count("conversation_scores"))
        .filter(n_scores__gt=0)
        .filter(Q(status=EvaluationRun.Status.DONE) | Q(evaluated_model__kind=EvaluatedModel.Kind.HUMAN))
        .order_by("-created_at", "-pk")
    )
    if dataset_version_id:
        queryset = queryset.filter(dataset_version_id=dataset_version_id)
    chosen: dict[tuple[str, str], EvaluationRun] = {}
    for run in queryset:
        chosen.setdefault((run.evaluated_model.name, run.mode), run)
    return sorted(chosen.values(), key=lambda r: (r.evaluated_model.name, r.mode))


def conversation_info(conversation_pks: Iterable[int]) -> dict[int, dict[str, Any]]:
    """pk -> conversationId, category, original model, participant group, GT turn count."""
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
    diagnoses = dict(
        SensitiveProfile.objects.filter(participant_id__in={r[5] for r in rows if r[5]}).values_list(
            "participant_id", "diagnoses"
        )
    )
    return {
        pk: {
            "conversationId": cid,
            "category": category,
            "original_model": name or alias,
            "participant_group": cat.participant_group(diagnoses.get(participant)),
            "n_gt_turns": n_turns,
        }
        for pk, cid, category, alias, name, participant, n_turns in rows
    }


def stored_record(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    """The scorer's record inside a stored ConversationScore.metrics (top level, or under 'record')."""
    inner = metrics.get("record")
    return inner if isinstance(inner, Mapping) else metrics


def build_report(runs: Sequence[EvaluationRun]) -> tuple[ScoringReport, list[str]]:
    """The scorer's report over the runs' stored scores, each record carrying DB details.

    A stored record missing keys the scorer defines, or holding a value of the
    wrong type, is skipped with a message rather than crashing the dashboard:
    it was written by an older scorer.
    """
    run_by_pk = {r.pk: r for r in runs}
    scores = list(_current_scores(runs).values_list("run_id", "conversation_id", "metrics", "post_coverage"))
    info = conversation_info({s[1] for s in scores})
    records: list[ConversationRecord] = []
    skipped: list[str] = []
    required = set(CONVERSATION_KEYS) - {"conversationId", "em_model", "mode", *POST_KEYS}
    for run_pk, conversation_pk, metrics, post_coverage in scores:
        run = run_by_pk[run_pk]
        meta = info.get(conversation_pk, {})
        stored = stored_record(metrics or {})
        where = f"run {run_pk}, conversation {meta.get('conversationId')}"
        missing = required - stored.keys()
        if missing:
            skipped.append(f"{where}: stored score lacks {', '.join(sorted(missing))}")
            continue
        stored_details = stored.get("details")
        details = {k: v for k, v in (stored_details or {}).items() if k in ConversationDetails.model_fields}
        details.update({k: meta.get(k) for k in ("category", "original_model", "participant_group", "n_gt_turns")})
        fields = {k: stored[k] for k in CONVERSATION_KEYS if k in stored}
        fields.update(
            {
                "conversationId": meta.get("conversationId", str(conversation_pk)),
                "em_model": run.evaluated_model.name,
                "mode": run.mode,
                # The column is what the scorer reported; None means "not known" for a score stored before it existed.
                "post_coverage": post_coverage,
                "details": details,
            }
        )
        try:
            records.append(ConversationRecord.model_validate(fields))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
            skipped.append(f"{where}: stored score does not read as a record ({problems})")
    records.sort(key=lambda r: (r.em_model, r.mode, r.conversationId))
    return ScoringReport(conversations=records, aggregates=aggregate_rows(records)), skipped


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


def evaluation_data(dataset_version_id: int | None = None, n_bootstrap: int = N_BOOTSTRAP) -> EvaluationData:
    """Report and SPEC 6 analyses of the leaderboard runs, cached until any score changes."""
    runs = leaderboard_runs(dataset_version_id)
    if not runs:
        return EvaluationData(runs=[], report=ScoringReport(conversations=[], aggregates=[]), analysis=None)
    key = _cache_key(runs) + f":{n_bootstrap}:v{CACHE_VERSION}"
    cached = cache.get(key)
    if cached is None:
        from attunebench.metrics.analysis import analyze  # numpy/scipy: loaded only when a dashboard needs them

        report, skipped = build_report(runs)
        analysis = analyze(report, n_bootstrap=n_bootstrap) if report.conversations else None
        cached = {"report": report, "analysis": analysis, "skipped": skipped}
        cache.set(key, cached, timeout=600)
    return EvaluationData(runs=runs, report=cached["report"], analysis=cached["analysis"], skipped=cached["skipped"])


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
    """

    rank: int
    weighting: Literal["spec", "equal"]
    composite: float | None
    ci_low: float | None
    ci_high: float | None
    run: int | None
    cost: float | None


# Sort keys the page accepts -> the row field they sort by (capabilities are looked up in row.capabilities).
SORT_FIELDS = {
    "composite": "composite",
    "label": "label",
    "n": "n_conversations",
    "coverage": "coverage",
    "post_coverage": "post_coverage",
    "cost": "cost",
}


def leaderboard_rows(
    data: EvaluationData, weighting: str = "spec", sort: str = "composite", descending: bool = True
) -> list[DashboardRow]:
    """Rows of the leaderboard, one per (EM, mode).

    ``weighting='spec'`` shows the SPEC 5.3 composite with a percentile
    bootstrap CI over conversations; ``'equal'`` shows the equal-weight
    composite with a normal CI from its standard error.
    """
    if data.analysis is None:
        return []
    shown: Literal["spec", "equal"] = "equal" if weighting == "equal" else "spec"
    runs = data.run_by_label
    bootstrap_rows = {r.label: r for r in data.analysis.bootstrap.rows}
    by_row: dict[tuple[str, str], list[ConversationRecord]] = {}
    for record in data.report.conversations:
        by_row.setdefault((record.em_model, record.mode), []).append(record)
    rows: list[dict[str, Any]] = []
    for base in sorted(core_leaderboard_rows(data.report), key=lambda r: (r.em_model, r.mode)):
        run = runs.get(base.label)
        if shown == "equal":
            values = [r.equal_weight_composite for r in by_row.get((base.em_model, base.mode), [])]
            estimate = mean_or_none(values)
            low, high = _normal_ci(values)
        else:
            boot = bootstrap_rows.get(base.label)
            ci = boot.composite_score if boot else None
            estimate, low, high = (ci.estimate, ci.low, ci.high) if ci else (None, None, None)
        rows.append(
            {
                **dict(base),
                "weighting": shown,
                "composite": estimate,
                "ci_low": low,
                "ci_high": high,
                "run": run.pk if run else None,
                "cost": run.cost_usd if run else None,
            }
        )
    sort = sort if sort in SORT_KEYS else "composite"

    def key(row: dict[str, Any]) -> Any:
        value = row["capabilities"].capability(sort) if sort in LEADERBOARD_CAPABILITIES else row[SORT_FIELDS[sort]]
        if sort == "label":
            return value
        return -math.inf if value is None else value

    rows.sort(key=key, reverse=descending)
    return [DashboardRow(**row, rank=rank) for rank, row in enumerate(rows, start=1)]


def capability_columns() -> list[tuple[str, str]]:
    """(key, short column title); the full name is the column's tooltip and the chart's panel title."""
    return [(c, CAPABILITY_TITLES[c].split(" ")[0]) for c in LEADERBOARD_CAPABILITIES]
