"""A run records whether it asked for fresh calls and which repeat it is, and what the answers it reused
from the cache cost when they were paid (with cost_usd, the cost of every call its results rest on)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scoring", "0010_run_conversation_paid_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="cost_reused_usd",
            field=models.FloatField(
                db_default=0.0,
                default=0.0,
                help_text="What the answers it reused from other runs' cache cost when they were paid (USD): with cost_usd, the cost of every call the model's results rest on, whichever run paid it.",
            ),
        ),
        migrations.AddField(
            model_name="evaluationrun",
            name="fresh_calls",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Ask the models again instead of reusing answers other runs paid for (a model updated behind its name); the run's own answers are still reused when it resumes.",
            ),
        ),
        migrations.AddField(
            model_name="evaluationrun",
            name="repeat",
            field=models.PositiveIntegerField(
                db_default=0,
                default=0,
                help_text="Which repeat of this configuration (0 the first): each repeat gets answers of its own, cached under its number, so sampling variance can be measured across repeats.",
            ),
        ),
        migrations.AddField(
            model_name="runconversation",
            name="cost_reused_usd",
            field=models.FloatField(db_default=0.0, default=0.0),
        ),
        migrations.AlterField(
            model_name="evaluationrun",
            name="cost_usd",
            field=models.FloatField(default=0.0, help_text="What this run paid the providers (USD)."),
        ),
    ]
