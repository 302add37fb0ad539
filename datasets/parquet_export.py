"""A flat Parquet table of turns: one row per turn, annotations as typed nested columns.

A step the participant has not answered is null, never an empty list (an empty mood list
means "no change", SPEC 2.1); ``conversation_completeness`` and ``turn_completeness`` say
whether each row is finished (SPEC 3.1 completeness).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from attunebench import canonical as cf

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
TURN_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("turn_number", pa.int32()),
        ("model", pa.string()),
        ("category", pa.string()),
        ("subtopic", pa.string()),
        ("timestamp", pa.string()),
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
    ]
)


def _dumped(values: Sequence[BaseModel] | None) -> list[dict] | None:
    """A step's rows, or None (null) when the participant has not answered the step (SPEC 2.1: [] is an answer)."""
    return None if values is None else [v.model_dump() for v in values]


def _rows(doc: cf.ConversationFile) -> list[dict]:
    pre, post = doc.prePanas, doc.postPanas
    shared = {
        "conversation_id": doc.conversationId,
        "model": doc.metadata.model,
        "category": doc.metadata.category,
        "subtopic": doc.metadata.subtopic,
        "timestamp": doc.metadata.timestamp,
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
    return rows


def write_turns_parquet(documents: Iterable[cf.ConversationFile], out: str | Path, batch_rows: int = 5000) -> int:
    """Stream documents into a Parquet file in row batches; returns the number of conversations."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    pending: list[dict] = []
    with pq.ParquetWriter(out, TURN_SCHEMA) as writer:
        for doc in documents:
            pending.extend(_rows(doc))
            count += 1
            if len(pending) >= batch_rows:
                writer.write_table(pa.Table.from_pylist(pending, schema=TURN_SCHEMA))
                pending = []
        if pending or count == 0:
            writer.write_table(pa.Table.from_pylist(pending, schema=TURN_SCHEMA))
    return count
