"""Install the 50 catalogued topics (SPEC 2.5) so a fresh database can collect straight away.

Idempotent: topics already present (for example created by an import) are kept
and only their ordering and catalogue flag are brought in line. The topic list
is frozen here rather than imported, so this migration keeps meaning what it
meant when it was written even if the catalogue later grows.
"""

from django.db import migrations

TOPICS = {
    "Romantic relationships": (
        "A recent break-up",
        "Trust and jealousy",
        "Dating and meeting someone",
        "Arguments with a partner",
        "Long-distance relationship",
    ),
    "Family": (
        "Conflict with parents",
        "Sibling relationships",
        "Becoming a parent",
        "Caring for an ill relative",
        "Family expectations",
    ),
    "Friendship": (
        "Drifting apart from a friend",
        "Feeling left out",
        "A friend in trouble",
        "Making new friends",
        "A betrayal by a friend",
    ),
    "Work": (
        "Stress and burnout",
        "A difficult manager",
        "Losing a job",
        "Career change",
        "Conflict with a colleague",
    ),
    "Study": (
        "Exam pressure",
        "Choosing what to study",
        "Falling behind",
        "Feedback that hurt",
        "Balancing study and work",
    ),
    "Money": (
        "Debt worries",
        "Unexpected expenses",
        "Saving for the future",
        "Money and a partner",
        "Affording the basics",
    ),
    "Health": (
        "A new diagnosis",
        "Sleep problems",
        "Living with chronic pain",
        "Waiting for test results",
        "Body image",
    ),
    "Grief": (
        "Losing a parent",
        "Losing a pet",
        "Anniversary of a loss",
        "Grieving a friendship",
        "Supporting someone who is grieving",
    ),
    "Identity": (
        "Finding my place",
        "Cultural belonging",
        "Coming out",
        "Feeling like an impostor",
        "Changing values",
    ),
    "Hobbies": (
        "Losing motivation for a hobby",
        "Performance nerves",
        "Creative block",
        "Competing and losing",
        "Starting something new",
    ),
}


def install_topics(apps, schema_editor):
    Topic = apps.get_model("collection", "Topic")
    order = 0
    for category, subtopics in TOPICS.items():
        for subtopic in subtopics:
            Topic.objects.update_or_create(
                category=category, subtopic=subtopic, defaults={"order": order, "in_catalogue": True}
            )
            order += 1


class Migration(migrations.Migration):
    dependencies = [("collection", "0001_initial")]

    # Reversing leaves the rows: collected conversations may point at them (PROTECT).
    operations = [migrations.RunPython(install_topics, migrations.RunPython.noop)]
