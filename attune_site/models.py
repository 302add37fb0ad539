"""What the whole deployment shares beyond its data: the fingerprints of its two keys (attune_site/identity.py)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class DeploymentKey(models.Model):
    """The fingerprint of a key as the first process to use this database had it; every later process must match.

    Only a one-way fingerprint is kept, never the key.
    """

    variable = models.CharField(max_length=40, unique=True, help_text="The environment variable that sets the key.")
    fingerprint = models.CharField(max_length=64)
    recorded_at = models.DateTimeField(default=timezone.now)
    recorded_by = models.CharField(max_length=200, blank=True, help_text="Host and process that recorded it.")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(variable__in=["ATTUNE_SECRET_KEY", "ATTUNE_PSEUDONYM_KEY"]),
                name="deployment_key_variable_known",
            ),
            models.CheckConstraint(
                condition=models.Q(fingerprint__regex=r"^[0-9a-f]{64}$"), name="deployment_key_fingerprint_hex"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.variable} {self.fingerprint[:12]}"
