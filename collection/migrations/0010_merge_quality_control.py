from django.db import migrations

"""Joins the quality-control branch of collection with platform entry and study set-up."""


class Migration(migrations.Migration):
    dependencies = [
        ("collection", "0008_quality_control_settings_checks_decisions"),
        ("collection", "0009_merge_platform_entry_and_study_setup"),
    ]

    operations = []
