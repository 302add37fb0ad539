"""Both research-group permission changes (quality records, study set-up), applied once more
after every model they name exists, whichever order the two branches ran in."""

from typing import Any

from django.db import migrations


def reapply_group(apps: Any, schema_editor: Any) -> None:
    from django.apps import apps as global_apps
    from django.contrib.auth.management import create_permissions

    for label in ("collection", "annotation"):
        create_permissions(global_apps.get_app_config(label), verbosity=0, apps=apps)
    from research.access.roles import apply_research_group

    apply_research_group(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0009_research_group_reads_quality_records"),
        ("research", "0009_research_group_sets_up_studies"),
        ("collection", "0010_merge_quality_control"),
        ("annotation", "0002_annotation_page_times"),
    ]

    operations = [migrations.RunPython(reapply_group, migrations.RunPython.noop)]
