"""A version's ``content_hash`` becomes the hash of what a default export (model aliases) writes.

Versions frozen before this hashed the conversations with the original models' real
names, which no default export reproduces. That value is kept, under its own name
(``content_hash_with_model_identity``); their ``content_hash`` becomes blank rather
than a hash recomputed from today's data, which might not be what was frozen.
"""

from django.db import migrations, models


def keep_identity_hashes_under_their_name(apps, schema_editor):
    DatasetVersion = apps.get_model("datasets", "DatasetVersion")
    DatasetVersion.objects.update(content_hash_with_model_identity=models.F("content_hash"), content_hash="")


def restore_identity_hashes(apps, schema_editor):
    DatasetVersion = apps.get_model("datasets", "DatasetVersion")
    DatasetVersion.objects.update(content_hash=models.F("content_hash_with_model_identity"))


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0003_merge_unfinished_and_withdrawn_exports"),
    ]

    operations = [
        migrations.AddField(
            model_name="datasetversion",
            name="content_hash_with_model_identity",
            field=models.CharField(
                blank=True,
                help_text="The same hash over an export with the original models' real names: only an export made "
                "with include_model_identity shows it (from an alias export it would let a reader test guesses of "
                "the names).",
                max_length=64,
            ),
        ),
        migrations.AlterField(
            model_name="datasetversion",
            name="content_hash",
            field=models.CharField(
                blank=True,
                help_text="sha256 over the canonical JSON of the conversations as a default export writes them "
                "(original models by alias), in conversationId order: recomputable from any default export "
                "(datasets.versions.CONTENT_HASH_RULE). Blank for versions frozen before it was recorded.",
                max_length=64,
            ),
        ),
        migrations.RunPython(keep_identity_hashes_under_their_name, restore_identity_hashes),
    ]
