"""The one convention for shell commands in the README and docs/: how a test finds them and knows what covers them.

Every ```sh block has a marker comment on the line right above it (a blank line between is allowed):

- ``<!-- test: run -->``: a test runs the block as written (which test: the page's own, see RUN_BY).
- ``<!-- test: run against a local OpenAI-compatible server at URL -->``: run as written, with a local fake
  server standing in at URL.
- ``<!-- test: covered by tests/PATH.py -->``: that test module does what the block does (the demo, an
  installed package, inspect); the file must exist.
- ``<!-- test: needs SERVICES, which CI provides -->``: the block needs outside services (PostgreSQL, Redis,
  Docker...) that the CI job starts; it is not run here.

A ``sh`` block without a marker, or with any other wording, fails ``tests/web/test_docs_site.py``, and so does a
block tagged as another shell (``bash``, ``console``...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = "run"
RUN_AGAINST_SERVER = "run against a local OpenAI-compatible server at http://127.0.0.1:8080/v1"
SERVER_URL = "http://127.0.0.1:8080/v1"
COVERED_BY = re.compile(r"covered by (tests/\S+\.py)")
NEEDS_SERVICES = re.compile(r"needs .+, which CI provides")
# Commands are tagged sh; these other names for a shell are refused so that no block escapes the markers.
OTHER_SHELLS = frozenset({"bash", "shell", "console", "zsh", "shell-session"})

_BLOCK = re.compile(
    r"(?:^<!-- (?P<comment>[^\n]*?) -->\n\n?)?^```(?P<language>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S
)

# The pages a newcomer reads first (Get started): every shell block on them runs, or is covered by a test, or
# needs only services CI starts.
GET_STARTED = (ROOT / "README.md", ROOT / "docs" / "getting-started.md", ROOT / "docs" / "tour.md")
# Pages whose ``run`` blocks a test module executes, in order, as a reader would.
RUN_BY = {
    ROOT / "README.md": "tests/web/test_docs_site.py",
    ROOT / "docs" / "getting-started.md": "tests/web/test_docs_site.py",
    ROOT / "docs" / "evaluate.md": "tests/web/test_docs_evaluate.py",
}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, text, the marker above it ('' for none) and its first line."""

    page: Path
    line: int
    language: str
    body: str
    marker: str

    @property
    def commands(self) -> list[str]:
        """The block's command lines, trailing comments (two spaces then #) and blank lines left out."""
        lines = [line.split("  #")[0].strip() for line in self.body.splitlines()]
        return [line for line in lines if line]

    @property
    def runs_here(self) -> bool:
        return self.marker in {RUN, RUN_AGAINST_SERVER}

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, language: str | None = None) -> list[Block]:
    """Every fenced block of ``page`` (of ``language`` only, when given), in page order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        if language is not None and match.group("language") != language:
            continue
        line = text.count("\n", 0, match.start("language")) + 1
        comment = match.group("comment") or ""
        # A comment in another form is kept whole, so that the marker check names it.
        marker = comment.removeprefix("test: ") if comment.startswith("test: ") else comment and f"<!-- {comment} -->"
        found.append(Block(page, line, match.group("language"), match.group("body"), marker))
    return found


def marker_problem(block: Block) -> str | None:
    """Why a shell block's marker is not one of the convention's, or None when it is."""
    if block.runs_here:
        if block.page not in RUN_BY:
            return f"{block.where()}: marked '{block.marker}' but no test runs this page's blocks (RUN_BY)"
        return None
    covered = COVERED_BY.fullmatch(block.marker)
    if covered:
        return None if (ROOT / covered.group(1)).exists() else f"{block.where()}: {covered.group(1)} does not exist"
    if NEEDS_SERVICES.fullmatch(block.marker):
        return None
    shown = f"'{block.marker}'" if block.marker else "no marker"
    return f"{block.where()}: {shown}; see tests/doc_blocks.py for the markers a shell block takes"


def all_pages() -> list[Path]:
    """The README and every page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
