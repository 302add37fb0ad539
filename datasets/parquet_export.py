"""A flat Parquet table of turns: one row per turn, the full conversation record as typed columns.

A conversation with no turn at all (a participant who chose a topic and never wrote)
still has one row: its record with every turn column null (``turn_number`` included),
so the table holds the same conversations as the JSON export of the same data, with
their profile and pre-chat PANAS. Count turns as rows whose ``turn_number`` is not null.

Every row carries its conversation's record beside the turn: metadata (model, provider,
start time as a UTC ``timestamp``), the profile as exported (pseudonymised id; diagnoses
only where sensitive-data consent is recorded, else null), both PANAS surveys item by item
(a struct of the 20 items, 1-7) with their totals, and the conversation-wide answers
(Q1-Q3 and the Four-Branch ratings). The profile's free ``responses`` object keeps its
shape as a JSON text column (its keys differ between studies).

A step the participant has not answered is null, never an empty list (an empty mood list
means "no change", SPEC 2.1); ``conversation_completeness`` and ``turn_completeness`` say
whether each row is finished (SPEC 3.1 completeness).

The file's key/value metadata names the format (``attunebench.format``), the conversation
schema it flattens, the number of conversations and ``attunebench.content_sha256``: sha256
over the canonical JSON (``canonical.dumps_canonical``) of the conversations written, in
file order, so a reader can tie the table to the JSON export of the same data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from attunebench import canonical as cf
from attunebench import catalogue as cat
from attunebench.publication import profile_columns

#: /3: a conversation without turns has one row with null turn columns (/2 left it out).
FORMAT = "attunebench.turns-parquet/3"

_TAG = pa.struct([("emotion", pa.string()), ("intensity", pa.int8())])
_JUDGEMENT = pa.struct(
    [
        ("questionId", pa.string()),
        ("observedBehavior", pa.string()),
        ("preferredBehavior", pa.string()),
        ("llmValue", pa.string()),
    ]
)
_COMPARISON = pa.struct(
    [
        ("questionId", pa.string()),
        ("responseA", pa.string()),
        ("responseB", pa.string()),
        ("winner", pa.string()),
    ]
)
_PANAS_ITEMS = pa.struct([(item, pa.int8()) for item in cat.PANAS_ITEMS])
_FOUR_BRANCH = pa.struct([(branch, pa.int8()) for branch in cat.FOUR_BRANCHES])
TURN_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("turn_number", pa.int32()),
        ("model", pa.string()),
        ("category", pa.string()),
        ("subtopic", pa.string()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("participant_id", pa.string()),
        ("user_message", pa.string()),
        ("llm_response", pa.string()),
        ("mood_shift_tags", pa.list_(_TAG)),
        ("binary_judgements", pa.list_(_JUDGEMENT)),
        ("llm_improved", pa.string()),
        ("human_edited", pa.string()),
        ("pairwise_comparisons", pa.list_(_COMPARISON)),
        ("selected_pairwise_questions", pa.list_(pa.string())),
        ("pre_total_positive", pa.int16()),
        ("pre_total_negative", pa.int16()),
        ("post_total_positive", pa.int16()),
        ("post_total_negative", pa.int16()),
        ("conversation_completeness", pa.string()),
        ("turn_completeness", pa.string()),
        ("provider", pa.string()),
        ("participant_age", pa.string()),
        ("participant_traits", pa.list_(pa.string())),
        ("participant_goals", pa.list_(pa.string())),
        ("participant_responses_json", pa.string()),
        ("participant_diagnoses", pa.list_(pa.string())),
        ("pre_panas_items", _PANAS_ITEMS),
        ("post_panas_items", _PANAS_ITEMS),
        ("q1_looking_for", pa.list_(pa.string())),
        ("q2_emotion_clarity", pa.string()),
        ("q3_model_fit", pa.string()),
        ("q3_what_felt_off", pa.list_(pa.string())),
        ("four_branch_scores", _FOUR_BRANCH),
    ]
)


def _dumped(values: Sequence[BaseModel] | None) -> list[dict] | None:
    """A step's rows, or None (null) when the participant has not answered the step (SPEC 2.1: [] is an answer)."""
    return None if values is None else [v.model_dump() for v in values]


def _panas_items(panas: cf.Panas | None) -> dict[str, int | None] | None:
    """The 20 items of a survey (an item not answered is null); null when there is no survey."""
    return None if panas is None else {item: panas.items.get(item) for item in cat.PANAS_ITEMS}


def _record(doc: cf.ConversationFile) -> dict:
    """The conversation-wide columns: profile as exported, PANAS items, survey answers, provider."""
    profile, wide = doc.participant_profile, doc.conversationWideQuestions
    return {
        "provider": doc.metadata.provider or None,
        **profile_columns(profile),
        "pre_panas_items": _panas_items(doc.prePanas),
        "post_panas_items": _panas_items(doc.postPanas),
        "q1_looking_for": list(wide.q1_lookingFor) if wide else None,
        "q2_emotion_clarity": wide.q2_emotionClarity if wide else None,
        "q3_model_fit": wide.q3_modelFit if wide else None,
        "q3_what_felt_off": list(wide.q3_followUp_whatFeltOff) if wide else None,
        "four_branch_scores": {b: wide.fourBranchScores.get(b) for b in cat.FOUR_BRANCHES} if wide else None,
    }


#: The columns that describe a turn; all null in the one row of a conversation without turns.
TURN_COLUMNS = (
    "turn_number",
    "turn_completeness",
    "user_message",
    "llm_response",
    "mood_shift_tags",
    "binary_judgements",
    "llm_improved",
    "human_edited",
    "pairwise_comparisons",
    "selected_pairwise_questions",
)


def _rows(doc: cf.ConversationFile) -> list[dict]:
    """The rows of one conversation: one per turn, or one with null turn columns when it has no turn.

    Leaving a turnless conversation out would make the table disagree with the file's
    ``attunebench.conversations`` count and with the JSON export, and lose its record.
    """
    pre, post = doc.prePanas, doc.postPanas
    shared = {
        **_record(doc),
        "conversation_id": doc.conversationId,
        "model": doc.metadata.model,
        "category": doc.metadata.category,
        "subtopic": doc.metadata.subtopic,
        "timestamp": cf.parse_timestamp(doc.metadata.timestamp),
        "participant_id": doc.participant_profile.participant_id if doc.participant_profile else None,
        "pre_total_positive": pre.totalPositiveAffect if pre else None,
        "pre_total_negative": pre.totalNegativeAffect if pre else None,
        "post_total_positive": post.totalPositiveAffect if post else None,
        "post_total_negative": post.totalNegativeAffect if post else None,
        "conversation_completeness": doc.metadata.completeness,
    }
    rows = []
    for turn in doc.turns:
        alt = turn.annotations.alternateResponses
        rows.append(
            {
                **shared,
                "turn_number": turn.turnNumber,
                "turn_completeness": turn.completeness,
                "user_message": turn.userMessage,
                "llm_response": turn.llmResponse,
                "mood_shift_tags": _dumped(turn.moodShiftTags),
                "binary_judgements": _dumped(turn.annotations.binaryJudgements),
                "llm_improved": alt.llmImproved if alt else None,
                "human_edited": alt.humanEdited if alt else None,
                "pairwise_comparisons": _dumped(turn.annotations.pairwiseComparisons),
                "selected_pairwise_questions": None
                if turn.annotations.selectedPairwiseQuestions is None
                else list(turn.annotations.selectedPairwiseQuestions),
            }
        )
    if not rows:
        rows.append({**shared, **dict.fromkeys(TURN_COLUMNS)})
    return rows


def write_turns_parquet(documents: Iterable[cf.ConversationFile], out: str | Path, batch_rows: int = 5000) -> int:
    """Stream documents into a Parquet file in row batches; returns the number of conversations.

    The content hash is taken over the documents as they are written, so it holds for
    exactly this file's conversations in this file's order.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    digest = hashlib.sha256()
    pending: list[dict] = []
    with pq.ParquetWriter(out, TURN_SCHEMA) as writer:
        for doc in documents:
            pending.extend(_rows(doc))
            digest.update(cf.dumps_canonical(doc).encode("utf-8"))
            count += 1
            if len(pending) >= batch_rows:
                writer.write_table(pa.Table.from_pylist(pending, schema=TURN_SCHEMA))
                pending = []
        if pending or count == 0:
            writer.write_table(pa.Table.from_pylist(pending, schema=TURN_SCHEMA))
        writer.add_key_value_metadata(file_metadata(count, digest.hexdigest()))
    return count


def file_metadata(conversations: int, content_sha256: str) -> dict[str, str]:
    """The key/value metadata of a turns file (see the module docstring)."""
    return {
        "attunebench.format": FORMAT,
        "attunebench.conversation_schema": cf.CONVERSATION_SCHEMA_VERSION,
        "attunebench.conversations": str(conversations),
        "attunebench.content_sha256": content_sha256,
        "attunebench.content_hash_rule": "sha256 over canonical JSON (sorted keys, 2-space indent, final newline) "
        "of each conversation, in file order",
    }
