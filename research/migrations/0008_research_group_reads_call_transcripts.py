"""The research group may view call transcripts and frozen snapshots in the admin (read-only there)."""

from typing import Any

from django.db import migrations


def reapply_group(apps: Any, schema_editor: Any) -> None:
    from django.apps import apps as global_apps
    from django.contrib.auth.management import create_permissions

    create_permissions(global_apps.get_app_config("scoring"), verbosity=0, apps=apps)
    create_permissions(global_apps.get_app_config("research"), verbosity=0, apps=apps)
    from research.access.roles import apply_research_group

    apply_research_group(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0007_merge_erasure_and_snapshots"),
        ("scoring", "0008_merge_leases_and_transcripts"),
    ]

    operations = [migrations.RunPython(reapply_group, migrations.RunPython.noop)]
