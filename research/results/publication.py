"""Publishing a study: a dataset folder from a frozen dataset version, and a static results site of snapshots.

The layout, card, Croissant metadata and checksums are the core's (``attunebench.publication`` and
``attunebench.results_site``); this module gathers what they describe from the database under the
rules every export follows: only the version's conversations whose participants have not withdrawn,
participant ids as pseudonyms, diagnoses only under recorded consent, original models by alias
unless the publisher names every one of them.
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import QuerySet
from django.template.loader import render_to_string
from django.utils import timezone

from annotation.quality import EXCLUSION_REASONS
from attunebench import canonical as cf
from attunebench import publication as pub
from attunebench import results_site as site
from attunebench.metrics.engine import score_runs
from attunebench.metrics.results import to_json
from collection.models import Conversation
from datasets.exchange import iter_canonical, withdrawn_conversations
from datasets.models import DatasetVersion
from datasets.selection import complete_conversations, selection_queryset
from datasets.versions import (
    PSEUDONYM_STATEMENT,
    WITHDRAWAL_STATEMENT,
    DatasetError,
    build_datasheet,
    do_freeze_dataset_version,
)
from research.models import ResultSnapshot
from research.results.evaluation import evaluation_data
from research.results.run_download import ZIP_TIME
from research.results.snapshots import SnapshotError, do_freeze_snapshot, snapshot_json
from scoring.models import EvaluationRun, RunConversation
from scoring.run_provenance import code_version


class PublishError(ValueError):
    """A publication that cannot be made; the message says what and where."""


@dataclass(frozen=True)
class PublishedDataset:
    out: Path
    version: DatasetVersion
    counts: dict[str, int]
    content_hash: str


def _fresh_name(prefix: str, taken: QuerySet[Any]) -> str:
    """``prefix-<UTC time>``, with a counter when two publications share a second (names are unique)."""
    base = f"{prefix}-{timezone.now().strftime('%Y-%m-%d-%H%M%S')}"
    name, n = base, 1
    while taken.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def check_model_identity(queryset: QuerySet[Conversation], named: list[str] | None) -> bool:
    """Whether to publish original models' real names: only when the publisher named every one of them.

    Naming them one by one (rather than one switch) makes publishing identities a deliberate act; a
    name that is not an original model of the data, or a model left unnamed, refuses with the aliases.
    """
    if not named:
        return False
    models = dict(queryset.values_list("original_model__alias", "original_model__name").distinct())
    real = {name for name in models.values() if name}
    unknown = sorted(set(named) - real)
    if unknown:
        raise PublishError(f"--model-identity names {', '.join(unknown)}: not an original model of this data")
    missing = sorted(alias for alias, name in models.items() if name and name not in named)
    if missing:
        raise PublishError(
            "publishing model identities needs every original model named with --model-identity; not named: "
            f"the models behind {', '.join(missing)}"
        )
    return True


def _recruitment(queryset: QuerySet[Conversation], note: str) -> str:
    sources = Counter(queryset.values_list("source", flat=True))
    studies = sorted(
        {s for s in queryset.values_list("participant__study__title", flat=True) if s},
    )
    parts = []
    if sources.get("collected"):
        where = f" (studies: {', '.join(studies)})" if studies else ""
        parts.append(f"{sources['collected']} conversation(s) collected through Attune's study links{where}")
    if sources.get("imported"):
        parts.append(f"{sources['imported']} imported from canonical conversation files")
    text = "; ".join(parts) or "no conversations"
    return f"{text}. {note.strip()}" if note.strip() else f"{text}."


def _run_outputs(run_ids: list[int], conversation_ids: set[str]) -> list[cf.RunOutput]:
    """The finished outputs of the named runs on the published conversations (never a withdrawn participant's)."""
    found = set(EvaluationRun.objects.filter(pk__in=run_ids).values_list("pk", flat=True))
    missing = sorted(set(run_ids) - found)
    if missing:
        raise PublishError(f"--runs: no evaluation run {', '.join(map(str, missing))}")
    outputs = (
        RunConversation.objects.filter(run_id__in=run_ids, status=RunConversation.Status.DONE, output__isnull=False)
        .exclude(conversation__in=withdrawn_conversations())
        .values_list("run_id", "conversation__conversation_id", "output")
    )
    runs = []
    for run_id, conversation_id, output in outputs:
        if conversation_id not in conversation_ids:
            continue  # the run covered conversations outside this version: they are not published
        try:
            runs.append(cf.parse_run(output, f"run {run_id} conversation {conversation_id}"))
        except cf.CanonicalError as exc:
            raise PublishError(f"run {run_id}: its stored output for {conversation_id} is not valid: {exc}") from exc
    return runs


def publish_dataset(
    out: str | Path,
    version_id: int | None = None,
    run_ids: list[int] | None = None,
    model_identity: list[str] | None = None,
    recruitment: str = "",
    license_id: str = "other",
    citation: str = "",
    url: str = "",
    user: Any = None,
) -> PublishedDataset:
    """Write a published dataset folder from a frozen version (a new one of every complete conversation by default)."""
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PublishError(f"--out {target} exists and is not an empty folder: give a new folder")
    if version_id is None:
        # Refuse before freezing anything: a refused publication leaves no version behind.
        identity = check_model_identity(complete_conversations(), model_identity)
        try:
            name = _fresh_name("published", DatasetVersion.objects.all())
            version = do_freeze_dataset_version(name, "Frozen for publication", user=user)
        except DatasetError as exc:
            raise PublishError(str(exc)) from exc
    else:
        found = DatasetVersion.objects.filter(pk=version_id).first()
        if found is None:
            raise PublishError(f"--version {version_id}: no such dataset version")
        version = found
    queryset = selection_queryset(dataset_version=version)
    if not queryset.exists():
        raise PublishError(f"dataset version {version.name!r} has no conversation left to publish")
    identity = check_model_identity(queryset, model_identity)
    documents = list(iter_canonical(queryset, include_model_identity=identity))
    runs = _run_outputs(run_ids, {d.conversationId for d in documents}) if run_ids else None
    records = None
    if runs is not None:
        result = score_runs(documents, runs)
        records = [to_json(r) for r in result.report().conversations]
    sheet = build_datasheet(version, "parquet", identity).data
    info = pub.Publication(
        name=version.name,
        content_hash=pub.content_hash(documents),
        frozen_content_hash=(version.content_hash_with_model_identity if identity else version.content_hash) or "",
        description=version.description,
        created_at=version.created_at.isoformat(),
        code_version=code_version(),
        consent_versions=sheet["consent_versions"],
        recruitment=_recruitment(queryset, recruitment),
        quality_exclusions={EXCLUSION_REASONS.get(k, k): v for k, v in sheet["quality_exclusions_by_reason"].items()},
        left_out={k: v for k, v in sheet["left_out"].items() if k != "not_selected"},
        participants=sheet["counts"]["participants"],
        diagnoses_published_for=(sheet["sensitive_data_consent"] or {}).get("participants_with_diagnoses", 0),
        model_identity=identity,
        license=license_id,
        url=url,
        citation=citation,
        withdrawal_statement=WITHDRAWAL_STATEMENT,
        pseudonym_statement=PSEUDONYM_STATEMENT,
    )
    tables = pub.build_tables(documents, runs, records)
    pub.write_publication(target, tables, info)
    return PublishedDataset(
        out=target,
        version=version,
        counts={name: table.num_rows for name, table in tables.items()},
        content_hash=info.content_hash,
    )


# ---------------------------------------------------------------------------
# Results site
# ---------------------------------------------------------------------------


def _snapshots(snapshot_ids: list[int] | None, user: Any) -> list[ResultSnapshot]:
    if not snapshot_ids:
        try:
            name = _fresh_name("published", ResultSnapshot.objects.all())
            return [do_freeze_snapshot(name, "Frozen for publication", evaluation_data(), user=user)]
        except SnapshotError as exc:
            raise PublishError(str(exc)) from exc
    found = {s.pk: s for s in ResultSnapshot.objects.filter(pk__in=snapshot_ids)}
    missing = [str(i) for i in snapshot_ids if i not in found]
    if missing:
        raise PublishError(f"--snapshot: no snapshot {', '.join(missing)}")
    return [found[i] for i in snapshot_ids]


def publish_results(
    out: str | Path, snapshot_ids: list[int] | None = None, dataset_dir: str | Path | None = None, user: Any = None
) -> list[ResultSnapshot]:
    """Write the static results site of the snapshots (a new one of the current leaderboard by default)."""
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PublishError(f"--out {target} exists and is not an empty folder: give a new folder")
    if dataset_dir is not None and not pub.is_publication(dataset_dir):
        raise PublishError(f"--dataset {dataset_dir}: not a published dataset folder (no {pub.PUBLICATION_FILE})")
    chosen = _snapshots(snapshot_ids, user)
    documents = [{**snapshot_json(s), "table": s.table} for s in chosen]
    scores = site.rescore_publication(dataset_dir) if dataset_dir is not None else None
    dataset = (
        json.loads((Path(dataset_dir) / pub.PUBLICATION_FILE).read_text(encoding="utf-8"))
        if dataset_dir is not None
        else None
    )
    site.write_site(target, documents, scores, dataset, render=_render)
    return chosen


def site_archive(snapshot: ResultSnapshot) -> bytes:
    """The static results site of one snapshot as a zip (the snapshot page's download), byte-stable."""
    with tempfile.TemporaryDirectory(prefix="attune-site-") as work:
        root = Path(work) / f"attunebench-snapshot-{snapshot.pk}-site"
        publish_results(root, [snapshot.pk])
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                name = f"{root.name}/{path.relative_to(root).as_posix()}"
                bundle.writestr(zipfile.ZipInfo(name, ZIP_TIME), path.read_bytes())
        return buffer.getvalue()


def _render(template: str, context: dict[str, Any]) -> str:
    return render_to_string(f"publish/{template}", context)
