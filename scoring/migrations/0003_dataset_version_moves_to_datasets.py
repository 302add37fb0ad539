"""DatasetVersion now belongs to the ``datasets`` app; its table keeps its name, so only state changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scoring", "0002_registry_cap_help"),
        ("datasets", "0001_initial"),
        ("research", "0004_export_job_moves_to_datasets"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="evaluationrun",
                    name="dataset_version",
                    field=models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to="datasets.datasetversion"
                    ),
                ),
                migrations.DeleteModel(name="DatasetVersion"),
            ],
        ),
    ]
