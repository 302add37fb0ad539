"""Finding canonical JSON documents in files, folders (any nesting) and .zip archives.

A ``.json`` file holds one document; a ``.jsonl`` file (what ``attune export --format
jsonl`` writes) holds one per line, each read as its own document whose source names
the file and the line (``conversations.jsonl line 3``), so a problem points at it.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, NamedTuple, TypeVar

from attunebench.canonical import (
    CanonicalError,
    ConversationFile,
    Problem,
    RunOutput,
    load_conversation,
    load_run,
)

T = TypeVar("T")

#: The file that marks a published dataset folder (``publication.PUBLICATION_FILE``): looked for before the
#: publication module, and with it pyarrow and numpy, is imported, so reading plain files never imports them
#: (a third of a second before ``attune eval``'s first request).
PUBLICATION_MARKER = "publication.json"


def _is_publication(path: Path) -> bool:
    from attunebench import publication

    return publication.is_publication(path)


class RawDocument(NamedTuple):
    """One JSON document as read from disk or an archive, before decoding."""

    source: str
    raw: bytes


#: File endings read as documents: one per file, or one per line for JSON Lines.
JSON_SUFFIXES = (".json", ".jsonl")
#: An export bundle's description of itself, beside its conversations: never a conversation or run document.
DATASHEET_NAME = "datasheet.json"


def _is_datasheet(name: str) -> bool:
    return name.replace("\\", "/").rsplit("/", 1)[-1].lower() == DATASHEET_NAME


def _is_jsonl(name: str) -> bool:
    return name.lower().endswith(".jsonl")


def _lines(source: str, handle: IO[bytes]) -> Iterator[RawDocument]:
    """The documents of a JSON Lines file: one per non-blank line, its source naming the line (1-based).

    Read line by line from the open file, so a file of thousands of conversations is never held whole;
    lines are numbered as ``bytes.splitlines`` would number them (a lone carriage return ends one too).
    """
    number = 0
    for chunk in handle:
        for line in chunk.splitlines():
            number += 1
            if line.strip():
                yield RawDocument(f"{source} line {number}", line)


def _opener(path: Path) -> Callable[[], IO[bytes]]:
    return lambda: path.open("rb")


def _documents(source: str, opener: Callable[[], IO[bytes]]) -> Iterator[RawDocument]:
    """One document for a .json file, one per line for a .jsonl file (streamed)."""
    with opener() as handle:
        if _is_jsonl(source):
            yield from _lines(source, handle)
        else:
            yield RawDocument(source, handle.read())


#: The tables of a published dataset folder that hold documents, and the column holding each one's text.
PUBLISHED_TABLES = (("conversations", "record_json"), ("runs", "output_json"))


def iter_documents(
    paths: Iterable[str | Path], published_tables: Iterable[str] = ("conversations", "runs")
) -> Iterator[RawDocument | Problem]:
    """Yield a RawDocument per JSON document found, or a Problem for a path that gives none.

    Folders are walked recursively in sorted order so that every run reads the
    same files in the same order; .zip members ending in .json or .jsonl count as
    files. A .jsonl file gives one document per non-blank line. An export bundle's
    ``datasheet.json`` is its description, so a bundle imports as it was exported. A published
    dataset folder (``attune publish dataset``) gives the documents its ``published_tables`` carry
    (a reader of conversations alone asks for that table only).
    """
    for given in paths:
        path = Path(given)
        if not path.exists():
            yield Problem(source=str(path), path="", message="no such file or folder")
        elif path.is_dir() and (path / PUBLICATION_MARKER).is_file() and _is_publication(path):
            # A published dataset folder: its conversations and run outputs are the canonical texts
            # its Parquet tables carry, read in table order (see attunebench/publication.py).
            from attunebench import publication

            for table, column in PUBLISHED_TABLES:
                if table not in published_tables:
                    continue
                for source, text in publication.read_texts(path, table, column):
                    yield RawDocument(source, text.encode("utf-8"))
        elif path.is_dir():
            found = False
            for child in sorted(path.rglob("*")):
                if (
                    child.is_file()
                    and child.suffix.lower() in {*JSON_SUFFIXES, ".zip"}
                    and not _is_datasheet(child.name)
                ):
                    found = True
                    yield from iter_documents([child], published_tables)
            if not found:
                yield Problem(source=str(path), path="", message="folder holds no .json, .jsonl or .zip files")
        elif path.suffix.lower() == ".zip":
            try:
                with zipfile.ZipFile(path) as archive:
                    for member in sorted(archive.namelist()):
                        if (
                            member.lower().endswith(JSON_SUFFIXES)
                            and not member.endswith("/")
                            and not _is_datasheet(member)
                        ):
                            yield from _documents(f"{path}!{member}", partial(archive.open, member))
            except zipfile.BadZipFile:
                yield Problem(source=str(path), path="", message="not a readable .zip archive")
        else:
            yield from _documents(str(path), _opener(path))


def _iter_loaded(
    paths: Iterable[str | Path], load: Callable[[bytes, str], T], published_table: str
) -> Iterator[tuple[str, T] | Problem]:
    for item in iter_documents(paths, (published_table,)):
        if isinstance(item, Problem):
            yield item
            continue
        source, raw = item
        try:
            yield source, load(raw, source)
        except CanonicalError as exc:
            yield from exc.problems


def _read_all(
    paths: Iterable[str | Path], load: Callable[[bytes, str], T], published_table: str
) -> tuple[list[tuple[str, T]], list[Problem]]:
    documents: list[tuple[str, T]] = []
    problems: list[Problem] = []
    for item in _iter_loaded(paths, load, published_table):
        if isinstance(item, Problem):
            problems.append(item)
        else:
            documents.append(item)
    return documents, problems


def iter_conversations(paths: Iterable[str | Path]) -> Iterator[tuple[str, ConversationFile] | Problem]:
    """Each conversation found, validated, or each problem, one at a time in file order.

    What :func:`read_conversations` lists, without holding it: an import reads its files twice
    (validate, then write) so its memory does not grow with the study.
    """
    return _iter_loaded(paths, load_conversation, "conversations")


def read_conversations(paths: Iterable[str | Path]) -> tuple[list[tuple[str, ConversationFile]], list[Problem]]:
    """Every conversation file found, plus every problem (nothing raised)."""
    return _read_all(paths, load_conversation, "conversations")


def read_runs(paths: Iterable[str | Path]) -> tuple[list[tuple[str, RunOutput]], list[Problem]]:
    """Every EM run output found, plus every problem (nothing raised)."""
    return _read_all(paths, load_run, "runs")
