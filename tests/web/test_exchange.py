"""Import atomicity, export formats and the byte-stable export → import → export round trip."""

from __future__ import annotations

import json
import zipfile

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from attunebench import canonical as cf
from collection.models import Conversation, OriginalModel, Participant, SensitiveProfile, hash_platform_id
from datasets.exchange import export_conversations, exportable_conversations, import_paths
from datasets.pseudonyms import export_pseudonym
from tests.documents import conversation_dict

pytestmark = pytest.mark.django_db


def _write(path, data) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def _delete_everything() -> None:
    """Collected data is PROTECTed, so remove it leaf-first as a fresh database would look."""
    from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
    from collection.models import (
        ConversationWideAnswers,
        FourBranchRating,
        PanasSurvey,
        ParticipantProfile,
        Topic,
        Turn,
    )

    for model in (
        MoodTag,
        BinaryJudgement,
        PairwiseComparison,
        AlternateResponses,
        Turn,
        FourBranchRating,
        ConversationWideAnswers,
        PanasSurvey,
        Conversation,
        ParticipantProfile,
        SensitiveProfile,
        Participant,
        OriginalModel,
        Topic,
    ):
        model.objects.all().delete()


def test_import_writes_every_section(tmp_path):
    document = conversation_dict("a")
    document["participant_profile"]["sensitiveDataConsent"] = True  # diagnoses are stored only under consent
    _write(tmp_path / "a.json", document)
    result = import_paths([tmp_path])
    assert result.ok and result.imported == ["a"]
    conversation = Conversation.objects.get(conversation_id="a")
    assert conversation.status == Conversation.Status.COMPLETE
    assert conversation.turns.count() == 2
    turn1 = conversation.turns.get(turn_number=1)
    assert [(t.emotion, t.intensity) for t in turn1.mood_tags.all()] == [("Distressed", 5)]
    assert [(j.question_id, j.observed, j.preferred) for j in turn1.binary_judgements.order_by("position")] == [
        ("B1", "yes", "yes"),
        ("B13", "yes", "yes"),
        ("B313", "no", "no"),
    ]
    assert turn1.alternates.human_edited == "That sounds exhausting. I'm here to listen."
    assert [(p.response_a, p.response_b, p.winner) for p in turn1.pairwise_comparisons.order_by("position")] == [
        ("human", "original", "A"),
        ("alternate", "original", "B"),
    ]
    pre = conversation.panas_surveys.get(kind="pre")
    assert (pre.total_positive, pre.total_negative) == (30, 30)  # derived: 10 items × 3 each side
    assert pre.item_responses.count() == 20
    # The imported id is stored only as its keyed hash, the pseudonym every export writes.
    assert SensitiveProfile.objects.get(participant__pseudonym=export_pseudonym("test-p1")).diagnoses == ["Anxiety"]
    assert not Participant.objects.filter(pseudonym="test-p1").exists()
    assert conversation.original_model.name == "acme/chat-large"


def test_one_bad_file_among_good_ones_writes_nothing_and_lists_every_problem(tmp_path):
    _write(tmp_path / "good1.json", conversation_dict("good1"))
    _write(tmp_path / "good2.json", conversation_dict("good2"))
    bad = conversation_dict("bad")
    bad["turns"][1]["annotations"]["binaryJudgements"][0]["observedBehavior"] = "maybe"
    bad["turns"][0]["moodShiftTags"][0]["intensity"] = "huge"
    _write(tmp_path / "bad.json", bad)
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")

    result = import_paths([tmp_path])

    assert not result.ok
    messages = [str(p) for p in result.problems]
    assert (
        f"{tmp_path / 'bad.json'}: turns[1].annotations.binaryJudgements[0].observedBehavior: expected yes/no/na, got 'maybe'"
        in messages
    )
    assert any("bad.json: turns[0].moodShiftTags[0].intensity" in m for m in messages)
    assert any(m.startswith(f"{tmp_path / 'broken.json'}: not valid JSON") for m in messages)
    assert Conversation.objects.count() == 0
    assert Participant.objects.count() == 0 and OriginalModel.objects.count() == 0


def test_duplicate_ids_in_batch_or_database_are_rejected(tmp_path):
    _write(tmp_path / "one.json", conversation_dict("same"))
    assert import_paths([tmp_path / "one.json"]).ok
    _write(tmp_path / "two.json", conversation_dict("other"))
    _write(tmp_path / "three.json", conversation_dict("other"))
    result = import_paths([tmp_path / "one.json", tmp_path / "two.json", tmp_path / "three.json"])
    messages = "\n".join(str(p) for p in result.problems)
    assert "'same' is already in the database" in messages
    assert "'other' is also in" in messages
    assert Conversation.objects.count() == 1


def test_import_command_reports_problems_and_fails(tmp_path, capsys):
    bad = conversation_dict("x")
    bad["turns"][0]["annotations"]["pairwiseComparisons"][0]["responseB"] = "human"
    _write(tmp_path / "x.json", bad)
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import", str(tmp_path))
    assert "responseA and responseB are both 'human'" in capsys.readouterr().err


def test_import_reads_zip_archives(tmp_path):
    archive = tmp_path / "batch.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("nested/one.json", json.dumps(conversation_dict("z1")))
        z.writestr("two.json", json.dumps(conversation_dict("z2")))
        z.writestr("notes.txt", "ignored")
    assert import_paths([archive]).imported == ["z1", "z2"]


@pytest.mark.parametrize("include_identity", [False, True])
def test_export_import_export_is_byte_stable(tmp_path, include_identity):
    _write(tmp_path / "src.json", conversation_dict("rt-1"))
    second = conversation_dict("rt-2", participant_profile=None, postPanas=None, conversationWideQuestions=None)
    _write(tmp_path / "src2.json", second)
    assert import_paths([tmp_path / "src.json", tmp_path / "src2.json"]).ok
    first_out = tmp_path / "first"
    export_conversations(exportable_conversations(), "json", first_out, include_identity)

    _delete_everything()
    assert import_paths([first_out]).ok
    second_out = tmp_path / "second"
    export_conversations(exportable_conversations(), "json", second_out, include_identity)

    for name in ("rt-1.json", "rt-2.json"):
        assert (first_out / name).read_bytes() == (second_out / name).read_bytes()
    exported = json.loads((first_out / "rt-1.json").read_text())
    if include_identity:
        assert exported["metadata"]["model"] == "acme/chat-large"
    else:
        assert exported["metadata"]["model"].startswith("om-")
        assert "acme" not in (first_out / "rt-1.json").read_text()


def test_export_formats_and_pseudonyms(tmp_path):
    participant = Participant.objects.create(platform_id_hash=hash_platform_id("prolific-123"))
    _write(tmp_path / "a.json", conversation_dict("a"))
    import_paths([tmp_path])
    conversation = Conversation.objects.get()
    conversation.participant = participant
    conversation.save()

    call_command("export", "--format", "jsonl", "--out", str(tmp_path / "out.jsonl"))
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert len(lines) == 1
    document = cf.parse_conversation(json.loads(lines[0]))
    assert document.participant_profile.participant_id == export_pseudonym(participant.pseudonym)
    assert participant.pseudonym not in lines[0]
    assert "prolific-123" not in lines[0] and participant.token not in lines[0]
    assert participant.platform_id_hash not in lines[0]

    call_command("export", "--format", "parquet", "--out", str(tmp_path / "out.parquet"))
    rows = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [(r["conversation_id"], r["turn_number"]) for r in rows] == [("a", 1), ("a", 2)]
    assert rows[0]["mood_shift_tags"] == [{"emotion": "Distressed", "intensity": 5}]
    assert rows[1]["binary_judgements"][0]["questionId"] == "B11"

    call_command("export", "--format", "json", "--out", str(tmp_path / "out.zip"))
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        assert z.namelist() == ["a.json"]
        cf.load_conversation(z.read("a.json"), "a.json")


def test_withdrawn_conversations_are_never_exported(tmp_path):
    _write(tmp_path / "a.json", conversation_dict("a"))
    _write(
        tmp_path / "b.json",
        conversation_dict(
            "b", participant_profile={**conversation_dict()["participant_profile"], "participant_id": "p-b"}
        ),
    )
    import_paths([tmp_path])
    Participant.objects.filter(pseudonym=export_pseudonym("p-b")).update(withdrawn_at="2025-03-02T00:00:00Z")
    assert list(exportable_conversations().values_list("conversation_id", flat=True)) == ["a"]
    Conversation.objects.filter(conversation_id="a").update(status=Conversation.Status.WITHDRAWN)
    assert exportable_conversations().count() == 0


def test_a_file_in_the_benchmarks_older_format_imports_and_exports_canonical(tmp_path):
    old = conversation_dict("old-1")
    old["conversationWideQuestions"] = {
        "Q1": ["Just listen / let me vent", "TO HELP ME CALM DOWN OR FEEL STEADIER"],
        "Q2": "MIXED OR CONFLICTED",
        "Q3": "Mostly well-matched",
        "q3_followUp_whatFeltOff": ["Too much advice"],
        "fourBranchScores": {"perceiving": 5},
    }
    old["postPanas"] = {"responses": {"proud": "4"}, "totalPositiveAffect": 35}
    ann = old["turns"][0]["annotations"]
    ann["binaryJudgements"] = [{"questionId": "B1", "did_occur": "yes", "should_occur": "no"}]
    ann["alternateResponses"] = {"alternate1": "better", "alternate2": "mine"}
    ann["pairwiseComparisons"] = [
        {"questionId": "general", "response_1": "human", "response_2": "original", "winner": "response_1"}
    ]
    _write(tmp_path / "old.json", old)
    assert import_paths([tmp_path / "old.json"]).ok
    export_conversations(exportable_conversations(), "json", tmp_path / "out")
    text = (tmp_path / "out" / "old-1.json").read_text()
    for older in ('"Q1"', "did_occur", "should_occur", "alternate1", "response_1", "Just listen"):
        assert older not in text, older
    exported = json.loads(text)
    assert exported["conversationWideQuestions"]["q1_lookingFor"] == [
        "To just listen or let me vent",
        "To help me calm down or feel steadier",
    ]
    assert exported["conversationWideQuestions"]["q2_emotionClarity"] == "Mixed or conflicted"
    assert exported["postPanas"]["items"] == {"Proud": 4}
    judgement = exported["turns"][0]["annotations"]["binaryJudgements"][0]
    assert (judgement["observedBehavior"], judgement["preferredBehavior"]) == ("yes", "no")


def test_import_refuses_an_off_list_survey_answer(tmp_path):
    bad = conversation_dict("off-1")
    bad["conversationWideQuestions"]["q3_modelFit"] = "Pretty good"
    _write(tmp_path / "bad.json", bad)
    result = import_paths([tmp_path / "bad.json"])
    assert not result.ok and not Conversation.objects.filter(conversation_id="off-1").exists()
    assert [str(p) for p in result.problems] == [
        f"{tmp_path}/bad.json: conversationWideQuestions.q3_modelFit: 'Pretty good' is not one of the listed "
        "options for q3_modelFit"
    ]


def test_one_panas_writer_keeps_given_totals_and_replaces_ratings(tmp_path):
    # The importer and the participant flow both store surveys through collection.study_flow.write_panas.
    from attunebench import catalogue as cat
    from collection.models import PanasSurvey
    from collection.study_flow import write_panas

    _write(tmp_path / "a.json", conversation_dict("a"))
    assert import_paths([tmp_path]).imported == ["a"]
    conversation = Conversation.objects.get(conversation_id="a")
    # Partial items and given totals (as an imported file may hold) are stored as they are.
    survey = write_panas(
        conversation, "pre", cf.Panas(items={"Upset": 2}, totalPositiveAffect=33, totalNegativeAffect=12)
    )
    assert (survey.total_positive, survey.total_negative) == (33, 12)
    assert {r.item: r.rating for r in survey.item_responses.all()} == {"Upset": 2}
    # Writing again replaces the survey; complete sides get derived totals: 10 items x 3 = 30, 10 x 5 = 50.
    ratings = {item: 3 if item in cat.POSITIVE_AFFECT_ITEMS else 5 for item in cat.PANAS_ITEMS}
    survey = write_panas(conversation, "pre", cf.Panas(items=ratings))
    assert PanasSurvey.objects.filter(conversation=conversation, kind="pre").count() == 1
    assert (survey.total_positive, survey.total_negative) == (30, 50)
    assert {r.item: r.rating for r in survey.item_responses.all()} == ratings


def test_import_reads_the_platforms_own_jsonl_export(tmp_path):
    """export --format jsonl → import: one conversation a line; a bad line is named and nothing is written."""
    _write(tmp_path / "one.json", conversation_dict("l-1"))
    _write(tmp_path / "two.json", conversation_dict("l-2", participant_profile=None))
    assert import_paths([tmp_path / "one.json", tmp_path / "two.json"]).ok
    exported = tmp_path / "conversations.jsonl"
    assert export_conversations(exportable_conversations(), "jsonl", exported) == 2
    before = exported.read_bytes()

    _delete_everything()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(exported.read_text().replace('"l-2"', '"l-3"') + '{"conversationId": "l-4"}\n')
    refused = import_paths([broken])
    assert not refused.ok and Conversation.objects.count() == 0
    assert {p.source for p in refused.problems} == {f"{broken} line 3"}

    result = import_paths([exported])
    assert result.ok, result.problems
    assert result.imported == ["l-1", "l-2"]
    again = tmp_path / "again.jsonl"
    export_conversations(exportable_conversations(), "jsonl", again)
    assert again.read_bytes() == before


def test_import_reads_its_files_twice_and_writes_nothing_if_they_change_between(tmp_path):
    """Validated one at a time and then written one at a time (memory flat whatever the study's size): input
    that changes between the passes is refused with a clear error and leaves nothing behind."""
    from datasets.exchange import import_stream

    _write(tmp_path / "one.json", conversation_dict("s-1"))
    _write(tmp_path / "two.json", conversation_dict("s-2"))
    documents = [
        (str(tmp_path / name), cf.load_conversation((tmp_path / name).read_bytes()))
        for name in ("one.json", "two.json")
    ]
    reads = []

    def read():
        reads.append(len(reads))
        return documents if len(reads) == 1 else documents[:1]  # the second pass sees one file fewer

    with pytest.raises(ValueError, match="changed while it was imported"):
        import_stream(read)
    assert len(reads) == 2 and Conversation.objects.count() == 0

    lines = tmp_path / "crlf.jsonl"
    texts = [json.dumps(conversation_dict(cid)) for cid in ("s-3", "s-4")]
    lines.write_bytes(("\r\n".join(texts) + "\r\n\n").encode())
    result = import_paths([lines])
    assert result.ok, result.problems
    assert result.imported == ["s-3", "s-4"] and Conversation.objects.count() == 2
