"""Dataset versions and export jobs move here from ``scoring`` and ``research``.

The tables stay where they are (``db_table`` keeps their names), so this
migration only tells Django's state about the move; no data is touched.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("collection", "0003_participant_pending_pre_panas"),
        ("scoring", "0002_registry_cap_help"),
        ("research", "0003_offline_baselines"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DatasetVersion",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=200, unique=True)),
                        ("description", models.TextField(blank=True)),
                        ("content_hash", models.CharField(blank=True, max_length=64)),
                        ("conversation_count", models.PositiveIntegerField(default=0)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("frozen", models.BooleanField(default=False)),
                        (
                            "conversations",
                            models.ManyToManyField(related_name="dataset_versions", to="collection.conversation"),
                        ),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "scoring_datasetversion"},
                ),
                migrations.CreateModel(
                    name="ExportJob",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "fmt",
                            models.CharField(
                                choices=[("json", "json"), ("jsonl", "jsonl"), ("parquet", "parquet")],
                                max_length=10,
                                verbose_name="format",
                            ),
                        ),
                        (
                            "include_model_identity",
                            models.BooleanField(
                                default=True,
                                help_text="Export the original model's real name (researcher exports); off gives aliases only.",
                            ),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("done", "Done"),
                                    ("failed", "Failed"),
                                ],
                                default="queued",
                                max_length=10,
                            ),
                        ),
                        ("progress_done", models.PositiveIntegerField(default=0)),
                        ("progress_total", models.PositiveIntegerField(default=0)),
                        (
                            "file_path",
                            models.CharField(blank=True, help_text="Relative to ATTUNE_EXPORT_DIR.", max_length=500),
                        ),
                        ("file_size", models.PositiveBigIntegerField(blank=True, null=True)),
                        ("file_sha256", models.CharField(blank=True, max_length=64)),
                        ("error", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "dataset_version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="export_jobs",
                                to="datasets.datasetversion",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "research_exportjob",
                        "ordering": ["-created_at"],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("fmt__in", ["json", "jsonl", "parquet"])),
                                name="export_job_fmt_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("status__in", ["queued", "running", "done", "failed"])),
                                name="export_job_status_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("progress_done__lte", models.F("progress_total"))),
                                name="export_job_done_le_total",
                            ),
                        ],
                    },
                ),
            ],
        ),
    ]
