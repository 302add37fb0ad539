"""Create the ``research`` group with the permissions listed in research.roles."""

from django.db import migrations


def create_group(apps, schema_editor):
    # Permissions are normally created after migrate finishes; create them now so the group can hold them.
    from django.apps import apps as global_apps
    from django.contrib.auth.management import create_permissions

    for app_config in global_apps.get_app_configs():
        if app_config.label in {"collection", "annotation", "scoring", "research"}:
            create_permissions(app_config, verbosity=0, apps=apps)
    from research.access.roles import apply_research_group

    apply_research_group(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def remove_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="research").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("research", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("collection", "0001_initial"),
        ("annotation", "0001_initial"),
        ("scoring", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_group, remove_group)]
