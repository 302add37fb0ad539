"""The export files in the deployment's one file store (``STORAGES["exports"]``): written, streamed, deleted, audited.

Every host reads and writes the same store (a folder of the data directory on one
machine, an S3-compatible bucket on several: attune_site/object_store.py), so a
file written by any worker downloads through any web process and a withdrawal
deletes it from anywhere. Each export's files live under a folder of their own,
``export-<id>/``, one subfolder per attempt: a worker that died half-way leaves
its partial upload where a withdrawal still finds and deletes it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import Storage, storages

from datasets.models import ExportJob

logger = logging.getLogger("attune.storage")

EXPORTS = "exports"  # the STORAGES alias (attune_site/object_store.py names the same)


def export_store() -> Storage:
    return storages[EXPORTS]


def job_folder(job_id: int) -> str:
    return f"export-{job_id}"


def attempt_name(job_id: int, attempt: int, file_name: str) -> str:
    """Where attempt ``attempt`` of an export keeps its bundle: two attempts never write the same name."""
    return f"{job_folder(job_id)}/attempt-{attempt}/{file_name}"


def do_store_file(local: Path, name: str) -> str:
    """Copy a finished local file into the store under ``name``; returns the name the store kept it under."""
    with local.open("rb") as handle:
        return export_store().save(name, File(handle, name=local.name))


def stored_file_exists(name: str) -> bool:
    return export_store().exists(name)


def open_stored_file(name: str) -> IO[bytes]:
    """A readable stream of a stored file, read in blocks as the response is sent (never whole into memory).

    From a bucket this is the object's body as it arrives (django-storages' own file object would first
    copy the whole object to a temporary file); from a folder, the file itself.
    """
    store: Any = export_store()
    if getattr(store, "bucket", None) is not None:
        body: IO[bytes] = store.bucket.Object(store._normalize_name(name)).get()["Body"]
        return body
    opened: IO[bytes] = store.open(name, "rb")
    return opened


def walk(prefix: str = "") -> Iterator[str]:
    """Every stored file name under ``prefix`` (a folder name, or "" for the whole store)."""
    store = export_store()
    try:
        folders, files = store.listdir(prefix)
    except FileNotFoundError:  # a folder store's folder that was never made: nothing stored
        return
    for name in files:
        yield f"{prefix}/{name}" if prefix else name
    for folder in folders:
        yield from walk(f"{prefix}/{folder}" if prefix else folder)


def do_delete_job_files(job_id: int, file_path: str, reason: str) -> list[str]:
    """Delete every stored copy of an export (every attempt's file, and its recorded file); log each one.

    Returns the names deleted. A failure to delete is raised, not swallowed: the caller reports it.
    """
    store = export_store()
    names = set(walk(job_folder(job_id)))
    if file_path and store.exists(file_path):
        names.add(file_path)
    for name in sorted(names):
        store.delete(name)
        logger.warning("export %s: deleted the stored file %s (%s)", job_id, name, reason)
    return sorted(names)


@dataclass
class StoreAudit:
    """What ``attune storage check`` found: files nothing references, references whose file is gone."""

    unreferenced: list[str] = field(default_factory=list)
    missing: list[tuple[int, str]] = field(default_factory=list)
    checked: int = 0

    @property
    def clean(self) -> bool:
        return not self.unreferenced and not self.missing


def audit_store() -> StoreAudit:
    """Compare the store with the export rows.

    A finished export must have its file; any other stored file is unreferenced, except those in the
    folder of an export still queued or running (its worker is writing them).
    """
    audit = StoreAudit()
    referenced: set[str] = set()
    in_progress = {
        job_folder(pk)
        for pk in ExportJob.objects.filter(status__in=[ExportJob.Status.QUEUED, ExportJob.Status.RUNNING]).values_list(
            "pk", flat=True
        )
    }
    for pk, name in (
        ExportJob.objects.filter(status=ExportJob.Status.DONE).exclude(file_path="").values_list("pk", "file_path")
    ):
        referenced.add(name)
        if not stored_file_exists(name):
            audit.missing.append((pk, name))
    for name in walk():
        audit.checked += 1
        if name not in referenced and name.split("/", 1)[0] not in in_progress:
            audit.unreferenced.append(name)
    audit.unreferenced.sort()
    return audit
