"""Stored Q1 answers move to the benchmark's listed option strings, and back on reverse.

The two wordings are frozen here on purpose: a migration must keep meaning the
same thing when the catalogue later changes. Q2 and Q3 kept their wording, so
only ``looking_for`` is rewritten. Answers in neither wording are left alone.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

# Earlier screen wording -> the listed string (SPEC 2.4 of the benchmark contract, frozen 2026-12).
PREVIOUS_TO_LISTED: dict[str, str] = {
    "Just listen / let me vent": "To just listen or let me vent",
    "Help me understand or sort out my feelings": "To help me understand or sort out my feelings",
    "Help me think through options or decide": "To help me think through options or make a decision",
    "Help with something urgent, risky or high-stakes": "To help with something urgent, risky, or high-stakes",
    "Specific information or advice": "To get specific information or advice",
    "Help me calm down or feel steadier": "To help me calm down or feel steadier",
}
LISTED_TO_PREVIOUS: dict[str, str] = {listed: previous for previous, listed in PREVIOUS_TO_LISTED.items()}


def _rewrite(apps: Any, mapping: dict[str, str]) -> None:
    answers = apps.get_model("collection", "ConversationWideAnswers")
    for row in answers.objects.only("pk", "looking_for").iterator():
        if not isinstance(row.looking_for, list):
            continue
        rewritten: list[Any] = []
        for value in row.looking_for:
            new = mapping.get(value, value) if isinstance(value, str) else value
            if new not in rewritten:
                rewritten.append(new)
        if rewritten != row.looking_for:
            answers.objects.filter(pk=row.pk).update(looking_for=rewritten)


def to_listed(apps: Any, schema_editor: Any) -> None:
    _rewrite(apps, PREVIOUS_TO_LISTED)


def to_previous(apps: Any, schema_editor: Any) -> None:
    _rewrite(apps, LISTED_TO_PREVIOUS)


class Migration(migrations.Migration):
    dependencies = [
        ("collection", "0003_participant_pending_pre_panas"),
    ]

    operations = [
        migrations.RunPython(to_listed, to_previous),
    ]
