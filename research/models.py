"""Research-side records: background export jobs and human-baseline assignments.

Both are bookkeeping around data owned by other apps. An export job points at
a frozen dataset version and the file it produced; an assignment records that
a researcher asked a rater to take the EM's seat for one conversation, and how
far the rater has got. The rater's predictions themselves live where every
model's do: in a scoring.RunConversation of the run named ``human:<rater>``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from collection.exchange import EXPORT_FORMATS
from collection.models import Conversation
from scoring.models import DatasetVersion, RunConversation


class ExportJob(models.Model):
    """One background export of a dataset version to a file under ATTUNE_EXPORT_DIR."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="export_jobs")
    fmt = models.CharField("format", max_length=10, choices=[(f, f) for f in EXPORT_FORMATS])
    include_model_identity = models.BooleanField(
        default=True, help_text="Export the original model's real name (researcher exports); off gives aliases only."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    file_path = models.CharField(max_length=500, blank=True, help_text="Relative to ATTUNE_EXPORT_DIR.")
    file_size = models.PositiveBigIntegerField(null=True, blank=True)
    file_sha256 = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(fmt__in=list(EXPORT_FORMATS)), name="export_job_fmt_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed"]), name="export_job_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(progress_done__lte=models.F("progress_total")), name="export_job_done_le_total"
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
        return self.status in (self.Status.DONE, self.Status.FAILED)


class HumanAssignment(models.Model):
    """A conversation a researcher asked a human rater to replay, turn by turn."""

    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="rating_assignments")
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="human_assignments")
    run_conversation = models.OneToOneField(
        RunConversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="human_assignment"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    assigned_at = models.DateTimeField(default=timezone.now)
    turns_done = models.PositiveIntegerField(default=0, help_text="Turns the rater has answered; they see turn turns_done + 1.")
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-assigned_at"]
        constraints = [
            models.UniqueConstraint(fields=["rater", "conversation"], name="human_assignment_once_per_rater"),
        ]

    def __str__(self) -> str:
        return f"{self.rater} → {self.conversation}"

    @property
    def is_complete(self) -> bool:
        return self.completed_at is not None
