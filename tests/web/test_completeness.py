"""Clean data by construction: completeness states, null for unanswered steps, exports that
default to complete conversations, and a datasheet that counts what is in and what is left out."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Conversation, Turn
from datasets.parquet_export import TURN_COLUMNS
from datasets.versions import build_datasheet, do_freeze_dataset_version
from tests.web.test_participant_flow import Walker, save_answers

MIGRATION = "0005_completeness_and_identity_screen"


@pytest.fixture(autouse=True)
def _quick_and_clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()


@pytest.fixture
def four_participants(study):
    """One finished conversation, one stopped right after a reply, one after the answers page ("no change"),
    and one that never got past choosing the topic: all through the participant pages."""
    study.min_turns = 1
    study.save(update_fields=["min_turns"])
    finished = Walker(Client(), flow.do_enrol(study))
    finished.to_chat()
    finished.turn(1)
    finished.finish()

    replied = Walker(Client(), flow.do_enrol(study))
    replied.to_chat()
    replied.send("I keep thinking about the exam.", 1)
    assert replied.reply(1)[-1]["type"] == "done"

    mood_only = Walker(Client(), flow.do_enrol(study))
    mood_only.to_chat()
    mood_only.send("I feel nervous about tomorrow.", 1)
    mood_only.reply(1)
    save_answers(mood_only, mood_only.url("turn/1/"))  # the answers page: "no change" and all 36 questions

    empty = Walker(Client(), flow.do_enrol(study))
    empty.to_chat()
    return {
        name: Conversation.objects.get(participant=w.participant)
        for name, w in (("finished", finished), ("replied", replied), ("mood_only", mood_only), ("empty", empty))
    }


def _export(tmp_path, *args: str) -> dict[str, cf.ConversationFile]:
    out = tmp_path / ("export" + "-".join(args))
    call_command("export", "--out", str(out), *args, stdout=io.StringIO())
    return {d.conversationId: d for d in (cf.load_conversation(p.read_bytes(), p.name) for p in out.glob("*.json"))}


def test_the_flow_keeps_each_state_and_the_default_export_holds_complete_conversations_only(
    four_participants, tmp_path
):
    c = four_participants
    states = {name: Conversation.objects.get(pk=conv.pk).completeness for name, conv in c.items()}
    assert states == {"finished": "complete", "replied": "unfinished", "mood_only": "unfinished", "empty": "empty"}
    assert set(Turn.objects.values_list("completeness", flat=True)) == {"complete", "annotation_unfinished"}

    default = _export(tmp_path)
    assert list(default) == [c["finished"].conversation_id]
    raw = json.loads((tmp_path / "export" / f"{c['finished'].conversation_id}.json").read_text())
    assert "completeness" not in raw["metadata"] and "completeness" not in raw["turns"][0]  # SPEC 3.1 shape as before

    everything = _export(tmp_path, "--include-unfinished")
    assert set(everything) == {conv.conversation_id for conv in c.values()}
    replied = everything[c["replied"].conversation_id]
    assert replied.metadata.completeness == "unfinished"
    (turn,) = replied.turns
    assert turn.completeness == "annotation_unfinished"
    assert turn.moodShiftTags is None  # unanswered: null, never [] ("no change")
    assert turn.annotations.binaryJudgements is None and turn.annotations.pairwiseComparisons is None
    assert turn.unanswered_steps == [
        "moodShiftTags",
        "binaryJudgements",
        "pairwiseComparisons",
        "selectedPairwiseQuestions",
    ]
    (mood_turn,) = everything[c["mood_only"].conversation_id].turns
    assert mood_turn.moodShiftTags == []  # answered "no change"
    assert len(mood_turn.annotations.binaryJudgements or []) == 36
    assert mood_turn.annotations.pairwiseComparisons is None
    assert everything[c["empty"].conversation_id].metadata.completeness == "empty"


def test_an_export_with_unfinished_conversations_validates_and_round_trips(four_participants, tmp_path):
    out = tmp_path / "all.jsonl"
    call_command("export", "--format", "jsonl", "--out", str(out), "--include-unfinished", stdout=io.StringIO())
    folder = tmp_path / "all"
    call_command("export", "--out", str(folder), "--include-unfinished", stdout=io.StringIO())
    report = io.StringIO()
    call_command("validate", str(folder), stdout=report)
    assert "4 files checked, 4 valid, 0 problems" in report.getvalue()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    # the conversation stopped right after a reply (ids are random, so pick it by content, not by order)
    replied = next(d for d in lines if d["turns"] and d["turns"][0]["moodShiftTags"] is None)
    assert replied["metadata"]["completeness"] == "unfinished"

    # Import into a clean database and export again: the same bytes, flags and nulls included.
    before = {p.name: p.read_bytes() for p in folder.glob("*.json")}
    texts = {name: json.loads(data) for name, data in before.items()}
    for document in texts.values():
        document["conversationId"] = "copy-" + document["conversationId"]
    copies = tmp_path / "copies"
    copies.mkdir()
    for name, document in texts.items():
        (copies / f"copy-{name}").write_text(cf.dumps_canonical(document))
    call_command("import", str(copies), stdout=io.StringIO())
    again = tmp_path / "again"
    call_command("export", "--out", str(again), "--include-unfinished", stdout=io.StringIO())
    for name in before:
        assert (again / f"copy-{name}").read_text() == (copies / f"copy-{name}").read_text()
    imported = Conversation.objects.get(conversation_id="copy-" + replied["conversationId"])
    assert imported.completeness == "unfinished"
    assert imported.turns.get().completeness == "annotation_unfinished" and not imported.turns.get().mood_answered


def test_parquet_rows_say_their_completeness_and_hold_null_for_unanswered_steps(four_participants, tmp_path):
    out = tmp_path / "turns.parquet"
    call_command("export", "--format", "parquet", "--out", str(out), "--include-unfinished", stdout=io.StringIO())
    rows = {r["conversation_id"]: r for r in pq.read_table(out).to_pylist()}
    replied = rows[four_participants["replied"].conversation_id]
    assert replied["turn_completeness"] == "annotation_unfinished"
    assert replied["conversation_completeness"] == "unfinished"
    assert replied["mood_shift_tags"] is None and replied["binary_judgements"] is None
    assert rows[four_participants["mood_only"].conversation_id]["mood_shift_tags"] == []
    finished = rows[four_participants["finished"].conversation_id]
    assert finished["turn_completeness"] == "complete" and finished["mood_shift_tags"] == []
    default = tmp_path / "default.parquet"
    call_command("export", "--format", "parquet", "--out", str(default), stdout=io.StringIO())
    assert pq.read_table(default).column("conversation_id").to_pylist() == [
        four_participants["finished"].conversation_id
    ]


def test_the_cli_says_what_it_left_out_and_why(four_participants, tmp_path):
    out = io.StringIO()
    call_command("export", "--out", str(tmp_path / "x"), stdout=out)
    assert "Exported 1 conversation(s)" in out.getvalue()
    assert "Left out: 2 unfinished, 1 empty (no reply); --include-unfinished" in out.getvalue()


def test_dataset_versions_default_to_complete_and_the_datasheet_counts_in_and_out(four_participants, study):
    complete = do_freeze_dataset_version("complete-only")
    assert list(complete.conversations.values_list("pk", flat=True)) == [four_participants["finished"].pk]
    sheet = build_datasheet(complete, "json", include_model_identity=False).data
    assert sheet["included"] == {
        "conversations": {"complete": 1, "unfinished": 0, "empty": 0},
        "turns": {"complete": 1, "annotation_unfinished": 0, "no_reply": 0},
    }
    assert sheet["left_out"] == {"withdrawn": 0, "quality_excluded": 0, "empty": 1, "unfinished": 2, "not_selected": 0}
    markdown = build_datasheet(complete, "json", include_model_identity=False).as_markdown()
    assert "| unfinished: the participant has not finished it (or a turn is unfinished) | 2 |" in markdown

    everything = do_freeze_dataset_version("with-unfinished", include_unfinished=True)
    assert everything.includes_unfinished and everything.conversation_count == 4
    sheet = build_datasheet(everything, "json", include_model_identity=False).data
    assert sheet["included"]["conversations"] == {"complete": 1, "unfinished": 2, "empty": 1}
    assert sheet["included"]["turns"] == {"complete": 1, "annotation_unfinished": 2, "no_reply": 0}
    assert sheet["left_out"] == {"withdrawn": 0, "quality_excluded": 0, "empty": 0, "unfinished": 0, "not_selected": 0}

    flow.do_withdraw(four_participants["finished"].participant)
    sheet = build_datasheet(complete, "json", include_model_identity=False).data
    assert sheet["counts"]["withdrawn_since_freeze"] == 1 and sheet["left_out"]["withdrawn"] == 1


def test_the_api_lists_complete_conversations_unless_asked(four_participants, client, researcher):
    client.force_login(researcher)
    default = client.get("/api/conversations/").json()
    assert [r["completeness"] for r in default["results"]] == ["complete"]
    everything = client.get("/api/conversations/?include_unfinished=true").json()
    assert sorted(r["completeness"] for r in everything["results"]) == ["complete", "empty", "unfinished", "unfinished"]
    assert client.get("/api/conversations/?completeness=empty").json()["count"] == 1
    assert client.get("/api/conversations/?completeness=nearly").status_code == 400
    replied = client.get(f"/api/conversations/{four_participants['replied'].conversation_id}/").json()
    assert replied["metadata"]["completeness"] == "unfinished" and replied["turns"][0]["moodShiftTags"] is None
    created = client.post(
        "/api/dataset-versions/", {"name": "api-all", "include_unfinished": True}, content_type="application/json"
    ).json()
    assert created["includes_unfinished"] is True and created["conversation_count"] == 4


def test_constraints_refuse_a_state_that_claims_more_than_the_rows(four_participants):
    conversation = four_participants["replied"]
    turn = conversation.turns.get()
    for changes in (
        {"completeness": "annotation_unfinished", "llm_response": ""},  # no reply but not no_reply
        {"annotation_completed_at": timezone.now()},  # annotated but not complete
        {"completeness": "complete"},  # complete without the mood step
        {"completeness": "finished"},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Turn.objects.filter(pk=turn.pk).update(**changes)
    with pytest.raises(IntegrityError), transaction.atomic():
        Conversation.objects.filter(pk=conversation.pk).update(completeness="complete")  # still in progress


@pytest.mark.django_db(transaction=True)
def test_migration_computes_the_state_of_existing_rows(schema_restored):
    executor = MigrationExecutor(connection)
    executor.migrate([("collection", "0004_q1_listed_option_strings")])
    apps = executor.loader.project_state(
        [("collection", "0004_q1_listed_option_strings"), ("annotation", "0001_initial")]
    ).apps
    OldConversation = apps.get_model("collection", "Conversation")
    OldTurn = apps.get_model("collection", "Turn")
    OldModel = apps.get_model("collection", "OriginalModel")
    OldTopic = apps.get_model("collection", "Topic")
    OldMood = apps.get_model("annotation", "MoodTag")
    OldJudgement = apps.get_model("annotation", "BinaryJudgement")
    model = OldModel.objects.create(name="migration-om", alias="om-mig00001")
    # the catalogue's topics come from a data migration, which a flushing test run earlier may have emptied
    topic, _ = OldTopic.objects.get_or_create(category="Work & Career", subtopic="migration test topic")
    now = timezone.now()

    def conversation(cid: str, status: str, source: str = "collected", finished: bool = False):
        return OldConversation.objects.create(
            conversation_id=cid,
            original_model=model,
            topic=topic,
            status=status,
            source=source,
            completed_at=now if finished else None,
        )

    def turn(conv, number: int, reply: str = "a reply", annotated: bool = False):
        return OldTurn.objects.create(
            conversation=conv,
            turn_number=number,
            user_message="hi",
            llm_response=reply,
            annotation_completed_at=now + timedelta(seconds=number) if annotated else None,
        )

    finished = conversation("m-finished", "complete", finished=True)
    turn(finished, 1, annotated=True)
    turn(finished, 2, annotated=True)
    in_progress = conversation("m-progress", "in_progress")
    turn(in_progress, 1, annotated=True)
    with_judgements = turn(in_progress, 2)  # mood saved ("no change"): its behaviour questions exist
    OldJudgement.objects.create(turn=with_judgements, position=0, question_id="B1")
    with_tags = turn(in_progress, 3)
    OldMood.objects.create(turn=with_tags, position=0, emotion="Upset")
    untouched = turn(in_progress, 4)
    empty = conversation("m-empty", "in_progress")
    turn(empty, 1, reply="")
    imported = conversation("m-imported", "complete", source="imported")
    turn(imported, 1)
    dangling = conversation("m-dangling", "complete", finished=True)
    turn(dangling, 1, annotated=True)
    turn(dangling, 2, reply="")
    withdrawn_after = conversation("m-withdrawn", "withdrawn", finished=True)
    turn(withdrawn_after, 1, annotated=True)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # through MIGRATION's data step and its sibling branches
    states = dict(Conversation.objects.values_list("conversation_id", "completeness"))
    assert states == {
        "m-finished": "complete",
        "m-progress": "unfinished",
        "m-empty": "empty",
        "m-imported": "complete",
        "m-dangling": "unfinished",
        "m-withdrawn": "complete",
    }
    turns = {
        (t.conversation.conversation_id, t.turn_number): (t.completeness, t.mood_answered, t.identity_screen)
        for t in Turn.objects.select_related("conversation")
    }
    assert turns[("m-finished", 1)] == ("complete", True, "unscreened")
    assert turns[("m-progress", 2)] == ("annotation_unfinished", True, "unscreened")
    assert turns[("m-progress", 3)] == ("annotation_unfinished", True, "unscreened")
    assert turns[("m-progress", untouched.turn_number)] == ("annotation_unfinished", False, "unscreened")
    assert turns[("m-empty", 1)] == ("no_reply", False, "unscreened")
    assert turns[("m-imported", 1)] == ("complete", True, "unscreened")
    assert turns[("m-dangling", 2)] == ("no_reply", False, "unscreened")

    executor = MigrationExecutor(connection)
    executor.migrate([("collection", "0004_q1_listed_option_strings")])  # and back: the fields go
    assert OldConversation.objects.filter(conversation_id="m-finished").exists()
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_conversation_without_turns_keeps_one_parquet_row_with_its_record(four_participants, tmp_path):
    """A participant who chose a topic and never wrote: JSON keeps the conversation, so the table must too."""
    out = tmp_path / "turns.parquet"
    call_command("export", "--format", "parquet", "--out", str(out), "--include-unfinished", stdout=io.StringIO())
    table = pq.read_table(out)
    metadata = {k.decode(): v.decode() for k, v in pq.read_metadata(out).metadata.items()}
    ids = set(table.column("conversation_id").to_pylist())
    assert len(ids) == int(metadata["attunebench.conversations"]) == 4
    empty = four_participants["empty"]
    rows = [r for r in table.to_pylist() if r["conversation_id"] == empty.conversation_id]
    assert len(rows) == 1
    (row,) = rows
    assert row["conversation_completeness"] == "empty"
    assert "turn_number" in TURN_COLUMNS and "user_message" in TURN_COLUMNS
    assert {column: row[column] for column in TURN_COLUMNS} == dict.fromkeys(TURN_COLUMNS)
    # The record beside the (absent) turn is the one the JSON export writes.
    (document,) = [
        d for d in _export(tmp_path, "--include-unfinished").values() if d.conversationId == row["conversation_id"]
    ]
    assert document.turns == [] and document.prePanas is not None
    assert row["participant_id"] == document.participant_profile.participant_id
    assert row["pre_total_positive"] == document.prePanas.totalPositiveAffect
    assert row["pre_panas_items"] == {item: document.prePanas.items.get(item) for item in cat.PANAS_ITEMS}
    assert row["timestamp"] is not None and row["category"] == document.metadata.category


def test_the_api_lists_what_a_version_frozen_with_unfinished_conversations_holds(four_participants, client, researcher):
    """A frozen version lists what it holds, as its export does: no complete-only default on top of it."""
    everything = do_freeze_dataset_version("with-unfinished", include_unfinished=True)
    complete = do_freeze_dataset_version("complete-only")
    client.force_login(researcher)
    listed = client.get(f"/api/conversations/?dataset_version={everything.pk}").json()
    assert listed["count"] == everything.conversation_count == 4
    assert sorted(r["completeness"] for r in listed["results"]) == ["complete", "empty", "unfinished", "unfinished"]
    only_empty = client.get(f"/api/conversations/?dataset_version={everything.pk}&completeness=empty").json()
    assert [r["conversation_id"] for r in only_empty["results"]] == [four_participants["empty"].conversation_id]
    assert client.get(f"/api/conversations/?dataset_version={complete.pk}").json()["count"] == 1
