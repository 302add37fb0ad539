"""Dataset versions (frozen selections) and their background exports with datasheets.

A dataset version is what a paper cites: a name, a fixed list of complete,
non-withdrawn conversations and a sha256 over their canonical JSON, so anyone
holding an export can check it is the version they think it is. The content
hash covers the canonical text of every conversation in conversationId order
exactly as a default export writes it (original models by alias), so it can be
recomputed from any default export (``CONTENT_HASH_RULE``, printed in every
datasheet). The hash over an export with the real model names is recorded too,
under its own name, and shown only in such an export's datasheet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet
from django.utils import timezone
from django.utils.text import slugify

from annotation.quality import EXCLUSION_REASONS
from attunebench import canonical as cf
from attunebench import catalogue as cat
from attunebench import publication as pub
from attunebench.names import name_problem
from collection.models import Consent, Conversation, Turn
from datasets.exchange import (
    IMPORTED_CONSENT_VERSION,
    PUBLISHED_FORMAT,
    consented_diagnoses,
    export_conversations,
    iter_canonical,
    left_out_counts,
    quality_exclusions_by_reason,
)
from datasets.export_leases import Heartbeat, claim_export, held, release_fields
from datasets.models import DatasetVersion, ExportJob, ImportRecord
from datasets.selection import selection_queryset
from datasets.store import attempt_name, do_store_file, export_store, open_stored_file, stored_file_exists

logger = logging.getLogger("attune.research")

#: Why a conversation of the database is not in an export (datasheet wording).
_LEFT_OUT_REASONS = {
    "unfinished": "unfinished: the participant has not finished it (or a turn is unfinished)",
    "empty": "empty: no turn with a reply",
    "withdrawn": "withdrawn: the participant withdrew (never exported)",
    "quality_excluded": "excluded for quality: a researcher's current decision (by reason below)",
    "not_selected": "complete, but outside this version (another topic selection, or collected after the freeze)",
}
WITHDRAWAL_STATEMENT = (
    "Participants who withdrew are not in this export. When a participant withdraws, every earlier export "
    "holding their data is withdrawn from download (its file deleted) and regenerated without it."
)
PSEUDONYM_STATEMENT = (
    "Participant ids are pseudonyms: a keyed hash (HMAC-SHA256 under a key kept only by this deployment) of "
    "the stored id, so an imported id such as an e-mail address never appears. The same participant has the "
    "same pseudonym in every export of this deployment. Self-reported diagnoses appear only where the "
    "participant's consent to sensitive data is recorded; imported conversations without such a record "
    "carry none."
)

DATA_FILE_NAMES = {"json": "conversations", "jsonl": "conversations.jsonl", "parquet": "turns.parquet"}


class DatasetError(ValueError):
    """A dataset request that cannot be honoured; the message is shown to the researcher."""


#: How a reader recomputes a version's content hash from an export (printed in every datasheet).
CONTENT_HASH_RULE = (
    "sha256 over the concatenated UTF-8 canonical JSON of every conversation (sorted keys, 2-space indent, "
    "non-ASCII characters as they are, a final newline), in conversationId order (code-point order, as "
    "Python's sorted() gives it; the order of the JSONL lines and Parquet rows). The JSON export's "
    "conversation files are exactly that text: concatenate their bytes in conversationId order (leave out "
    "DATASHEET.md and datasheet.json). From the JSONL export, re-serialise each line that way, in line order. "
    "A Parquet export carries the result as its attunebench.content_sha256 metadata. A default export "
    "(original models by alias) gives content_hash; an export with the real model names gives "
    "content_hash_with_model_identity, which only its own datasheet shows. An export reproduces the hash only "
    "if no conversation of the version was withdrawn after the freeze (counts.withdrawn_since_freeze)."
)


def content_hash(queryset: QuerySet[Conversation], include_model_identity: bool = False) -> str:
    """sha256 over the canonical JSON of the conversations, in conversation-id order (``CONTENT_HASH_RULE``).

    By default over what a default export writes (original models by alias), so the
    hash can be checked against such an export; ``include_model_identity`` gives the
    hash of an export with the real model names instead.
    """
    digest = hashlib.sha256()
    for document in iter_canonical(queryset, include_model_identity=include_model_identity):
        digest.update(cf.dumps_canonical(document).encode("utf-8"))
    return digest.hexdigest()


def check_version_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise DatasetError("A dataset version needs a name.")
    problem = name_problem(cleaned)
    if problem:
        raise DatasetError(problem)
    if DatasetVersion.objects.filter(name=cleaned).exists():
        raise DatasetError(
            f"A dataset version named {cleaned!r} already exists; versions are immutable, pick a new name."
        )
    return cleaned


def do_freeze_dataset_version(
    name: str,
    description: str = "",
    topic_categories: list[str] | None = None,
    user: Any = None,
    include_unfinished: bool = False,
) -> DatasetVersion:
    """Create a frozen version of the complete, non-withdrawn conversations (optionally one topic set).

    ``include_unfinished`` adds the unfinished and empty ones; their records say so
    and their unanswered steps are null, and scoring leaves such turns out (SPEC 5.1).
    """
    cleaned = check_version_name(name)
    queryset = selection_queryset(topic_categories, include_unfinished=include_unfinished)
    ids = list(queryset.values_list("pk", flat=True))
    if not ids:
        what = "non-withdrawn" if include_unfinished else "complete, non-withdrawn"
        raise DatasetError(f"No {what} conversations match this selection.")
    members = Conversation.objects.filter(pk__in=ids)
    with transaction.atomic():
        version = DatasetVersion.objects.create(
            name=cleaned,
            description=description,
            content_hash=content_hash(members),
            content_hash_with_model_identity=content_hash(members, include_model_identity=True),
            conversation_count=len(ids),
            created_by=user if getattr(user, "is_authenticated", False) else None,
            frozen=True,
            includes_unfinished=include_unfinished,
        )
        version.conversations.add(*ids)
    return version


# ---------------------------------------------------------------------------
# Datasheet
# ---------------------------------------------------------------------------


def _sensitive_consent_lines(sensitive: dict[str, Any] | None) -> list[str]:
    """The datasheet's account of where the consent behind every exported diagnosis came from."""
    if not sensitive:
        return []
    lines = [
        "## Sensitive data (diagnoses)",
        "",
        f"Diagnoses are exported for {sensitive['participants_with_diagnoses']} participant(s), each under recorded "
        "consent (SPEC 2.5); every other participant's diagnoses are `null`. Where that consent came from:",
        "",
        "| consent | participants |",
        "|---|---|",
        *[f"| {CONSENT_SOURCES[k]} | {v} |" for k, v in sensitive["by_source"].items()],
        "",
    ]
    for attestation in sensitive["attested_imports"]:
        note = f": {attestation['note']}" if attestation["note"] else ""
        lines.append(
            f"- Import {attestation['import']} ({attestation['imported_at']}): the importer attested that the "
            f"participants consented{note}"
        )
    if sensitive["attested_imports"]:
        lines.append("")
    return lines


@dataclass
class Datasheet:
    """What a reader of an export needs before opening the data (a 'datasheet for datasets')."""

    data: dict[str, Any]

    def as_json(self) -> str:
        return json.dumps(self.data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def as_markdown(self) -> str:
        d = self.data
        lines = [
            f"# Datasheet: {d['dataset_version']}",
            "",
            f"> {d['research_only_statement']}",
            "",
            "- Content hash of the version (over a default export, original models by alias): "
            + (f"`{d['content_hash']}`" if d["content_hash"] else "not recorded (frozen before it was)"),
            *(
                [f"- Content hash of this export (real model names): `{d['content_hash_with_model_identity']}`"]
                if d.get("content_hash_with_model_identity")
                else []
            ),
            f"- To check it: {d['content_hash_rule']}",
            f"- Created: {d['created_at']} by {d['created_by'] or 'unknown'}",
            f"- Exported: {d['exported_at']} as `{d['format']}`",
            f"- Schema version: {d['schema_version']}",
            f"- Consent version(s): {', '.join(d['consent_versions']) or 'not recorded (imported data)'}",
            f"- Original-model identities: {'real names' if d['include_model_identity'] else 'aliases only'}",
            *(
                [
                    "- Regenerated after a participant withdrew; replaces export(s) "
                    + ", ".join(f"#{n}" for n in d["replaces_exports"])
                    + ", withdrawn from download"
                ]
                if d.get("replaces_exports")
                else []
            ),
            "",
            "## Counts",
            "",
            f"- Conversations: {d['counts']['conversations']}"
            + (
                f" ({d['counts']['withdrawn_since_freeze']} withdrawn since the version was frozen and left out)"
                if d["counts"]["withdrawn_since_freeze"]
                else ""
            ),
            f"- Turns: {d['counts']['turns']}",
            f"- Participants: {d['counts']['participants']}",
            "",
            "## What is in and what is left out",
            "",
            "Conversations in this export by completeness (a record that is not complete says so in "
            "`metadata.completeness`; its unanswered steps are `null`):",
            "",
            "| completeness | conversations |",
            "|---|---|",
            *[f"| {k} | {v} |" for k, v in d["included"]["conversations"].items()],
            "",
            "| turn completeness | turns |",
            "|---|---|",
            *[f"| {k} | {v} |" for k, v in d["included"]["turns"].items()],
            "",
            "Conversations in the database but not in this export, and why:",
            "",
            "| reason | conversations |",
            "|---|---|",
            *[f"| {_LEFT_OUT_REASONS[k]} | {v} |" for k, v in d["left_out"].items()],
            "",
        ]
        lines += _sensitive_consent_lines(d.get("sensitive_data_consent"))
        if d["quality_exclusions_by_reason"]:
            lines += [
                "Excluded for quality, by the researcher's reason:",
                "",
                "| reason | conversations |",
                "|---|---|",
            ]
            # datasheet.json keeps the reason codes; the reader of the markdown gets their labels
            lines += [f"| {EXCLUSION_REASONS.get(k, k)} | {v} |" for k, v in d["quality_exclusions_by_reason"].items()]
            lines.append("")
        for title, key in (
            ("Topic categories", "topic_distribution"),
            ("Participant groups", "participant_group_distribution"),
            ("Original models", "original_model_distribution"),
        ):
            lines += [f"## {title}", "", "| value | conversations |", "|---|---|"]
            lines += [f"| {k} | {v} |" for k, v in d[key].items()]
            lines.append("")
        lines += [
            "## Notes",
            "",
            d["pseudonymisation_statement"],
            "",
            d["withdrawal_statement"],
            "",
            "Participant groups follow SPEC 6: `anxiety_depression` (diagnosed anxiety or depression, with consent), "
            "`none`, and `unknown` (not said, other diagnoses, no consent recorded, or no profile).",
            "",
        ]
        return "\n".join(lines)


#: Where a participant's recorded consent to sensitive data came from (datasheet wording).
CONSENT_SOURCES = {
    "collected": "given in Attune's consent step",
    "imported_file": "recorded in the imported file (sensitiveDataConsent)",
    "attested_at_import": "attested by the importer (attune import --attest-sensitive-consent)",
}


def sensitive_consent_sources(participant_pks: set[int]) -> dict[str, Any]:
    """For the participants whose diagnoses an export carries: where their consent came from, and the attestations.

    A participant with consent from several sources counts under the first of
    CONSENT_SOURCES (collected before imported before attested).
    """
    versions: dict[int, list[str]] = {}
    for pk, version in Consent.objects.filter(
        participant_id__in=participant_pks, sensitive_data_consent=True
    ).values_list("participant_id", "version"):
        versions.setdefault(pk, []).append(version)
    counts = dict.fromkeys(CONSENT_SOURCES, 0)
    attested: set[int] = set()
    for found in versions.values():
        imports = {ImportRecord.pk_of_consent_version(v) for v in found} - {None}
        if any(ImportRecord.pk_of_consent_version(v) is None and v != IMPORTED_CONSENT_VERSION for v in found):
            counts["collected"] += 1
        elif IMPORTED_CONSENT_VERSION in found:
            counts["imported_file"] += 1
        else:
            counts["attested_at_import"] += 1
            attested |= {pk for pk in imports if pk is not None}
    return {
        "participants_with_diagnoses": len(participant_pks),
        "by_source": counts,
        "attested_imports": [
            {"import": r.pk, "imported_at": r.created_at.isoformat(), "note": r.consent_note}
            for r in ImportRecord.objects.filter(pk__in=attested).order_by("pk")
        ],
    }


def build_datasheet(
    version: DatasetVersion, fmt: str, include_model_identity: bool, replaces: list[int] | None = None
) -> Datasheet:
    """Counts and distributions of the conversations an export of ``version`` contains.

    ``replaces``: the exports this one regenerates because a participant in them withdrew.
    """
    queryset = selection_queryset(dataset_version=version)
    rows = list(
        queryset.values_list(
            "pk", "topic__category", "original_model__alias", "original_model__name", "participant_id", "completeness"
        )
    )
    pks = [r[0] for r in rows]
    participant_ids = {r[4] for r in rows if r[4] is not None}
    diagnoses = consented_diagnoses(participant_ids)  # as the export writes them: only under recorded consent
    groups = Counter(cat.participant_group(diagnoses.get(r[4])) or "unknown" for r in rows)
    identity = (lambda r: r[3] or r[2]) if include_model_identity else (lambda r: r[2])
    consent_versions = sorted(
        set(Consent.objects.filter(participant_id__in=participant_ids).values_list("version", flat=True))
    )
    sensitive = sensitive_consent_sources(set(diagnoses))
    turn_states = Counter(
        dict(
            Turn.objects.filter(conversation_id__in=pks)
            .values_list("completeness")
            .annotate(n=Count("id"))
            .values_list("completeness", "n")
        )
    )
    conversation_states = Counter(r[5] for r in rows)
    left_out = left_out_counts(queryset)  # withdrawn ones include those withdrawn since the freeze
    data = {
        "dataset_version": version.name,
        "includes_unfinished": version.includes_unfinished,
        "included": {
            "conversations": {state: conversation_states[state] for state in cat.CONVERSATION_COMPLETENESS},
            "turns": {state: turn_states[state] for state in cat.TURN_COMPLETENESS},
        },
        "left_out": left_out,
        "quality_exclusions_by_reason": quality_exclusions_by_reason(queryset),
        "description": version.description,
        "content_hash": version.content_hash,
        "content_hash_rule": CONTENT_HASH_RULE,
        "created_at": version.created_at.isoformat(),
        "created_by": version.created_by.get_username() if version.created_by else None,
        "exported_at": timezone.now().isoformat(),
        "format": fmt,
        "include_model_identity": include_model_identity,
        "schema_version": cf.CONVERSATION_SCHEMA_VERSION,
        "consent_versions": consent_versions,
        "sensitive_data_consent": sensitive,
        "research_only_statement": cat.RESEARCH_ONLY_STATEMENT,
        "counts": {
            "conversations": len(pks),
            "frozen_conversations": version.conversation_count,
            "withdrawn_since_freeze": max(0, version.conversation_count - len(pks)),
            "turns": sum(turn_states.values()),
            "participants": len(participant_ids),
        },
        "topic_distribution": dict(sorted(Counter(r[1] for r in rows).items())),
        "participant_group_distribution": dict(sorted(groups.items())),
        "original_model_distribution": dict(sorted(Counter(identity(r) for r in rows).items())),
        "replaces_exports": sorted(replaces or []),
        "withdrawal_statement": WITHDRAWAL_STATEMENT,
        "pseudonymisation_statement": PSEUDONYM_STATEMENT,
    }
    if include_model_identity:
        # Only beside the real names: next to aliases it would let a reader test guesses of the names.
        data["content_hash_with_model_identity"] = version.content_hash_with_model_identity
    return Datasheet(data)


# ---------------------------------------------------------------------------
# Published dataset folders
# ---------------------------------------------------------------------------


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
        raise DatasetError(f"--model-identity names {', '.join(unknown)}: not an original model of this data")
    missing = sorted(alias for alias, name in models.items() if name and name not in named)
    if missing:
        raise DatasetError(
            "publishing model identities needs every original model named with --model-identity; not named: "
            f"the models behind {', '.join(missing)}"
        )
    return True


def _recruitment(queryset: QuerySet[Conversation], note: str) -> str:
    """Where the conversations came from (collected through which studies, or imported), plus the publisher's note."""
    sources = Counter(queryset.values_list("source", flat=True))
    studies = sorted({s for s in queryset.values_list("participant__study__title", flat=True) if s})
    parts = []
    if sources.get("collected"):
        where = f" (studies: {', '.join(studies)})" if studies else ""
        parts.append(f"{sources['collected']} conversation(s) collected through Attune's study links{where}")
    if sources.get("imported"):
        parts.append(f"{sources['imported']} imported from canonical conversation files")
    text = "; ".join(parts) or "no conversations"
    return f"{text}. {note.strip()}" if note.strip() else f"{text}."


@dataclass(frozen=True)
class CardOptions:
    """What the publisher adds to a published dataset's card."""

    recruitment: str = ""
    code_version: str = ""  # default: the installed release
    license_id: str = "other"
    citation: str = ""
    url: str = ""


def write_dataset_folder(
    version: DatasetVersion,
    documents: list[cf.ConversationFile],
    out: str | Path,
    include_model_identity: bool,
    runs: list[cf.RunOutput] | None = None,
    score_records: list[dict[str, Any]] | None = None,
    card: CardOptions | None = None,
) -> dict[str, int]:
    """Write the published folder of ``version`` (documents as ``iter_canonical`` gives them); returns row counts."""
    card = card or CardOptions()
    queryset = selection_queryset(dataset_version=version)
    sheet = build_datasheet(version, "published", include_model_identity).data
    frozen = version.content_hash_with_model_identity if include_model_identity else version.content_hash
    info = pub.Publication(
        name=version.name,
        content_hash=pub.content_hash(documents),
        frozen_content_hash=frozen or "",
        description=version.description,
        created_at=version.created_at.isoformat(),
        code_version=card.code_version or _code_version(),
        consent_versions=sheet["consent_versions"],
        recruitment=_recruitment(queryset, card.recruitment),
        quality_exclusions={EXCLUSION_REASONS.get(k, k): v for k, v in sheet["quality_exclusions_by_reason"].items()},
        left_out={k: v for k, v in sheet["left_out"].items() if k != "not_selected"},
        participants=sheet["counts"]["participants"],
        diagnoses_published_for=(sheet["sensitive_data_consent"] or {}).get("participants_with_diagnoses", 0),
        model_identity=include_model_identity,
        license=card.license_id,
        url=card.url,
        citation=card.citation,
        withdrawal_statement=WITHDRAWAL_STATEMENT,
        pseudonym_statement=PSEUDONYM_STATEMENT,
    )
    tables = pub.build_tables(documents, runs, score_records)
    pub.write_publication(out, tables, info)
    return {name: table.num_rows for name, table in tables.items()}


def _code_version() -> str:
    """The installed attune package's version (the scoring layer adds the commit for runs; a card needs the release)."""
    try:
        return metadata.version("attune")
    except metadata.PackageNotFoundError:
        return "unknown (attune not installed as a package)"


# ---------------------------------------------------------------------------
# Export jobs
# ---------------------------------------------------------------------------


def export_root() -> Path:
    """The export folder of the embedded (file-system) store; with a bucket, only a scratch area's parent."""
    return Path(settings.ATTUNE_EXPORT_DIR)


def run_export_job(job_id: int) -> ExportJob | None:
    """The body of the export task: claim the job, write the bundle into the store, record the outcome.

    The claim is a conditional update under a lease (datasets/export_leases.py), so a
    redelivered task (acks_late) never writes a job another live worker holds, and
    completes one whose worker died. Returns None only when another worker holds it
    or it is finished already.
    """
    claim = claim_export(job_id)
    if claim is None:
        current = ExportJob.objects.filter(pk=job_id).values_list("status", "lease_owner").first()
        logger.info("export %s: not claimed (%s)", job_id, current or "no such job")
        return None
    token, attempt = claim
    job = ExportJob.objects.select_related("dataset_version").get(pk=job_id)
    try:
        with Heartbeat(job_id, token):
            written = _write_bundle(job, token, attempt)
    except Exception as exc:
        ExportJob.objects.filter(held(job_id, token)).update(
            status=ExportJob.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
            **release_fields(),
        )
        logger.exception("export job %s failed", job_id)
        job.refresh_from_db()
        return job
    # Conditional: a participant who withdrew while this ran has had the job withdrawn, and a worker whose
    # lease lapsed meanwhile has lost the job to another; either way this attempt's file goes too.
    finished = ExportJob.objects.filter(held(job_id, token)).update(
        status=ExportJob.Status.DONE,
        file_path=written.name,
        file_size=written.size,
        file_sha256=written.sha256,
        finished_at=timezone.now(),
        **release_fields(),
    )
    if finished != 1:
        export_store().delete(written.name)
        logger.warning(
            "export %s: attempt %s no longer held the job; deleted its file %s", job_id, attempt, written.name
        )
    job.refresh_from_db()
    return job


def bundle_name(job: ExportJob) -> str:
    return f"{slugify(job.dataset_version.name) or 'dataset'}-export{job.pk}-{job.fmt}.zip"


@dataclass(frozen=True)
class WrittenBundle:
    name: str  # in the store
    size: int
    sha256: str


def _write_bundle(job: ExportJob, token: str, attempt: int) -> WrittenBundle:
    """One zip per export: the data in the chosen format plus DATASHEET.md and datasheet.json.

    Written in a private scratch folder of this host, then copied into the store under a name of this
    attempt's own (two attempts never write one name).
    """
    version = job.dataset_version
    queryset = selection_queryset(dataset_version=version)
    total = queryset.count()
    ExportJob.objects.filter(held(job.pk, token)).update(progress_total=total, progress_done=0)
    step = max(1, total // 50)

    def progress(done: int, of: int) -> None:
        if done == of or done % step == 0:
            ExportJob.objects.filter(held(job.pk, token)).update(progress_done=min(done, total))

    file_name = bundle_name(job)
    replaces = list(job.replaces.values_list("pk", flat=True))
    datasheet = build_datasheet(version, job.fmt, job.include_model_identity, replaces)
    scratch = Path(settings.DATA_DIR)
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Owner-only whatever the process umask: a bundle holds participants' conversations.
    with tempfile.TemporaryDirectory(dir=scratch, prefix=".export-") as work:
        work_dir = Path(work)
        partial = work_dir / file_name
        if job.fmt == PUBLISHED_FORMAT:
            # The folder attune publish dataset writes, zipped under the version's name; aliases only.
            folder = work_dir / (slugify(version.name) or "dataset")
            documents = list(iter_canonical(queryset, include_model_identity=False))
            progress(total, total)
            write_dataset_folder(version, documents, folder, include_model_identity=False)
            with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    bundle.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}")
        elif job.fmt == "json":
            # The JSON export is itself a zip of one canonical file per conversation; the datasheet joins it.
            export_conversations(queryset, "json", partial, job.include_model_identity, progress)
            with zipfile.ZipFile(partial, "a", compression=zipfile.ZIP_DEFLATED) as bundle:
                bundle.writestr("DATASHEET.md", datasheet.as_markdown())
                bundle.writestr("datasheet.json", datasheet.as_json())
        else:
            data_file = work_dir / DATA_FILE_NAMES[job.fmt]
            export_conversations(queryset, job.fmt, data_file, job.include_model_identity, progress)
            # Parquet is already compressed; deflating it again only costs time.
            compression = zipfile.ZIP_STORED if job.fmt == "parquet" else zipfile.ZIP_DEFLATED
            with zipfile.ZipFile(partial, "w", compression=compression) as bundle:
                bundle.write(data_file, DATA_FILE_NAMES[job.fmt])
                bundle.writestr("DATASHEET.md", datasheet.as_markdown())
                bundle.writestr("datasheet.json", datasheet.as_json())
        partial.chmod(0o600)
        size, digest = partial.stat().st_size, _file_sha256(partial)
        name = do_store_file(partial, attempt_name(job.pk, attempt, file_name))
    return WrittenBundle(name=name, size=size, sha256=digest)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ExportDownload:
    """A finished export's stored file, opened for streaming to an authorised user."""

    stream: IO[bytes]
    file_name: str
    size: int | None


def access_export_file(job: ExportJob) -> ExportDownload:
    """The finished file of a job, from the deployment's store whichever host wrote it."""
    if job.status == ExportJob.Status.WITHDRAWN:
        replacement = f"; export #{job.replaced_by_id} replaces it" if job.replaced_by_id else ""
        raise DatasetError(
            f"This export was withdrawn from download because a participant in it withdrew from the study{replacement}."
        )
    if job.status != ExportJob.Status.DONE or not job.file_path:
        raise DatasetError("This export is not ready.")
    name = job.file_path
    if Path(name).is_absolute() or ".." in Path(name).parts or not stored_file_exists(name):
        raise DatasetError("The export file is missing; request a new export.")
    return ExportDownload(stream=open_stored_file(name), file_name=Path(name).name, size=job.file_size)


def version_summary(version: DatasetVersion) -> dict[str, Any]:
    """Topic distribution of a version, for its list row (one grouped query)."""
    counts = Counter(selection_queryset(dataset_version=version).values_list("topic__category", flat=True))
    return {"topics": dict(sorted(counts.items()))}
