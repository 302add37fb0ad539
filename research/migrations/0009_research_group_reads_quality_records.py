"""The research group may read the quality-control records (attention checks, decisions, page times)."""

from typing import Any

from django.db import migrations


def reapply_group(apps: Any, schema_editor: Any) -> None:
    from django.apps import apps as global_apps
    from django.contrib.auth.management import create_permissions

    create_permissions(global_apps.get_app_config("collection"), verbosity=0, apps=apps)
    create_permissions(global_apps.get_app_config("annotation"), verbosity=0, apps=apps)
    from research.access.roles import apply_research_group

    apply_research_group(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0008_research_group_reads_call_transcripts"),
        ("collection", "0008_quality_control_settings_checks_decisions"),
        ("annotation", "0002_annotation_page_times"),
    ]

    operations = [migrations.RunPython(reapply_group, migrations.RunPython.noop)]
