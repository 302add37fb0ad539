"""The research group may set up studies: add and change studies, their model pools and quotas."""

from typing import Any

from django.db import migrations


def reapply_group(apps: Any, schema_editor: Any) -> None:
    from django.apps import apps as global_apps
    from django.contrib.auth.management import create_permissions

    create_permissions(global_apps.get_app_config("collection"), verbosity=0, apps=apps)
    from research.access.roles import apply_research_group

    apply_research_group(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0008_research_group_reads_call_transcripts"),
        ("collection", "0008_study_setup_status_pool_quotas_preview"),
    ]

    operations = [migrations.RunPython(reapply_group, migrations.RunPython.noop)]
