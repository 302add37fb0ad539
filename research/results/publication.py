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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import QuerySet
from django.template.loader import render_to_string
from django.utils import timezone

from attunebench import canonical as cf
from attunebench import publication as pub
from attunebench import results_site as site
from attunebench.metrics.engine import score_runs
from attunebench.metrics.results import to_json
from datasets.exchange import iter_canonical, withdrawn_conversations
from datasets.models import DatasetVersion
from datasets.selection import complete_conversations, selection_queryset
from datasets.versions import (
    CardOptions,
    DatasetError,
    check_model_identity,
    do_freeze_dataset_version,
    write_dataset_folder,
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
        try:
            check_model_identity(complete_conversations(), model_identity)
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
    try:
        identity = check_model_identity(queryset, model_identity)
    except DatasetError as exc:
        raise PublishError(str(exc)) from exc
    documents = list(iter_canonical(queryset, include_model_identity=identity))
    runs = _run_outputs(run_ids, {d.conversationId for d in documents}) if run_ids else None
    records = None
    if runs is not None:
        result = score_runs(documents, runs)
        records = [to_json(r) for r in result.report().conversations]
    card = CardOptions(
        recruitment=recruitment, code_version=code_version(), license_id=license_id, citation=citation, url=url
    )
    try:
        counts = write_dataset_folder(version, documents, target, identity, runs, records, card)
    except DatasetError as exc:
        raise PublishError(str(exc)) from exc
    return PublishedDataset(out=target, version=version, counts=counts, content_hash=pub.content_hash(documents))


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
    try:
        scores = site.rescore_publication(dataset_dir) if dataset_dir is not None else None
    except ValueError as exc:
        raise PublishError(f"--dataset {dataset_dir}: {exc}") from exc
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
