"""`attune export --out` says what it creates and refuses a name that says otherwise, before writing anything."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from datasets.exchange import import_paths
from tests.documents import conversation_dict

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_conversation(tmp_path_factory):
    folder = tmp_path_factory.mktemp("in")
    (folder / "a.json").write_text(json.dumps(conversation_dict("a")), encoding="utf-8")
    assert import_paths([folder]).ok


def _export(*args: str) -> str:
    out = io.StringIO()
    call_command("export", *args, stdout=out)
    return out.getvalue()


def test_json_into_a_file_name_is_refused_and_nothing_is_made(tmp_path, one_conversation):
    target = tmp_path / "x.json"
    with pytest.raises(CommandError, match=r"looks like a file name.*--format jsonl"):
        _export("--format", "json", "--out", str(target))
    assert not target.exists()


def test_each_format_says_what_it_made(tmp_path, one_conversation):
    assert "into the folder" in _export("--format", "json", "--out", str(tmp_path / "folder"))
    assert (tmp_path / "folder").is_dir()
    assert "into the zip archive" in _export("--format", "json", "--out", str(tmp_path / "all.zip"))
    assert (tmp_path / "all.zip").is_file()
    assert "into the file" in _export("--format", "jsonl", "--out", str(tmp_path / "all.jsonl"))
    assert (tmp_path / "all.jsonl").is_file()


def test_a_one_file_format_into_a_folder_is_refused(tmp_path, one_conversation):
    with pytest.raises(CommandError, match="is a folder, and --format parquet writes one file"):
        _export("--format", "parquet", "--out", str(tmp_path))
