"""Study-link tokens are stored hashed, and links expire and can be revoked.

The existing ``token`` column becomes ``token_hash`` and every stored token is
replaced by its SHA-256, so links already sent out keep working (the lookup
hashes what the link carries) while nobody can read a token back. A link's
lifetime counts from ``link_issued_at``: for existing participants, when they
were created.
"""

import django.utils.timezone
from django.db import migrations, models

from collection.models import hash_token


def hash_existing_tokens(apps, schema_editor):
    """The data step: each plaintext token replaced by its hash; issue time = creation time."""
    participant_model = apps.get_model("collection", "Participant")
    for participant in participant_model.objects.only("pk", "token_hash", "created_at").iterator():
        participant.token_hash = hash_token(participant.token_hash)
        participant.link_issued_at = participant.created_at
        participant.save(update_fields=["token_hash", "link_issued_at"])


class Migration(migrations.Migration):
    dependencies = [
        ("collection", "0004_q1_listed_option_strings"),
    ]

    operations = [
        migrations.RenameField(model_name="participant", old_name="token", new_name="token_hash"),
        migrations.AlterField(
            model_name="participant",
            name="token_hash",
            field=models.CharField(editable=False, max_length=64, unique=True),
        ),
        migrations.AddField(
            model_name="participant",
            name="link_issued_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        migrations.AddField(
            model_name="participant",
            name="link_revoked_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="study",
            name="link_valid_days",
            field=models.PositiveSmallIntegerField(
                default=90, help_text="Days a participant's study link works after it was issued; 0 = it never expires."
            ),
        ),
        # Irreversible on purpose: a hash cannot give the token back.
        migrations.RunPython(hash_existing_tokens, migrations.RunPython.noop),
    ]
