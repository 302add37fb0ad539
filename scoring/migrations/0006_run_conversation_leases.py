"""Leases on run conversations: a running conversation is held by one worker until its lease lapses.

Rows left "running" by workers before leases existed hold no lease; they go back to "pending" (resume or
requeue replays them, from the call cache) before the constraint that a running row is leased is added.
"""

from datetime import UTC, datetime
from typing import Any

from django.db import migrations, models


def unleased_running_to_pending(apps: Any, schema_editor: Any) -> None:
    """Replays left running go back to pending; a human rater's conversation in progress keeps running under
    the never-lapsing human lease (scoring.models.HUMAN_LEASE_OWNER)."""
    running = apps.get_model("scoring", "RunConversation").objects.filter(status="running")
    running.filter(run__evaluated_model__kind="human").update(
        lease_owner="human-rater", lease_expires_at=datetime(9999, 1, 1, tzinfo=UTC)
    )
    running.exclude(run__evaluated_model__kind="human").update(status="pending")


class Migration(migrations.Migration):
    dependencies = [
        ("collection", "0004_q1_listed_option_strings"),
        ("scoring", "0005_em_params_hold_no_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="runconversation",
            name="attempts",
            field=models.PositiveIntegerField(default=0, help_text="Times a worker has claimed it."),
        ),
        migrations.AddField(
            model_name="runconversation",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, help_text="When its worker last renewed the lease.", null=True),
        ),
        migrations.AddField(
            model_name="runconversation",
            name="lease_expires_at",
            field=models.DateTimeField(
                blank=True, help_text="Renewed while the worker lives; past it, the conversation is stalled.", null=True
            ),
        ),
        migrations.AddField(
            model_name="runconversation",
            name="lease_owner",
            field=models.CharField(
                blank=True, help_text="The worker (host:pid:token) replaying it while it runs.", max_length=200
            ),
        ),
        migrations.AddField(
            model_name="runconversation",
            name="requeued",
            field=models.PositiveIntegerField(default=0, help_text="Times it was requeued after its lease lapsed."),
        ),
        migrations.AddIndex(
            model_name="runconversation",
            index=models.Index(fields=["status", "lease_expires_at"], name="run_conversation_lease_idx"),
        ),
        migrations.RunPython(unleased_running_to_pending, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="runconversation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("status", "running"),
                        ("lease_expires_at__isnull", False),
                        models.Q(("lease_owner", ""), _negated=True),
                    ),
                    models.Q(
                        models.Q(("status", "running"), _negated=True),
                        ("lease_expires_at__isnull", True),
                        ("lease_owner", ""),
                    ),
                    _connector="OR",
                ),
                name="run_conversation_running_iff_leased",
            ),
        ),
    ]
