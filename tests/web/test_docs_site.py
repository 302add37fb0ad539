"""The documentation: references that match the code, a site that builds strictly with working links and no
CDN, and a Get started page whose commands run as written."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from attune_site.configuration_docs import DESCRIPTIONS
from attune_site.management.commands.docs import build_site
from devtools.fake_llm_server import FakeLLMServer
from devtools.reference_docs import read_variables
from tests.doc_blocks import (
    GET_STARTED,
    OTHER_SHELLS,
    ROOT,
    RUN_AGAINST_SERVER,
    RUN_BY,
    SERVER_URL,
    all_pages,
    blocks,
    marker_problem,
)


def test_the_reference_pages_are_what_the_code_generates():
    result = subprocess.run(
        [sys.executable, "-m", "devtools.reference_docs", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_variable_the_code_reads_is_described_and_nothing_else():
    read = {variable.name for variable in read_variables()}
    assert read - set(DESCRIPTIONS) == set(), "describe these in attune_site/configuration_docs.py"
    assert set(DESCRIPTIONS) - read == set(), "nothing reads these any more"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (attribute, value)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name in {"href", "src"} and value:
                self.links.append((f"{tag}.{name}", value))


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_the_site_builds_strictly_with_every_link_working_and_nothing_from_a_cdn(tmp_path):
    site = build_site(tmp_path / "site", strict=True)
    # 404.html is served for any missing address, so it links from the site's root; every other page relatively.
    pages = {page: _parse(page) for page in site.rglob("*.html") if page.name != "404.html"}
    assert site / "index.html" in pages and site / "reference" / "configuration.html" in pages
    broken = []
    for page, parsed in pages.items():
        for attribute, link in parsed.links:
            parts = urlsplit(link)
            if parts.scheme in {"http", "https"}:
                # Pages may link out; nothing the browser loads by itself may come from elsewhere.
                if attribute not in {"a.href"}:
                    broken.append(f"{page.relative_to(site)}: loads {link}")
                continue
            if parts.scheme or link.startswith("//"):
                continue  # mailto:, data: and the like
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if parts.fragment not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert broken == []


@pytest.mark.parametrize("page", all_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_shell_block_carries_a_marker_of_the_one_convention(page):
    problems = [marker_problem(block) for block in blocks(page, "sh")]
    assert [problem for problem in problems if problem] == []


def test_shell_commands_are_written_as_sh_blocks():
    """One language tag for commands, so that no block escapes the marker check under another name."""
    others = [block.where() for page in all_pages() for block in blocks(page) if block.language in OTHER_SHELLS]
    assert others == [], "write these as ```sh blocks"


@pytest.mark.parametrize("page", GET_STARTED, ids=lambda page: page.name)
def test_every_get_started_command_is_run_by_a_test_or_needs_only_ci_services(page):
    """Get started may not say "not run": each block runs here, in a named test, or needs only CI's services."""
    if page.name == "README.md":
        assert len(blocks(page, "sh")) >= 3
    for block in blocks(page, "sh"):
        assert block.marker, f"{block.where()}: no marker"
        assert marker_problem(block) is None


@pytest.mark.parametrize(
    "page", [page for page, test in RUN_BY.items() if test.endswith("test_docs_site.py")], ids=lambda page: page.name
)
def test_the_recipe_commands_run_as_written(page, tmp_path):
    """The runnable blocks as a newcomer runs them: embedded (no database or Redis configured), each recipe from an
    empty data directory, in a folder holding the checkout's sample data, with `attune` of this install."""
    runnable = [block for block in blocks(page, "sh") if block.runs_here]
    assert runnable
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(ROOT / "sample_data", work / "sample_data")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("ATTUNE_") and k not in {"DATABASE_URL", "REDIS_URL"}
    }
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", ATTUNE_DATA_DIR=str(work / "data")
    )
    with FakeLLMServer() as server:
        for number, block in enumerate(runnable):
            # Each recipe stands on its own: it starts from an empty data directory, as a newcomer's would.
            env["ATTUNE_DATA_DIR"] = str(work / f"data-{number}")
            for line in block.commands:
                if block.marker == RUN_AGAINST_SERVER:
                    line = line.replace(SERVER_URL, server.url)
                result = subprocess.run(["bash", "-ec", line], cwd=work, env=env, capture_output=True, text=True)
                assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
