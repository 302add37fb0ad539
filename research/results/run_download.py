"""A run's canonical outputs and manifest as one zip: what a reader needs to re-score or audit a run.

The archive holds ``manifest.json`` (run, model and its parameters without any key variable, mode, PANAS
strategy, judge, prompt version, seed, dataset version and its content hash, the conversation ids, the
code version) and one SPEC 3.2 run file per finished conversation under ``runs/`` (none of a withdrawn
participant's), in the byte-stable canonical text, so ``attune score`` / ``attune analyze`` read the
archive directly.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from attunebench import canonical as cf
from attunebench.catalogue import RESEARCH_ONLY_STATEMENT
from attunebench.replay.cache import PROVIDER_ENDPOINT, normalise_endpoint
from datasets.exchange import withdrawn_conversations
from scoring.models import EvaluationRun, RunConversation
from scoring.run_provenance import code_version

# A fixed timestamp inside the zip, so the same run always gives byte-identical archives.
ZIP_TIME = (2020, 1, 1, 0, 0, 0)


def run_manifest(run: EvaluationRun, conversation_ids: list[str], withdrawn: int) -> dict[str, Any]:
    model = run.evaluated_model
    params = {k: v for k, v in (model.params or {}).items() if k != "api_key_env"}
    version = run.dataset_version
    return {
        "document": cf.RUN_MANIFEST_DOCUMENT,  # so attune score / analyze / validate skip it, as a datasheet
        "research_only_statement": RESEARCH_ONLY_STATEMENT,
        "run": run.pk,
        "status": run.status,
        "model": model.name,
        "kind": model.kind,
        "litellm_model": model.litellm_model,
        # Where the model was served (never a key): two checkpoints under one name differ here.
        "endpoint": normalise_endpoint(model.api_base) or PROVIDER_ENDPOINT,
        "fresh_calls": run.fresh_calls,
        "repeat": run.repeat,
        "params": params,
        "seed": params.get("seed"),
        "mode": run.mode,
        "panas_strategy": run.panas_strategy,
        "judge": run.judge_model.name if run.judge_model else None,
        "prompt_version": run.prompt_version,
        "selection": run.selection,
        "dataset_version": {"id": version.pk, "name": version.name, "content_hash": version.content_hash}
        if version
        else None,
        "conversations_total": run.conversations_total,
        "conversations_done": run.conversations_done,
        "conversations_failed": run.conversations_failed,
        "conversations": conversation_ids,
        # Outputs of participants who withdrew are left out of the archive; the run's counts above still hold them.
        "conversations_withdrawn": withdrawn,
        "calls_made": run.calls_made,
        "calls_recovered": run.calls_recovered,
        "calls_reused": run.calls_reused,
        "calls_cached": run.calls_cached,
        "calls_failed": run.calls_failed,
        "cost_usd": run.cost_usd,
        "cost_reused_usd": run.cost_reused_usd,
        "cost_total_usd": run.cost_total_usd,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "code_version": code_version(),
        # Where the run was started (launcher, API or attune eval), by whom, with which code and settings.
        "origin": run.origin,
        "provenance": run.provenance,
    }


def run_archive(run: EvaluationRun) -> bytes:
    """The zip of ``run``: manifest.json and runs/<conversationId>.json for every finished conversation.

    A withdrawn participant's outputs are not in it (the model's predictions are about their words), so
    ``attune score`` on the archive gives the run's published scores, which leave them out too.
    """
    finished = RunConversation.objects.filter(run=run, status=RunConversation.Status.DONE, output__isnull=False)
    withdrawn = finished.filter(conversation__in=withdrawn_conversations())
    outputs = list(
        finished.exclude(pk__in=withdrawn.values("pk"))
        .order_by("conversation__conversation_id")
        .values_list("conversation__conversation_id", "output")
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        manifest = run_manifest(run, [cid for cid, _ in outputs], withdrawn=withdrawn.count())
        text = json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        bundle.writestr(zipfile.ZipInfo("manifest.json", ZIP_TIME), text)
        for conversation_id, output in outputs:
            if not isinstance(output, dict):
                continue  # filtered out by the query; the check keeps the type exact
            bundle.writestr(zipfile.ZipInfo(f"runs/{conversation_id}.json", ZIP_TIME), cf.dumps_canonical(output))
    return buffer.getvalue()
