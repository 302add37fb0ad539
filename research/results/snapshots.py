"""Frozen result snapshots: a named, immutable leaderboard with the manifest a paper needs to cite it.

A snapshot copies what the dashboard shows for one comparison (the ranked
rows, the rows apart, the human pairings, every leaderboard column and the
SPEC 6 analyses) together with a manifest: which runs (model, the endpoint it
was served at, mode, params, prompt version, PANAS strategy, judge, fresh calls
and repeat number), which conversations (ids, dataset
version and its content hash), which bootstrap (resamples, seed) and which
code version. Its id and content hash are what a reader cites.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction

from attunebench.catalogue import RESEARCH_ONLY_STATEMENT
from attunebench.metrics.results import to_json
from attunebench.names import name_problem
from attunebench.replay.cache import PROVIDER_ENDPOINT, normalise_endpoint
from attunebench.results_site import snapshot_digest
from research.models import ResultSnapshot
from research.results.charts import Chart
from research.results.evaluation import EvaluationData, apart_rows, leaderboard_rows
from research.results.figures import leaderboard_table
from scoring.run_provenance import code_version

MAX_NAME = 200


class SnapshotError(ValueError):
    """A snapshot that cannot be made (no scored rows, name taken or empty); the message says which."""


def snapshot_manifest(data: EvaluationData, weighting: str) -> dict[str, Any]:
    """Everything needed to reproduce the snapshot's numbers, as plain JSON."""
    analysis = data.analysis
    comparability = analysis.comparability if analysis else None
    versions = {r.dataset_version_id: r.dataset_version for r in data.runs if r.dataset_version_id}
    return {
        "research_only_statement": RESEARCH_ONLY_STATEMENT,
        "code_version": code_version(),
        "weighting": weighting,
        "conversation_set": data.current_set.key if data.current_set else None,
        "conversation_set_label": data.current_set.label if data.current_set else None,
        "compared_set": comparability.compared_set if comparability else None,
        "compared_conversations": list(data.reference),
        "min_conversations_for_ci": comparability.min_conversations_for_ci if comparability else None,
        "bootstrap": {
            "n_resamples": analysis.bootstrap.n_resamples if analysis else None,
            "seed": analysis.bootstrap.seed if analysis else None,
            "resampling": analysis.bootstrap.resampling if analysis else None,
        },
        "prior_baseline": analysis.bootstrap.prior_baseline if analysis else None,
        "dataset_versions": [
            {"id": v.pk, "name": v.name, "content_hash": v.content_hash, "conversation_count": v.conversation_count}
            for v in versions.values()
            if v is not None
        ],
        "runs": [
            {
                "id": r.pk,
                "model": r.evaluated_model.name,
                "kind": r.evaluated_model.kind,
                "litellm_model": r.evaluated_model.litellm_model,
                # Where the model was served (never a key): two checkpoints under one name differ here.
                "endpoint": normalise_endpoint(r.evaluated_model.api_base) or PROVIDER_ENDPOINT,
                "fresh_calls": r.fresh_calls,
                "repeat": r.repeat,
                "params": {k: v for k, v in (r.evaluated_model.params or {}).items() if k != "api_key_env"},
                "seed": (r.evaluated_model.params or {}).get("seed"),
                "mode": r.mode,
                "panas_strategy": r.panas_strategy,
                "prompt_version": r.prompt_version,
                "judge": r.judge_model.name if r.judge_model else None,
                "dataset_version": r.dataset_version_id,
                "selection": r.selection,
                "status": r.status,
                "conversations_total": r.conversations_total,
                "chosen": data.choice.get(r.pk),
                "created_at": r.created_at.isoformat(),
            }
            for r in data.runs
        ],
    }


def do_freeze_snapshot(
    name: str, description: str, data: EvaluationData, weighting: str = "spec", user: Any = None
) -> ResultSnapshot:
    """Freeze the comparison ``data`` shows under ``name``; refuses an empty comparison or a taken name."""
    name = name.strip()
    if not name:
        raise SnapshotError("Give the snapshot a name.")
    problem = name_problem(name)
    if problem:
        raise SnapshotError(problem)
    if len(name) > MAX_NAME:
        raise SnapshotError(f"The name is {len(name)} characters; at most {MAX_NAME}.")
    if data.analysis is None:
        raise SnapshotError("Nothing is scored on this comparison set: there is nothing to freeze.")
    comparability = data.analysis.comparability
    leaderboard = {
        "rows": [to_json(r) for r in leaderboard_rows(data, weighting=weighting)],
        "apart": [to_json(r) for r in apart_rows(data, weighting=weighting)],
        "apart_reasons": [to_json(a) for a in comparability.apart] if comparability else [],
        "human_pairings": [to_json(h) for h in comparability.human_pairings] if comparability else [],
    }
    table = json.loads(json.dumps(leaderboard_table(data, weighting=weighting).table, default=str))
    manifest = snapshot_manifest(data, weighting)
    analysis = to_json(data.analysis)
    try:
        with transaction.atomic():
            return ResultSnapshot.objects.create(
                name=name,
                description=description,
                created_by=user if getattr(user, "is_authenticated", False) else None,
                manifest=manifest,
                leaderboard=leaderboard,
                table=table,
                analysis=analysis,
                content_sha256=snapshot_digest(manifest, leaderboard, table, analysis),
            )
    except IntegrityError:
        raise SnapshotError(
            f"A snapshot named {name!r} exists already; snapshots never change, pick a new name."
        ) from None


def snapshot_json(snapshot: ResultSnapshot) -> dict[str, Any]:
    """The citable document: id, name, hash, manifest, leaderboard and analyses."""
    return {
        "id": snapshot.pk,
        "name": snapshot.name,
        "description": snapshot.description,
        "created_at": snapshot.created_at.isoformat(),
        "created_by": snapshot.created_by.get_username() if snapshot.created_by else None,
        "content_sha256": snapshot.content_sha256,
        "manifest": snapshot.manifest,
        "leaderboard": snapshot.leaderboard,
        "analysis": snapshot.analysis,
    }


def snapshot_csv(snapshot: ResultSnapshot) -> str:
    """The frozen leaderboard CSV (every column), escaped like every figure's CSV."""
    return Chart("snapshot", snapshot.name, "", snapshot.table).csv()  # type: ignore[arg-type]
