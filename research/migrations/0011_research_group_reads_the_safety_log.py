"""The research group may read the safety log (the safety events the participant pages write) in the admin."""

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
        ("research", "0010_merge_quality_and_study_setup_permissions"),
        ("collection", "0012_participant_safety"),
    ]

    operations = [migrations.RunPython(reapply_group, migrations.RunPython.noop)]
