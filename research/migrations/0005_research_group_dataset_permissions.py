"""Re-apply the research group: its dataset permissions now name the ``datasets`` app."""

from django.db import migrations


def reapply_group(apps, schema_editor):
    from django.apps import apps as global_apps
    from django.contrib.auth.management import create_permissions

    create_permissions(global_apps.get_app_config("datasets"), verbosity=0, apps=apps)
    from research.access.roles import apply_research_group

    apply_research_group(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0004_export_job_moves_to_datasets"),
        ("scoring", "0003_dataset_version_moves_to_datasets"),
    ]

    operations = [migrations.RunPython(reapply_group, migrations.RunPython.noop)]
