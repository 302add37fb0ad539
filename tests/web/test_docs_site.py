"""The documentation: references that match the code, a site that builds strictly with working links and no
CDN, and a Get started page whose commands run as written."""

from __future__ import annotations

import os
import re
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

ROOT = Path(__file__).resolve().parents[2]
# The pages whose every shell block a newcomer runs first.
RECIPES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
# Each shell block of Get started is preceded by one of these, naming how the suite covers it.
RUN = "<!-- test: run -->"
RUN_AGAINST_SERVER = "<!-- test: run against a local OpenAI-compatible server at http://127.0.0.1:8080/v1 -->"
COVERED_ELSEWHERE = re.compile(r"<!-- test: covered by (tests/\S+\.py) -->")


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


def _shell_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(the marker comment before it, its command lines) for every ```sh block."""
    blocks = []
    for match in re.finditer(r"(?:(<!--[^\n]*-->)\n\n?)?```sh\n(.*?)```", text, re.S):
        lines = [line.split("  #")[0].strip() for line in match.group(2).splitlines()]
        blocks.append((match.group(1) or "", [line for line in lines if line]))
    return blocks


@pytest.mark.parametrize("page", RECIPES, ids=lambda page: page.name)
def test_every_recipe_command_is_run_by_a_test(page):
    blocks = _shell_blocks(page.read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    for marker, lines in blocks:
        covered = COVERED_ELSEWHERE.fullmatch(marker)
        assert marker in {RUN, RUN_AGAINST_SERVER} or covered, f"no test runs: {lines}"
        if covered:
            assert (ROOT / covered.group(1)).exists(), marker


@pytest.mark.parametrize("page", RECIPES, ids=lambda page: page.name)
def test_the_recipe_commands_run_as_written(page, tmp_path):
    """The runnable blocks as a newcomer runs them: embedded (no database or Redis configured), each recipe from an
    empty data directory, in a folder holding the checkout's sample data, with `attune` of this install."""
    blocks = [
        (m, lines) for m, lines in _shell_blocks(page.read_text(encoding="utf-8")) if m.startswith("<!-- test: run")
    ]
    assert blocks
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
        for number, (marker, lines) in enumerate(blocks):
            # Each recipe stands on its own: it starts from an empty data directory, as a newcomer's would.
            env["ATTUNE_DATA_DIR"] = str(work / f"data-{number}")
            for line in lines:
                if marker == RUN_AGAINST_SERVER:
                    line = line.replace("http://127.0.0.1:8080/v1", server.url)
                result = subprocess.run(["bash", "-ec", line], cwd=work, env=env, capture_output=True, text=True)
                assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
