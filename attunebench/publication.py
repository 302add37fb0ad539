"""A published dataset folder: Parquet tables laid out as a Hugging Face dataset repository, and reading it back.

The folder is what a reader downloads: ``data/<config>.parquet`` for every table (conversations,
turns, annotations, and when asked runs and scores), a ``README.md`` dataset card whose YAML header
the hub reads, ``croissant.json`` (Croissant 1.0 with its Responsible-AI fields), ``SHA256SUMS``
(every other file's sha256, in ``sha256sum`` format) and ``publication.json`` (the dataset version,
its content hash and the same checksums, for a program).

Every table has a fixed schema whose columns are documented here once (``TABLES``), so the card,
the Croissant metadata and the Parquet schema never disagree. Ids join across tables:
``conversation_id`` everywhere, ``turn_number`` within a conversation, ``em_model`` and ``mode``
between runs and scores.

The conversations table carries each conversation's canonical JSON (``record_json``) beside its
typed columns, and the runs table each run output's canonical JSON (``output_json``): those texts
are what the content hash covers and what ``attune score`` and ``attune import`` read, so a
published folder reproduces the source data byte for byte. The typed columns are derived from the
same documents by the functions below, so ``verify`` can rebuild every table from those texts and
compare. Django-free: the platform gathers the documents; this module lays them out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from attunebench import canonical as cf
from attunebench import catalogue as cat

FORMAT = "attunebench.published-dataset/1"
PUBLICATION_FILE = "publication.json"
CHECKSUMS_FILE = "SHA256SUMS"
CARD_FILE = "README.md"
CROISSANT_FILE = "croissant.json"
LICENSE_FILE = "LICENSE.md"
DATA_DIR = "data"


@dataclass(frozen=True)
class Column:
    """One documented column of a published table."""

    name: str
    type: pa.DataType
    description: str


def _panas_columns(when: str) -> list[Column]:
    label = "before" if when == "pre" else "after"
    return [
        Column(f"{when}_panas_total_positive", pa.int16(), f"PANAS positive-affect total {label} the conversation"),
        Column(f"{when}_panas_total_negative", pa.int16(), f"PANAS negative-affect total {label} the conversation"),
        *[
            Column(f"{when}_panas_{item.lower()}", pa.int8(), f"PANAS item '{item}' {label} the conversation (1-7)")
            for item in cat.PANAS_ITEMS
        ],
    ]


_TEXTS = pa.list_(pa.string())

CONVERSATION_COLUMNS = [
    Column("conversation_id", pa.string(), "Conversation id; joins every table"),
    Column("model", pa.string(), "Original model the participant talked to (an alias unless published by name)"),
    Column("provider", pa.string(), "Provider of the original model (empty when not recorded)"),
    Column("category", pa.string(), "Topic category the participant chose"),
    Column("subtopic", pa.string(), "Subtopic the participant chose"),
    Column("timestamp", pa.timestamp("us", tz="UTC"), "When the conversation started (UTC)"),
    Column("completeness", pa.string(), "complete, or what is unfinished (unanswered steps are null)"),
    Column("turn_count", pa.int32(), "Number of turns (rows of the turns table)"),
    Column("participant_id", pa.string(), "Pseudonymous participant id (keyed hash; the same across conversations)"),
    Column("participant_age", pa.string(), "Age band the participant gave"),
    Column("participant_traits", _TEXTS, "Traits the participant chose"),
    Column("participant_goals", _TEXTS, "Goals the participant chose"),
    Column("participant_responses_json", pa.string(), "The profile's other answers as JSON text"),
    Column("participant_diagnoses", _TEXTS, "Self-reported diagnoses, only under consent to sensitive data"),
    *_panas_columns("pre"),
    *_panas_columns("post"),
    Column("q1_looking_for", _TEXTS, "Post-conversation Q1: what the participant was looking for"),
    Column("q2_emotion_clarity", pa.string(), "Post-conversation Q2: how clear their emotions became"),
    Column("q3_model_fit", pa.string(), "Post-conversation Q3: how well the model fitted"),
    Column("q3_what_felt_off", _TEXTS, "Post-conversation Q3 follow-up: what felt off"),
    *[
        Column(f"four_branch_{branch}", pa.int8(), f"Four-Branch rating of the model: {branch} (1-7)")
        for branch in cat.FOUR_BRANCHES
    ],
    Column(
        "record_json", pa.string(), "The conversation's canonical JSON (SPEC 3.1): the text the content hash covers"
    ),
]

TURN_COLUMNS = [
    Column("conversation_id", pa.string(), "Conversation id (conversations.conversation_id)"),
    Column("turn_number", pa.int32(), "Turn number, from 1"),
    Column("completeness", pa.string(), "complete, or which step of the turn is unanswered"),
    Column("user_message", pa.string(), "What the participant wrote"),
    Column("llm_response", pa.string(), "The original model's reply"),
    Column("llm_improved", pa.string(), "Alternate reply: the model's own improved rewrite (null if none)"),
    Column("human_edited", pa.string(), "Golden reply: the participant's edit of the reply (null if none)"),
    Column("selected_pairwise_questions", _TEXTS, "Pairwise questions the participant was asked on this turn"),
]

ANNOTATION_COLUMNS = [
    Column("conversation_id", pa.string(), "Conversation id (conversations.conversation_id)"),
    Column("turn_number", pa.int32(), "Turn the annotation belongs to (turns.turn_number)"),
    Column("kind", pa.string(), "mood_tag, binary_judgement (one of the 36 answers) or pairwise_choice"),
    Column("position", pa.int32(), "Order of the annotation within its turn and kind, from 0"),
    Column("question_id", pa.string(), "Question id of a binary judgement or pairwise choice"),
    Column("emotion", pa.string(), "Mood tag: the emotion named"),
    Column("intensity", pa.int8(), "Mood tag: its intensity (null if not given)"),
    Column("observed_behavior", pa.string(), "Binary judgement: did the reply do it (yes/no/na)"),
    Column("preferred_behavior", pa.string(), "Binary judgement: would the participant want it (yes/no/na)"),
    Column("llm_value", pa.string(), "Binary judgement: the answer as the participant thinks the model sees it"),
    Column("response_a", pa.string(), "Pairwise choice: which reply was shown as A"),
    Column("response_b", pa.string(), "Pairwise choice: which reply was shown as B"),
    Column("winner", pa.string(), "Pairwise choice: the participant's choice"),
]

RUN_COLUMNS = [
    Column("conversation_id", pa.string(), "Conversation the run output predicts (conversations.conversation_id)"),
    Column("em_model", pa.string(), "Evaluated model"),
    Column("mode", pa.string(), "Evaluation mode"),
    Column("run_timestamp", pa.string(), "When the output was produced (ISO 8601)"),
    Column("prompt_version", pa.string(), "Prompt version of the replay"),
    Column("turn_count", pa.int32(), "Turns predicted"),
    Column("output_json", pa.string(), "The run output's canonical JSON (SPEC 3.2), as attune score reads it"),
]

SCORE_COLUMNS = [
    Column("conversation_id", pa.string(), "Scored conversation (conversations.conversation_id)"),
    Column("em_model", pa.string(), "Evaluated model (runs.em_model)"),
    Column("mode", pa.string(), "Evaluation mode (runs.mode)"),
    Column("composite_score", pa.float64(), "Composite score (SPEC 5 weights)"),
    Column("equal_weight_composite", pa.float64(), "Composite with equal weights"),
    Column("coverage", pa.float64(), "Share of turns the run answered"),
    Column("record_json", pa.string(), "The full per-conversation score record as attune score --json writes it"),
]

TABLES: dict[str, tuple[list[Column], str]] = {
    "conversations": (CONVERSATION_COLUMNS, "One row per conversation, with its profile, PANAS and answers"),
    "turns": (TURN_COLUMNS, "One row per turn: message, original reply, alternate and golden replies"),
    "annotations": (ANNOTATION_COLUMNS, "One row per annotation: mood tags, the 36 answers, pairwise choices"),
    "runs": (RUN_COLUMNS, "One row per evaluated-model run output (conversation, model, mode)"),
    "scores": (SCORE_COLUMNS, "One row per scored run output, as attune score computes it"),
}


def schema(table: str) -> pa.Schema:
    """The Parquet schema of a published table."""
    return pa.schema([(c.name, c.type) for c in TABLES[table][0]])


def data_path(table: str) -> str:
    """A table's file, relative to the folder (the layout the hub's ``configs`` point at)."""
    return f"{DATA_DIR}/{table}.parquet"


# ---------------------------------------------------------------------------
# Rows from canonical documents
# ---------------------------------------------------------------------------


def _panas(when: str, panas: cf.Panas | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        f"{when}_panas_total_positive": panas.totalPositiveAffect if panas else None,
        f"{when}_panas_total_negative": panas.totalNegativeAffect if panas else None,
    }
    for item in cat.PANAS_ITEMS:
        row[f"{when}_panas_{item.lower()}"] = panas.items.get(item) if panas else None
    return row


def profile_columns(profile: cf.ParticipantProfile | None) -> dict[str, Any]:
    """The participant's profile as flat columns, shared by every Parquet table that carries it, so a published
    dataset and a Parquet export spell a profile the same way."""
    return {
        "participant_age": profile.age if profile else None,
        "participant_traits": list(profile.traits) if profile else None,
        "participant_goals": list(profile.goals) if profile else None,
        "participant_responses_json": json.dumps(profile.responses, ensure_ascii=False, sort_keys=True)
        if profile
        else None,
        "participant_diagnoses": None if profile is None or profile.diagnoses is None else list(profile.diagnoses),
    }


def conversation_row(doc: cf.ConversationFile) -> dict[str, Any]:
    """The conversations-table row of one conversation."""
    profile, wide = doc.participant_profile, doc.conversationWideQuestions
    row: dict[str, Any] = {
        "conversation_id": doc.conversationId,
        "model": doc.metadata.model,
        "provider": doc.metadata.provider,
        "category": doc.metadata.category,
        "subtopic": doc.metadata.subtopic,
        "timestamp": cf.parse_timestamp(doc.metadata.timestamp),
        "completeness": doc.metadata.completeness,
        "turn_count": len(doc.turns),
        "participant_id": profile.participant_id if profile else None,
        **profile_columns(profile),
        **_panas("pre", doc.prePanas),
        **_panas("post", doc.postPanas),
        "q1_looking_for": list(wide.q1_lookingFor) if wide else None,
        "q2_emotion_clarity": wide.q2_emotionClarity if wide else None,
        "q3_model_fit": wide.q3_modelFit if wide else None,
        "q3_what_felt_off": list(wide.q3_followUp_whatFeltOff) if wide else None,
        "record_json": cf.dumps_canonical(doc),
    }
    for branch in cat.FOUR_BRANCHES:
        row[f"four_branch_{branch}"] = wide.fourBranchScores.get(branch) if wide else None
    return row


def turn_rows(doc: cf.ConversationFile) -> list[dict[str, Any]]:
    """The turns-table rows of one conversation."""
    rows = []
    for turn in doc.turns:
        alt = turn.annotations.alternateResponses
        selected = turn.annotations.selectedPairwiseQuestions
        rows.append(
            {
                "conversation_id": doc.conversationId,
                "turn_number": turn.turnNumber,
                "completeness": turn.completeness,
                "user_message": turn.userMessage,
                "llm_response": turn.llmResponse,
                "llm_improved": alt.llmImproved if alt else None,
                "human_edited": alt.humanEdited if alt else None,
                "selected_pairwise_questions": None if selected is None else list(selected),
            }
        )
    return rows


def annotation_rows(doc: cf.ConversationFile) -> list[dict[str, Any]]:
    """The annotations-table rows of one conversation: every mood tag, binary judgement and pairwise choice."""
    empty = {c.name: None for c in ANNOTATION_COLUMNS}
    rows = []
    for turn in doc.turns:
        base = {**empty, "conversation_id": doc.conversationId, "turn_number": turn.turnNumber}
        for i, tag in enumerate(turn.moodShiftTags or []):
            rows.append({**base, "kind": "mood_tag", "position": i, "emotion": tag.emotion, "intensity": tag.intensity})
        for i, judgement in enumerate(turn.annotations.binaryJudgements or []):
            rows.append(
                {
                    **base,
                    "kind": "binary_judgement",
                    "position": i,
                    "question_id": judgement.questionId,
                    "observed_behavior": judgement.observedBehavior,
                    "preferred_behavior": judgement.preferredBehavior,
                    "llm_value": judgement.llmValue,
                }
            )
        for i, choice in enumerate(turn.annotations.pairwiseComparisons or []):
            rows.append(
                {
                    **base,
                    "kind": "pairwise_choice",
                    "position": i,
                    "question_id": choice.questionId,
                    "response_a": choice.responseA,
                    "response_b": choice.responseB,
                    "winner": choice.winner,
                }
            )
    return rows


def run_row(run: cf.RunOutput) -> dict[str, Any]:
    """The runs-table row of one run output."""
    return {
        "conversation_id": run.conversationId,
        "em_model": run.em_model,
        "mode": run.mode,
        "run_timestamp": run.run_timestamp,
        "prompt_version": run.prompt_version,
        "turn_count": len(run.turns),
        "output_json": cf.dumps_canonical(run),
    }


def score_row(record: dict[str, Any]) -> dict[str, Any]:
    """The scores-table row of one per-conversation score record (``attune score --json``'s ``conversations``)."""
    return {
        "conversation_id": record["conversationId"],
        "em_model": record["em_model"],
        "mode": record["mode"],
        "composite_score": record["composite_score"],
        "equal_weight_composite": record["equal_weight_composite"],
        "coverage": record["coverage"],
        "record_json": json.dumps(record, ensure_ascii=False, sort_keys=True, allow_nan=False),
    }


def build_tables(
    documents: Sequence[cf.ConversationFile],
    runs: Sequence[cf.RunOutput] | None = None,
    score_records: Sequence[dict[str, Any]] | None = None,
) -> dict[str, pa.Table]:
    """Every table of a publication, rows in conversation-id order (then turn, model, mode)."""
    ordered = sorted(documents, key=lambda d: d.conversationId)
    rows: dict[str, list[dict[str, Any]]] = {
        "conversations": [conversation_row(d) for d in ordered],
        "turns": [r for d in ordered for r in turn_rows(d)],
        "annotations": [r for d in ordered for r in annotation_rows(d)],
    }
    if runs is not None:
        rows["runs"] = [run_row(r) for r in sorted(runs, key=lambda r: (r.conversationId, r.em_model, r.mode))]
    if score_records is not None:
        rows["scores"] = [
            score_row(r) for r in sorted(score_records, key=lambda r: (r["conversationId"], r["em_model"], r["mode"]))
        ]
    return {name: pa.Table.from_pylist(table_rows, schema=schema(name)) for name, table_rows in rows.items()}


def content_hash(documents: Iterable[cf.ConversationFile]) -> str:
    """sha256 over the canonical JSON of the conversations in conversation-id order (the version's content hash)."""
    digest = hashlib.sha256()
    for doc in sorted(documents, key=lambda d: d.conversationId):
        digest.update(cf.dumps_canonical(doc).encode("utf-8"))
    return digest.hexdigest()


# ---------------------------------------------------------------------------
# Writing the folder
# ---------------------------------------------------------------------------


@dataclass
class Publication:
    """What the card and the Croissant metadata say beside the tables (gathered by the platform)."""

    name: str  # the dataset version's name
    content_hash: str  # over the published records
    frozen_content_hash: str  # the version's content hash as recorded at the freeze
    description: str
    created_at: str  # ISO 8601
    code_version: str
    consent_versions: list[str]
    recruitment: str
    quality_exclusions: dict[str, int]  # reason label -> conversations
    left_out: dict[str, int]  # reason -> conversations not published
    participants: int
    diagnoses_published_for: int  # participants whose diagnoses are in, each under consent
    model_identity: bool
    license: str = "other"
    license_name: str = "attune-research-only"
    url: str = ""
    citation: str = ""
    withdrawal_statement: str = ""
    pseudonym_statement: str = ""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_publication(out: str | Path, tables: dict[str, pa.Table], info: Publication) -> dict[str, str]:
    """Write the folder: tables, card, croissant.json, publication.json and SHA256SUMS; returns the checksums.

    Refuses a folder that exists and is not empty, so a publication never mixes with older files.
    """
    root = Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"{root} exists and is not an empty folder: give a new folder")
    (root / DATA_DIR).mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        pq.write_table(table, root / data_path(name), compression="zstd")
    sums = {data_path(name): file_sha256(root / data_path(name)) for name in tables}
    counts = {name: table.num_rows for name, table in tables.items()}
    (root / CARD_FILE).write_text(dataset_card(info, counts), encoding="utf-8")
    sums[CARD_FILE] = file_sha256(root / CARD_FILE)
    (root / LICENSE_FILE).write_text(license_text(info), encoding="utf-8")
    sums[LICENSE_FILE] = file_sha256(root / LICENSE_FILE)
    croissant = croissant_metadata(info, counts, sums)
    (root / CROISSANT_FILE).write_text(json.dumps(croissant, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    sums[CROISSANT_FILE] = file_sha256(root / CROISSANT_FILE)
    manifest = {
        "format": FORMAT,
        "dataset_version": info.name,
        "content_hash": info.content_hash,
        "content_hash_rule": "sha256 over the conversations table's record_json texts in conversation_id order",
        "frozen_content_hash": info.frozen_content_hash,
        "model_identity": info.model_identity,
        "code_version": info.code_version,
        "counts": counts,
        "files": dict(sorted(sums.items())),
        "research_only_statement": cat.RESEARCH_ONLY_STATEMENT,
    }
    (root / PUBLICATION_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sums[PUBLICATION_FILE] = file_sha256(root / PUBLICATION_FILE)
    (root / CHECKSUMS_FILE).write_text(
        "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items())), encoding="utf-8"
    )
    return sums


def license_text(info: Publication) -> str:
    """LICENSE.md: the terms the card's ``license_name`` points at (research use only)."""
    named = "" if info.license == "other" else f"Licence: {info.license} (SPDX), with this condition.\n\n"
    return (
        f"# Terms of use: AttuneBench dataset {info.name}\n\n{named}{cat.RESEARCH_ONLY_STATEMENT}\n\n"
        "Use these data for research only. Do not try to identify participants, and do not redistribute a copy "
        "that includes a participant who has withdrawn: publish from the newest version instead.\n"
    )


def _size_category(n: int) -> str:
    """The hub's size_categories bucket for ``n`` rows."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def card_header(info: Publication, counts: dict[str, int]) -> dict[str, Any]:
    """The YAML header the hub reads (as a dict): license, language, task categories, size, configs."""
    header: dict[str, Any] = {
        "license": info.license,
        "language": ["en"],
        "task_categories": ["text-classification", "text-generation"],
        "tags": ["emotional-attunement", "benchmark", "human-annotations", "research-only"],
        "pretty_name": f"AttuneBench: {info.name}",
        "size_categories": [_size_category(counts.get("conversations", 0))],
        "configs": [
            {
                "config_name": name,
                "data_files": [{"split": "train", "path": data_path(name)}],
                **({"default": True} if name == "conversations" else {}),
            }
            for name in TABLES
            if name in counts
        ],
    }
    if info.license == "other":
        header["license_name"] = info.license_name
        header["license_link"] = LICENSE_FILE
    return header


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def to_yaml(value: Any, indent: int = 0) -> list[str]:
    """A small YAML writer for the card header (mappings, lists, scalars): the core needs no YAML library."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:")
                lines += to_yaml(item, indent + 2)
            else:
                lines.append(f"{pad}{key}: {_yaml_scalar(item)}")
    else:
        for item in value:
            if isinstance(item, dict):
                nested = to_yaml(item, indent + 2)
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines += nested[1:]
            else:
                lines.append(f"{pad}- {_yaml_scalar(item)}")
    return lines


def dataset_card(info: Publication, counts: dict[str, int]) -> str:
    """README.md: the hub's YAML header, then the sections a reader of a dataset expects."""
    header = card_header(info, counts)
    excluded = "".join(f"| {reason} | {n} |\n" for reason, n in info.quality_exclusions.items()) or "| none | 0 |\n"
    left_out = "".join(f"| {reason} | {n} |\n" for reason, n in info.left_out.items() if n) or "| none | 0 |\n"
    fields = []
    for name, (columns, summary) in TABLES.items():
        if name not in counts:
            continue
        fields.append(f"### `{name}` ({counts[name]} rows)\n\n{summary}.\n\n| column | type | meaning |\n|---|---|---|")
        fields += [f"| `{c.name}` | `{c.type}` | {c.description} |" for c in columns]
        fields.append("")
    loading = "\n".join(
        [
            "```python",
            "from datasets import load_dataset",
            "",
            'conversations = load_dataset("path/to/this/folder", "conversations", split="train")',
            'turns = load_dataset("path/to/this/folder", "turns", split="train")',
            "",
            "import pandas as pd",
            "",
            'annotations = pd.read_parquet("path/to/this/folder/data/annotations.parquet")',
            "```",
        ]
    )
    consents = ", ".join(info.consent_versions) or "not recorded (imported data)"
    frozen = (
        "The same as the version's content hash recorded when it was frozen."
        if info.content_hash == info.frozen_content_hash
        else f"The version's content hash recorded when it was frozen was `{info.frozen_content_hash or 'none'}`: "
        "participants who withdrew since are left out, so the published records differ."
    )
    identity = (
        "Original models appear under their real names: the publisher named each of them when publishing."
        if info.model_identity
        else "Original models appear under aliases (`om-...`), never under their real names."
    )
    return "\n".join(
        [
            "---",
            *to_yaml(header),
            "---",
            "",
            f"# AttuneBench dataset: {info.name}",
            "",
            f"> {cat.RESEARCH_ONLY_STATEMENT}",
            "",
            "## Summary",
            "",
            info.description
            or "Conversations between people and language models about emotionally significant topics, each "
            "annotated by the participant: mood shifts per turn, 36 yes/no judgements of the reply, pairwise "
            "preferences between replies, an edited (golden) reply, and PANAS before and after.",
            "",
            f"- Dataset version: `{info.name}` (frozen {info.created_at})",
            f"- Content hash: `{info.content_hash}`",
            f"- {frozen}",
            f"- Conversations: {counts.get('conversations', 0)}; turns: {counts.get('turns', 0)}; "
            f"participants: {info.participants}",
            f"- Written by Attune {info.code_version}",
            "",
            "Load it:",
            "",
            loading,
            "",
            "## How it was collected",
            "",
            f"Participants gave informed consent (consent version(s): {consents}) before taking part. "
            f"Recruitment: {info.recruitment or 'not recorded.'}",
            "",
            "Conversations excluded for quality by a researcher, by reason:",
            "",
            "| reason | conversations |",
            "|---|---|",
            excluded,
            "Conversations not in this publication, and why:",
            "",
            "| reason | conversations |",
            "|---|---|",
            left_out,
            "## Fields",
            "",
            "Every table is one Parquet file under `data/`; ids join across them (`conversation_id` everywhere, "
            "`turn_number` within a conversation, `em_model` and `mode` between runs and scores). A step the "
            "participant did not answer is null; an empty list is an answer.",
            "",
            *fields,
            "## Intended use",
            "",
            cat.RESEARCH_ONLY_STATEMENT,
            "",
            "Use it to study and compare how closely models track people's emotions and preferences. Do not use "
            "it to certify a model for clinical, therapeutic or crisis use, to identify participants, or to train "
            "systems that profile individuals.",
            "",
            "## Limitations",
            "",
            "The participants are volunteers who chose their topics, so the conversations do not represent any "
            "population; annotations are one person's view of their own conversation; scores describe agreement "
            "with these participants on these conversations only.",
            "",
            "## Personal and sensitive information",
            "",
            info.pseudonym_statement,
            "",
            f"Diagnoses are published for {info.diagnoses_published_for} participant(s), each under recorded "
            f"consent to sensitive data; every other participant's `participant_diagnoses` is null. {identity} "
            "Messages are the participants' own words and may mention personal circumstances.",
            "",
            "## Withdrawal",
            "",
            info.withdrawal_statement,
            " A participant who withdraws is left out of every publication made afterwards; a copy published before "
            "cannot be recalled, so ask readers to fetch the newest version.",
            "",
            "## Checking the files",
            "",
            f"`{CHECKSUMS_FILE}` lists the sha256 of every file (`sha256sum -c {CHECKSUMS_FILE}`). The content hash "
            "is sha256 over the `record_json` texts of the conversations table in `conversation_id` order; it is "
            "the hash the paper cites. `attune verify DATASET_DIR RESULTS_DIR` checks both, re-scores the "
            "published runs and compares the published scores bit for bit.",
            "",
            "## Citation",
            "",
            "```bibtex",
            info.citation
            or f"@misc{{attunebench_{_bib_key(info.name)},\n  title = {{AttuneBench dataset {info.name}}},\n"
            f"  note = {{content hash {info.content_hash}}}\n}}",
            "```",
            "",
        ]
    )


def _bib_key(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name).strip("_") or "dataset"


# ---------------------------------------------------------------------------
# Croissant
# ---------------------------------------------------------------------------

CROISSANT_CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}


def _croissant_type(arrow: pa.DataType) -> tuple[str, bool]:
    """The Croissant dataType of a column, and whether it repeats (a list column)."""
    if pa.types.is_list(arrow):
        return _croissant_type(arrow.value_type)[0], True
    if pa.types.is_integer(arrow):
        return "sc:Integer", False
    if pa.types.is_floating(arrow):
        return "sc:Float", False
    if pa.types.is_timestamp(arrow):
        return "sc:Date", False
    if pa.types.is_boolean(arrow):
        return "sc:Boolean", False
    return "sc:Text", False


def croissant_metadata(info: Publication, counts: dict[str, int], sums: dict[str, str]) -> dict[str, Any]:
    """Croissant 1.0 JSON-LD describing every file and field, with the Responsible-AI fields that apply."""
    distribution: list[dict[str, Any]] = [
        {
            "@type": "cr:FileObject",
            "@id": f"{name}-parquet",
            "name": f"{name}-parquet",
            "description": TABLES[name][1],
            "contentUrl": data_path(name),
            "encodingFormat": "application/x-parquet",
            "sha256": sums[data_path(name)],
        }
        for name in TABLES
        if name in counts
    ]
    distribution.append(
        {
            "@type": "cr:FileObject",
            "@id": "dataset-card",
            "name": "dataset-card",
            "description": "The dataset card (README.md)",
            "contentUrl": CARD_FILE,
            "encodingFormat": "text/markdown",
            "sha256": sums[CARD_FILE],
        }
    )
    record_sets = []
    for name, (columns, summary) in TABLES.items():
        if name not in counts:
            continue
        fields = []
        for column in columns:
            data_type, repeated = _croissant_type(column.type)
            field: dict[str, Any] = {
                "@type": "cr:Field",
                "@id": f"{name}/{column.name}",
                "name": column.name,
                "description": column.description,
                "dataType": data_type,
                "source": {"fileObject": {"@id": f"{name}-parquet"}, "extract": {"column": column.name}},
            }
            if repeated:
                field["repeated"] = True
            fields.append(field)
        record_sets.append(
            {"@type": "cr:RecordSet", "@id": name, "name": name, "description": summary, "field": fields}
        )
    license_url = (
        f"https://spdx.org/licenses/{info.license}.html" if info.license != "other" else info.url or "README.md"
    )
    return {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "name": f"attunebench-{_bib_key(info.name)}",
        "description": f"AttuneBench dataset version {info.name} (content hash {info.content_hash}). "
        + cat.RESEARCH_ONLY_STATEMENT,
        "license": license_url,
        "url": info.url or "https://example.invalid/attunebench",
        "version": "1.0.0",
        "datePublished": info.created_at[:10],
        "citeAs": info.citation or f"AttuneBench dataset {info.name}, content hash {info.content_hash}",
        "keywords": ["emotional attunement", "benchmark", "human annotations"],
        "distribution": distribution,
        "recordSet": record_sets,
        # Responsible-AI fields (Croissant RAI 1.0).
        "rai:dataCollection": "Volunteers talked with a language model about a topic of their choice and then "
        "annotated every turn of their own conversation (mood shifts, 36 yes/no judgements, pairwise "
        "preferences, an edited reply) and answered PANAS before and after.",
        "rai:dataCollectionType": "Direct measurement; self-report annotations by the participants",
        "rai:dataCollectionRawData": "The conversations as held by the collecting deployment; published records "
        "are pseudonymised",
        "rai:dataAnnotationProtocol": "Each participant annotated their own conversation in the study's "
        "annotation steps; no third-party annotators",
        "rai:dataPreprocessingProtocol": "Participant ids replaced by keyed-hash pseudonyms; diagnoses removed "
        "unless the participant consented to sensitive data; conversations of withdrawn participants removed; "
        "conversations excluded for quality by a researcher removed",
        "rai:dataUseCases": cat.RESEARCH_ONLY_STATEMENT,
        "rai:dataLimitations": "Volunteer participants on self-chosen topics; not representative of any "
        "population; one annotator (the participant) per conversation",
        "rai:dataBiases": "Self-selected participants; topics and models reflect the study's design",
        "rai:personalSensitiveInformation": info.pseudonym_statement,
        "rai:dataSocialImpact": "Meant to make emotional attunement of models measurable; scores are not a "
        "certificate of safety for clinical, therapeutic or crisis use",
        "rai:dataReleaseMaintenancePlan": info.withdrawal_statement,
    }


# ---------------------------------------------------------------------------
# Reading a published folder back
# ---------------------------------------------------------------------------


def is_publication(path: str | Path) -> bool:
    """Whether ``path`` is a published dataset folder (it holds publication.json of this format)."""
    marker = Path(path) / PUBLICATION_FILE
    if not marker.is_file():
        return False
    try:
        manifest = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def read_texts(folder: str | Path, table: str, column: str) -> Iterator[tuple[str, str]]:
    """(source, text) of every row's canonical JSON column of a published table, in file order."""
    path = Path(folder) / data_path(table)
    if not path.is_file():
        return
    values = pq.read_table(path, columns=[column]).column(column).to_pylist()
    for row, text in enumerate(values):
        yield f"{path} row {row}", text
