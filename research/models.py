"""Research-side records: human-baseline assignments.

Bookkeeping around data owned by other apps: an assignment records that
a researcher asked a rater to take the EM's seat for one conversation, and how
far the rater has got. The rater's predictions themselves live where every
model's do: in a scoring.RunConversation of the run named ``human:<rater>``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from collection.models import Conversation
from scoring.models import RunConversation


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
    turns_done = models.PositiveIntegerField(
        default=0, help_text="Turns the rater has answered; they see turn turns_done + 1."
    )
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


class ResultSnapshot(models.Model):
    """A named, frozen leaderboard with its manifest: what a paper cites (by id and content hash).

    Written once by research.snapshots.do_freeze_snapshot and never changed: ``save`` refuses an
    update, and no page, API endpoint or admin edits one. Everything a reader needs is inside it
    (rows, rows apart, human pairings, the analyses, the runs and the conversation ids), so it
    stays readable when the runs it came from are deleted or re-scored.
    """

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    manifest = models.JSONField(help_text="Runs, conversation set, dataset version, bootstrap settings, code version.")
    leaderboard = models.JSONField(help_text="Ranked rows, rows apart and human pairings, as the API returns them.")
    table = models.JSONField(help_text="The leaderboard CSV's header and rows (every column).")
    analysis = models.JSONField(null=True, blank=True, help_text="The SPEC 6 analyses of the compared rows.")
    content_sha256 = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the four parts.")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"snapshot {self.pk}: {self.name}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None and type(self).objects.filter(pk=self.pk).exists():
            raise ValueError(f"snapshot {self.pk} is frozen: make a new snapshot instead of changing it")
        super().save(*args, **kwargs)  # type: ignore[arg-type]


class ErasureRecord(models.Model):
    """That a participant's data was erased, when and by whom: nothing about the participant.

    No pseudonym, conversation id, topic or date of taking part is kept, only
    how many rows of each kind were deleted and which runs were re-scored, so
    the record proves the erasure without undoing it.
    """

    erased_at = models.DateTimeField(default=timezone.now)
    erased_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    via = models.CharField(max_length=20, help_text="admin or command")
    rows_deleted = models.JSONField(default=dict, help_text="Model label -> rows deleted.")
    runs_rescored = models.JSONField(default=list, help_text="Evaluation runs re-scored without the data.")
    exports_withdrawn = models.JSONField(default=list, help_text="Export jobs whose files were deleted.")

    class Meta:
        ordering = ["-erased_at"]

    def __str__(self) -> str:
        return f"erasure {self.pk} at {self.erased_at:%Y-%m-%d %H:%M}"
