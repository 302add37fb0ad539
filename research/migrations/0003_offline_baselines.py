"""Register the three offline baselines in the evaluated-model registry, so the run launcher offers them.

The names are the replay engine's (attunebench.replay.baselines.BASELINE_NAMES),
written out here because a migration must not change when that module does.
"""

from django.db import migrations

BASELINES = {
    "baseline:random": "Uniform random answers: the floor every model must beat.",
    "baseline:prior": "Majority answers from the other conversations (leave-one-out): what the data alone predicts.",
    "baseline:lexicon": "Emotion words and cues read off the participant's messages: a transparent keyword model.",
}


def register(apps, schema_editor):
    EvaluatedModel = apps.get_model("scoring", "EvaluatedModel")
    for name, notes in BASELINES.items():
        EvaluatedModel.objects.get_or_create(name=name, defaults={"kind": "offline", "notes": notes})


class Migration(migrations.Migration):
    dependencies = [("research", "0002_research_group"), ("scoring", "0001_initial")]

    operations = [migrations.RunPython(register, migrations.RunPython.noop)]
