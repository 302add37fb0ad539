"""Finding canonical JSON documents in files, folders (any nesting) and .zip archives."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

from attunebench.canonical import (
    CanonicalError,
    ConversationFile,
    Problem,
    RunOutput,
    load_conversation,
    load_run,
)

T = TypeVar("T")


class RawDocument(NamedTuple):
    """One JSON document as read from disk or an archive, before decoding."""

    source: str
    raw: bytes


def iter_documents(paths: Iterable[str | Path]) -> Iterator[RawDocument | Problem]:
    """Yield a RawDocument per JSON document found, or a Problem for a path that gives none.

    Folders are walked recursively in sorted order so that every run reads the
    same files in the same order; .zip members ending in .json count as files.
    """
    for given in paths:
        path = Path(given)
        if not path.exists():
            yield Problem(source=str(path), path="", message="no such file or folder")
        elif path.is_dir():
            found = False
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix.lower() in {".json", ".zip"}:
                    found = True
                    yield from iter_documents([child])
            if not found:
                yield Problem(source=str(path), path="", message="folder holds no .json or .zip files")
        elif path.suffix.lower() == ".zip":
            try:
                with zipfile.ZipFile(path) as archive:
                    for member in sorted(archive.namelist()):
                        if member.lower().endswith(".json") and not member.endswith("/"):
                            yield RawDocument(f"{path}!{member}", archive.read(member))
            except zipfile.BadZipFile:
                yield Problem(source=str(path), path="", message="not a readable .zip archive")
        else:
            yield RawDocument(str(path), path.read_bytes())


def _read_all(
    paths: Iterable[str | Path], load: Callable[[bytes, str], T]
) -> tuple[list[tuple[str, T]], list[Problem]]:
    documents: list[tuple[str, T]] = []
    problems: list[Problem] = []
    for item in iter_documents(paths):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        source, raw = item
        try:
            documents.append((source, load(raw, source)))
        except CanonicalError as exc:
            problems.extend(exc.problems)
    return documents, problems


def read_conversations(paths: Iterable[str | Path]) -> tuple[list[tuple[str, ConversationFile]], list[Problem]]:
    """Every conversation file found, plus every problem (nothing raised)."""
    return _read_all(paths, load_conversation)


def read_runs(paths: Iterable[str | Path]) -> tuple[list[tuple[str, RunOutput]], list[Problem]]:
    """Every EM run output found, plus every problem (nothing raised)."""
    return _read_all(paths, load_run)
