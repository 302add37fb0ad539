"""Evaluated models never hold a key: any stored ``api_key`` is dropped, then a constraint forbids one."""

from typing import Any

from django.db import migrations, models


def drop_stored_keys(apps: Any, schema_editor: Any) -> None:
    """Remove keys saved in params before the rule existed (they belong in the environment)."""
    evaluated_model = apps.get_model("scoring", "EvaluatedModel")
    for row in evaluated_model.objects.filter(params__has_key="api_key"):
        row.params = {k: v for k, v in row.params.items() if k != "api_key"}
        row.save(update_fields=["params"])


class Migration(migrations.Migration):
    dependencies = [
        ("scoring", "0004_conversation_score_post_coverage"),
    ]

    operations = [
        migrations.AlterField(
            model_name="evaluatedmodel",
            name="params",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="temperature, max_tokens, seed, ...; never a key: api_key_env names a provider key "
                "variable (ATTUNE_PROVIDER_KEY_ENV) read at call time.",
            ),
        ),
        migrations.RunPython(drop_stored_keys, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="evaluatedmodel",
            constraint=models.CheckConstraint(
                condition=models.Q(("params__has_key", "api_key"), _negated=True), name="em_params_hold_no_key"
            ),
        ),
    ]
