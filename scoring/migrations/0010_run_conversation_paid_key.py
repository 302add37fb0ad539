# Existing rows get LEGACY_PAID_KEY (their attempts keep the paid tags they had); new rows a random key.

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scoring", "0009_calls_reused"),
    ]

    operations = [
        migrations.AddField(
            model_name="runconversation",
            name="paid_key",
            field=models.UUIDField(default=uuid.UUID(int=0), editable=False),
        ),
        migrations.AlterField(
            model_name="runconversation",
            name="paid_key",
            field=models.UUIDField(default=uuid.uuid4, editable=False),
        ),
    ]
