"""Completeness states of conversations and turns, and the identity screen's flag.

The data step gives existing rows the state the rules of ``collection.completeness``
give new ones, from what is stored:

- a turn without a reply is ``no_reply``; a turn whose annotation was finished, or
  one imported from a canonical file (which had no way to say otherwise), is
  ``complete``; any other turn with a reply is ``annotation_unfinished``;
- the mood step counts as answered when the turn is complete or has mood tags or
  behaviour questions (those were set up when the mood was saved);
- a conversation with no replied turn is ``empty``; one the participant finished
  (post-chat answers saved, or imported) with every turn complete is ``complete``;
  every other is ``unfinished``.

Identity screening starts with this migration: existing replies stay ``unscreened``.
"""

from django.db import migrations, models
from django.db.models import Exists, OuterRef, Q


def compute_states(apps, schema_editor):
    Conversation = apps.get_model("collection", "Conversation")
    Turn = apps.get_model("collection", "Turn")
    MoodTag = apps.get_model("annotation", "MoodTag")
    BinaryJudgement = apps.get_model("annotation", "BinaryJudgement")

    imported = Q(conversation__source="imported")
    replied = Turn.objects.exclude(llm_response="")
    Turn.objects.filter(llm_response="").update(completeness="no_reply")
    replied.filter(Q(annotation_completed_at__isnull=False) | imported).update(completeness="complete")
    replied.filter(annotation_completed_at__isnull=True).exclude(imported).update(completeness="annotation_unfinished")
    Turn.objects.filter(
        Q(completeness="complete")
        | imported
        | Exists(MoodTag.objects.filter(turn_id=OuterRef("pk")))
        | Exists(BinaryJudgement.objects.filter(turn_id=OuterRef("pk")))
    ).update(mood_answered=True)

    has_reply = Exists(Turn.objects.filter(conversation_id=OuterRef("pk")).exclude(llm_response=""))
    open_turn = Exists(Turn.objects.filter(conversation_id=OuterRef("pk")).exclude(completeness="complete"))
    Conversation.objects.update(completeness="empty")
    Conversation.objects.filter(has_reply).update(completeness="unfinished")
    Conversation.objects.filter(has_reply, status__in=["complete", "withdrawn"]).filter(
        Q(source="imported") | Q(completed_at__isnull=False)
    ).exclude(open_turn).update(completeness="complete")


def checks_now(apps, schema_editor):
    """Run Postgres's deferred foreign-key checks of the rows just updated now: ALTER TABLE refuses a table
    with pending trigger events, and the constraints below follow the data step in one transaction."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("collection", "0004_q1_listed_option_strings"),
        ("annotation", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="completeness",
            field=models.CharField(
                choices=[("complete", "complete"), ("unfinished", "unfinished"), ("empty", "empty")],
                default="empty",
                help_text="complete: finished by the participant with every turn complete (the default export); unfinished: started but not finished; empty: no turn with a reply. Withdrawal is the status, not this.",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="completeness",
            field=models.CharField(
                choices=[
                    ("complete", "complete"),
                    ("annotation_unfinished", "annotation_unfinished"),
                    ("no_reply", "no_reply"),
                ],
                default="no_reply",
                help_text="complete: every annotation step answered; annotation_unfinished: reply stored, annotation not finished; no_reply: the message has no stored reply.",
                max_length=24,
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="identity_leaks",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Names the screen caught in discarded or masked replies (never shown).",
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="identity_screen",
            field=models.CharField(
                choices=[
                    ("unscreened", "unscreened"),
                    ("clean", "clean"),
                    ("regenerated", "regenerated"),
                    ("masked", "masked"),
                ],
                default="unscreened",
                help_text="What the identity screen did to the reply before the participant saw it: clean, regenerated (a reply naming a model, provider or product was discarded and asked again), masked (names replaced), or unscreened (stored before screening existed, or imported).",
                max_length=12,
            ),
        ),
        migrations.AddField(
            model_name="turn",
            name="mood_answered",
            field=models.BooleanField(
                default=False,
                help_text="The mood step was answered (no tags then means 'no change'); until then it exports as null.",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(fields=["completeness"], name="conversation_completeness_idx"),
        ),
        migrations.RunPython(compute_states, migrations.RunPython.noop),
        migrations.RunPython(checks_now, checks_now),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.CheckConstraint(
                condition=models.Q(("completeness__in", ["complete", "unfinished", "empty"])),
                name="conversation_completeness_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="conversation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("completeness", "complete"), _negated=True),
                    ("status__in", ["complete", "withdrawn"]),
                    _connector="OR",
                ),
                name="conversation_complete_only_when_finished",
            ),
        ),
        migrations.AddConstraint(
            model_name="turn",
            constraint=models.CheckConstraint(
                condition=models.Q(("completeness__in", ["complete", "annotation_unfinished", "no_reply"])),
                name="turn_completeness_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="turn",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("llm_response", ""), _negated=True), ("completeness", "no_reply"), _connector="OR"
                ),
                name="turn_without_reply_is_no_reply",
            ),
        ),
        migrations.AddConstraint(
            model_name="turn",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("annotation_completed_at__isnull", True), ("completeness", "complete"), _connector="OR"
                ),
                name="turn_annotated_is_complete",
            ),
        ),
        migrations.AddConstraint(
            model_name="turn",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("completeness", "complete"), _negated=True), ("mood_answered", True), _connector="OR"
                ),
                name="turn_complete_has_mood",
            ),
        ),
        migrations.AddConstraint(
            model_name="turn",
            constraint=models.CheckConstraint(
                condition=models.Q(("identity_screen__in", ["unscreened", "clean", "regenerated", "masked"])),
                name="turn_identity_screen_valid",
            ),
        ),
    ]
