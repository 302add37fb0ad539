from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collection", "0004_q1_listed_option_strings"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="skipped_comparisons",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='Comparisons never asked because both replies had the same text: [{"questionId", "responseA", "responseB", "reason": "identical"}].',
            ),
        ),
    ]
