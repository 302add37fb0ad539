"""Call transcripts: one row per model call of a run-conversation."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scoring", "0005_em_params_hold_no_key"),
    ]

    operations = [
        migrations.CreateModel(
            name="CallTranscript",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sequence", models.PositiveIntegerField(help_text="Order in which the conversation's calls started.")),
                ("call_type", models.CharField(max_length=20)),
                ("turn_number", models.PositiveIntegerField(blank=True, null=True)),
                ("role", models.CharField(help_text="em or judge", max_length=10)),
                ("model", models.CharField(max_length=200)),
                (
                    "attempt",
                    models.PositiveSmallIntegerField(default=1, help_text="2.. are re-asks after an unusable reply."),
                ),
                (
                    "messages",
                    models.JSONField(default=list, help_text="The exact messages sent: [{role, content}, ...]."),
                ),
                ("raw_reply", models.TextField(blank=True, null=True)),
                ("parsed", models.JSONField(blank=True, null=True)),
                ("parse_error", models.TextField(blank=True)),
                ("error", models.TextField(blank=True)),
                ("prompt_tokens", models.PositiveIntegerField(default=0)),
                ("completion_tokens", models.PositiveIntegerField(default=0)),
                ("cost_usd", models.FloatField(blank=True, null=True)),
                ("latency_s", models.FloatField(blank=True, null=True)),
                ("transport_attempts", models.PositiveSmallIntegerField(default=0)),
                ("cached", models.BooleanField(default=False)),
                (
                    "run_conversation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="calls", to="scoring.runconversation"
                    ),
                ),
            ],
            options={
                "ordering": ["run_conversation", "sequence"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run_conversation", "sequence"), name="call_transcript_sequence_unique"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("role__in", ["em", "judge"])), name="call_transcript_role_valid"
                    ),
                ],
            },
        ),
    ]
