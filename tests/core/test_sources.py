"""Finding documents: an export bundle's datasheet is read past, so a bundle imports as it was exported."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from attunebench.sources import read_conversations
from tests.documents import conversation_dict

DATASHEET = {"dataset_version": "v1", "conversations": 1, "left_out": {"withdrawn": 0}}


def _bundle_folder(root: Path) -> Path:
    folder = root / "export-1"
    (folder / "conversations").mkdir(parents=True)
    (folder / "conversations" / "a.json").write_text(json.dumps(conversation_dict("a")), encoding="utf-8")
    (folder / "datasheet.json").write_text(json.dumps(DATASHEET), encoding="utf-8")
    return folder


def test_a_bundle_folder_gives_its_conversations_and_no_problem_for_its_datasheet(tmp_path):
    documents, problems = read_conversations([_bundle_folder(tmp_path)])
    assert [doc.conversationId for _, doc in documents] == ["a"] and problems == []


def test_a_bundle_zip_gives_its_conversations_and_no_problem_for_its_datasheet(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("conversations/a.json", json.dumps(conversation_dict("a")))
        bundle.writestr("datasheet.json", json.dumps(DATASHEET))
    documents, problems = read_conversations([archive])
    assert [doc.conversationId for _, doc in documents] == ["a"] and problems == []


def test_any_other_stray_json_is_still_a_problem_named_by_its_file(tmp_path):
    folder = _bundle_folder(tmp_path)
    (folder / "notes.json").write_text(json.dumps({"hello": 1}), encoding="utf-8")
    documents, problems = read_conversations([folder])
    assert len(documents) == 1 and problems and all("notes.json" in p.source for p in problems)
