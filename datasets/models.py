"""Dataset versions (frozen, citable selections of conversations) and their background export jobs.

Both describe collected data as a whole, so they live beside import and export,
above the apps that collect it and below the evaluation side that replays it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from collection.models import Conversation
from datasets.exchange import JOB_FORMATS


class DatasetVersion(models.Model):
    """A named, immutable selection of non-withdrawn conversations: complete ones, unless frozen with unfinished."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    conversations = models.ManyToManyField(Conversation, related_name="dataset_versions")
    content_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="sha256 over the canonical JSON of the conversations as a default export writes them (original "
        "models by alias), in conversationId order: recomputable from any default export "
        "(datasets.versions.CONTENT_HASH_RULE). Blank for versions frozen before it was recorded.",
    )
    content_hash_with_model_identity = models.CharField(
        max_length=64,
        blank=True,
        help_text="The same hash over an export with the original models' real names: only an export made "
        "with include_model_identity shows it (from an alias export it would let a reader test guesses of the names).",
    )
    conversation_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    frozen = models.BooleanField(default=False)
    includes_unfinished = models.BooleanField(
        default=False,
        help_text="Frozen with unfinished conversations too (flagged in their records); by default only complete ones.",
    )

    class Meta:
        db_table = "scoring_datasetversion"  # kept from when versions lived in the scoring app

    def __str__(self) -> str:
        return self.name


class ExportJob(models.Model):
    """One background export of a dataset version to a file in the deployment's file store."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        WITHDRAWN = "withdrawn", "Withdrawn from download"

    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="export_jobs")
    fmt = models.CharField("format", max_length=10, choices=[(f, f) for f in JOB_FORMATS])
    include_model_identity = models.BooleanField(
        default=False,
        help_text="Export the original models' real names; off (the default everywhere) gives their aliases only.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    file_path = models.CharField(
        max_length=500, blank=True, help_text="Its name in the deployment's file store (STORAGES['exports'])."
    )
    file_size = models.PositiveBigIntegerField(null=True, blank=True)
    file_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    # The worker writing it holds a lease it renews; a lapsed lease means the worker died (datasets/export_leases.py).
    lease_owner = models.CharField(max_length=200, blank=True, default="", db_default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Workers that started it; one whose lease lapsed counts."
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(
        null=True, blank=True, help_text="When the file was deleted because a participant in it withdrew."
    )
    replaced_by = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="replaces",
        help_text="The export regenerated without the withdrawn participant's data.",
    )

    class Meta:
        db_table = "research_exportjob"  # kept from when export jobs lived in the research app
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(fmt__in=list(JOB_FORMATS)), name="export_job_fmt_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed", "withdrawn"]),
                name="export_job_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(progress_done__lte=models.F("progress_total")), name="export_job_done_le_total"
            ),
            # Only a running export is held by a worker.
            models.CheckConstraint(
                condition=Q(status="running") | (Q(lease_expires_at__isnull=True) & Q(lease_owner="")),
                name="export_job_lease_only_while_running",
            ),
        ]

    def __str__(self) -> str:
        return f"export {self.pk}: {self.dataset_version} ({self.fmt})"

    @property
    def progress_percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        if not self.progress_total:
            return 0
        return min(100, round(100 * self.progress_done / self.progress_total))

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED, self.Status.WITHDRAWN)


class ImportRecord(models.Model):
    """One import of conversation files (``attune import``, the demo's sample data): what came in and on what terms.

    Kept so a datasheet can say where a participant's consent to sensitive data came from: when the
    importer attested it (their files carried diagnoses but no consent record), each participant so
    covered has a Consent whose version is :attr:`consent_version`.
    """

    ATTESTED_PREFIX = "import-attested-"

    created_at = models.DateTimeField(default=timezone.now)
    sources = models.JSONField(default=list, blank=True, help_text="The paths given to the import.")
    conversations = models.PositiveIntegerField(default=0)
    sensitive_consent_attested = models.BooleanField(
        default=False,
        help_text="The importer attested that the participants whose files give diagnoses without a consent "
        "record consented explicitly to their storage and research use (SPEC 2.5).",
    )
    consent_note = models.TextField(blank=True, help_text="What the attestation rests on, in the importer's words.")
    diagnoses_stored = models.PositiveIntegerField(default=0, help_text="Participants whose diagnoses were stored.")
    diagnoses_not_stored = models.PositiveIntegerField(
        default=0, help_text="Participants whose diagnoses were left out: no consent recorded or attested."
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.conversations} conversations)"

    @property
    def consent_version(self) -> str:
        """The Consent.version recorded for participants whose consent this import's importer attested."""
        return f"{self.ATTESTED_PREFIX}{self.pk}"

    @classmethod
    def pk_of_consent_version(cls, version: str) -> int | None:
        """The import whose attestation a Consent.version names, or None for consent given otherwise."""
        digits = version.removeprefix(cls.ATTESTED_PREFIX)
        return int(digits) if version.startswith(cls.ATTESTED_PREFIX) and digits.isdigit() else None
