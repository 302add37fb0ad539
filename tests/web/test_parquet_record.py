"""Parquet with the full conversation record: typed columns and key/value metadata.

The turns file of an export is read back with pyarrow and compared, row by row,
with the canonical JSON export of the same conversations: profile (diagnoses only
where consent is recorded), PANAS items, conversation-wide answers, provider,
the start time as a UTC timestamp, and the content hash in the file's metadata.
"""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from attunebench import canonical as cf
from attunebench import catalogue as cat
from datasets.exchange import import_paths
from tests.documents import conversation_dict

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(tmp_path, sample_conversations):
    """The sample conversations plus one with recorded sensitive-data consent, exported as JSON and Parquet."""
    consented = conversation_dict("consented-1")
    consented["participant_profile"] = {
        **consented["participant_profile"],
        "participant_id": "p-consented",
        "diagnoses": ["Depression"],
        "sensitiveDataConsent": True,
    }
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "consented-1.json").write_text(json.dumps(consented))
    result = import_paths([tmp_path / "in"])
    assert result.ok, result.problems
    args = ("--include-model-identity",)
    call_command("export", "--format", "json", "--out", str(tmp_path / "json"), *args, stdout=io.StringIO())
    call_command("export", "--format", "parquet", "--out", str(tmp_path / "t.parquet"), *args, stdout=io.StringIO())
    documents = {
        p.stem: cf.load_conversation(p.read_bytes(), p.name)
        for p in sorted((tmp_path / "json").glob("*.json"))
        if p.name != "datasheet.json"
    }
    return documents, tmp_path / "t.parquet"


def test_columns_are_typed(exported):
    _, path = exported
    schema = pq.read_schema(path)
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert schema.field("pre_panas_items").type == pa.struct([(i, pa.int8()) for i in cat.PANAS_ITEMS])
    assert schema.field("four_branch_scores").type == pa.struct([(b, pa.int8()) for b in cat.FOUR_BRANCHES])
    assert schema.field("participant_diagnoses").type == pa.list_(pa.string())
    assert schema.field("q1_looking_for").type == pa.list_(pa.string())
    for kept in ("conversation_completeness", "turn_completeness", "participant_id", "mood_shift_tags"):
        assert kept in schema.names


def test_every_row_carries_its_conversations_record_as_in_the_json_export(exported):
    documents, path = exported
    rows = pq.read_table(path).to_pylist()
    assert {r["conversation_id"] for r in rows} == set(documents)
    assert len(rows) == sum(len(d.turns) for d in documents.values())
    for row in rows:
        doc = documents[row["conversation_id"]]
        profile, wide = doc.participant_profile, doc.conversationWideQuestions
        assert row["timestamp"] == cf.parse_timestamp(doc.metadata.timestamp)
        assert row["timestamp"].tzinfo is not None
        assert row["provider"] == (doc.metadata.provider or None)
        assert row["participant_id"] == profile.participant_id
        assert row["participant_age"] == profile.age
        assert row["participant_traits"] == profile.traits and row["participant_goals"] == profile.goals
        assert json.loads(row["participant_responses_json"]) == profile.responses
        assert row["participant_diagnoses"] == profile.diagnoses
        assert row["pre_panas_items"] == {i: doc.prePanas.items.get(i) for i in cat.PANAS_ITEMS}
        assert row["post_panas_items"] == {i: doc.postPanas.items.get(i) for i in cat.PANAS_ITEMS}
        assert row["q1_looking_for"] == wide.q1_lookingFor
        assert row["q2_emotion_clarity"] == wide.q2_emotionClarity and row["q3_model_fit"] == wide.q3_modelFit
        assert row["q3_what_felt_off"] == wide.q3_followUp_whatFeltOff
        assert row["four_branch_scores"] == {b: wide.fourBranchScores.get(b) for b in cat.FOUR_BRANCHES}


def test_diagnoses_appear_only_where_consent_is_recorded(exported):
    _, path = exported
    rows = pq.read_table(path).to_pylist()
    by_id = {r["conversation_id"]: r for r in rows}
    assert by_id["consented-1"]["participant_diagnoses"] == ["Depression"]
    # The sample files list diagnoses but record no consent: exported without them.
    assert by_id["conv-work-01"]["participant_diagnoses"] is None
    assert "Anxiety" not in json.dumps(rows, default=str)


def test_a_hand_checked_row(exported):
    """conv-work-01 turn 1, as sample_data/conv-work-01.json gives it."""
    _, path = exported
    row = next(
        r for r in pq.read_table(path).to_pylist() if r["conversation_id"] == "conv-work-01" and r["turn_number"] == 1
    )
    assert row["timestamp"] == datetime(2025, 2, 11, 21, 14, tzinfo=UTC)
    assert row["provider"] == "provider-a"
    assert row["pre_panas_items"]["Distressed"] == 6 and row["post_panas_items"]["Distressed"] == 5
    assert row["q2_emotion_clarity"] == "Clear and explicitly stated"
    assert row["four_branch_scores"] == {"perceiving": 4, "facilitating": 3, "understanding": 4, "managing": 3}


def test_file_metadata_names_the_format_and_hashes_the_canonical_json(exported):
    documents, path = exported
    metadata = {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items()}
    assert metadata["attunebench.format"] == "attunebench.turns-parquet/3"
    assert metadata["attunebench.conversation_schema"] == cf.CONVERSATION_SCHEMA_VERSION
    assert metadata["attunebench.conversations"] == str(len(documents))
    # sha256 over each conversation's canonical JSON in file (conversation-id) order, as in the JSON export.
    digest = hashlib.sha256()
    for conversation_id in sorted(documents):
        digest.update(cf.dumps_canonical(documents[conversation_id]).encode("utf-8"))
    assert metadata["attunebench.content_sha256"] == digest.hexdigest()
