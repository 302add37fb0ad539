"""A migration that breaks a running study on purpose: the migration safety check must flag every operation
marked UNSAFE below and none marked safe (tests/web/test_migration_safety.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("collection", "0012_participant_safety")]

    operations = [
        # UNSAFE: the previous release inserts studies without this column
        migrations.AddField("study", "review_note", models.CharField(max_length=20, default="")),
        # safe: the database fills it for the previous release's inserts
        migrations.AddField("study", "review_flag", models.BooleanField(default=False, db_default=False)),
        # safe: nullable
        migrations.AddField("study", "review_score", models.IntegerField(null=True)),
        # UNSAFE: was nullable; the previous release may still leave it empty
        migrations.AlterField("study", "max_participants", models.PositiveIntegerField(default=0)),
        # UNSAFE: the previous release still names user_message
        migrations.RenameField("turn", "user_message", "message"),
        # UNSAFE: the previous release still reads created_at
        migrations.RemoveField("study", "created_at"),
        # UNSAFE: the previous release still queries the old table
        migrations.RenameModel("Topic", "Subject"),
        # safe: a new table, and a NOT NULL column added to it in the same migration
        migrations.CreateModel("ReviewNote", fields=[("id", models.BigAutoField(primary_key=True))]),
        migrations.AddField("reviewnote", "text", models.TextField()),
    ]
