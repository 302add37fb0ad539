"""ExportJob now belongs to the ``datasets`` app; its table keeps its name, so only state changes."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0003_offline_baselines"),
        ("datasets", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="ExportJob")]),
    ]
