"""Importing conversation files as one recorded act: the files, and what the importer attested about consent.

The writing itself is ``datasets.exchange.import_documents``; this module wraps it
in an :class:`ImportRecord`, so the consent an importer attested for diagnoses is
kept with the import and a datasheet can say so (SPEC 2.5: diagnoses only under
explicit consent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from django.db import transaction

from attunebench import canonical as cf
from attunebench.sources import iter_conversations
from datasets.exchange import Documents, ImportResult, import_stream
from datasets.models import ImportRecord

#: What ``--attest-sensitive-consent`` asserts, shown by the command and kept in the docs.
ATTESTATION = (
    "Every participant whose file gives diagnoses but records no consent to sensitive data "
    "consented explicitly to their diagnoses being stored and used for research."
)


def do_import_paths(
    paths: Iterable[str | Path],
    *,
    attest_sensitive_consent: bool = False,
    consent_note: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ImportResult, ImportRecord | None]:
    """Read and import files as one recorded import; nothing is written (no record either) when any has a problem.

    The files are read twice (every one validated, then every one written), never held whole, so the
    import's memory stays flat however many conversations they hold.
    """
    sources = [str(p) for p in paths]
    return _do_import(
        lambda: iter_conversations(sources),
        sources=sources,
        attest_sensitive_consent=attest_sensitive_consent,
        consent_note=consent_note,
        progress=progress,
    )


def do_import_documents(
    documents: list[tuple[str, cf.ConversationFile]],
    problems: list[cf.Problem] | None = None,
    *,
    sources: list[str],
    attest_sensitive_consent: bool = False,
    consent_note: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ImportResult, ImportRecord | None]:
    """Import validated documents, recording the import and, when attested, the consent it stands for."""
    given = list(problems or [])
    return _do_import(
        lambda: [*given, *documents],
        sources=sources,
        attest_sensitive_consent=attest_sensitive_consent,
        consent_note=consent_note,
        progress=progress,
    )


def _do_import(
    read: Callable[[], Documents],
    *,
    sources: list[str],
    attest_sensitive_consent: bool,
    consent_note: str,
    progress: Callable[[int, int], None] | None,
) -> tuple[ImportResult, ImportRecord | None]:
    with transaction.atomic():
        record = ImportRecord.objects.create(
            sources=sources, sensitive_consent_attested=attest_sensitive_consent, consent_note=consent_note.strip()
        )
        version = record.consent_version if attest_sensitive_consent else None
        result = import_stream(read, attested_consent_version=version, progress=progress)
        if not result.ok:
            transaction.set_rollback(True)
            return result, None
        record.conversations = len(result.imported)
        record.diagnoses_stored = len(result.diagnoses_stored)
        record.diagnoses_not_stored = len(result.diagnoses_not_stored)
        record.save(update_fields=["conversations", "diagnoses_stored", "diagnoses_not_stored"])
    return result, record
