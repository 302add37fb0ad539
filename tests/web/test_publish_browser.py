"""The published results site opened from file:// in headless Chromium: no server, nothing fetched, axe clean.

Screenshots go to artifacts/screenshots/publish/ (git-ignored).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from django.core.management import call_command
from playwright.sync_api import expect

from attunebench.catalogue import RESEARCH_ONLY_STATEMENT
from tests.web.axe_check import assert_accessible
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, make_scored_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db, pytest.mark.usefixtures("export_dir")]

SHOT_DIR = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots" / "publish"


@pytest.fixture
def published_site(sample_conversations, tmp_path):
    """A results site beside a published dataset, written before the browser starts.

    The database work is done before Playwright runs its event loop in this thread, so no
    connection is opened under that loop and left behind.
    """
    runs = [make_scored_run("synth:strong", skill=0.85), make_scored_run("synth:weak", skill=0.2)]
    dataset, site = tmp_path / "dataset", tmp_path / "site"
    call_command(
        "publish", "dataset", "--out", str(dataset), "--runs", *[str(r.pk) for r in runs], stdout=io.StringIO()
    )
    call_command("publish", "results", "--out", str(site), "--dataset", str(dataset), stdout=io.StringIO())
    return site


@pytest.fixture
def chromium():
    """Debian's headless Chromium, started after the site is written (see published_site)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it when run as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def test_the_results_site_works_from_file_and_has_no_accessibility_violation(published_site, chromium):
    site, browser = published_site, chromium
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    try:
        page.goto((site / "index.html").as_uri())
        expect(page.locator("#research-only")).to_contain_text(RESEARCH_ONLY_STATEMENT)
        expect(page.locator("#scores-leaderboard tbody tr")).to_have_count(2)
        expect(page.locator("footer")).to_contain_text("attune verify DATASET_DIR RESULTS_DIR")
        assert page.evaluate("getComputedStyle(document.body).fontFamily").startswith("system-ui")  # the CSS loaded
        assert_accessible(page, "results index")
        SHOT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOT_DIR / "index.png"), full_page=True)

        page.locator("#snapshots a").first.click()
        expect(page.locator("#research-only")).to_contain_text(RESEARCH_ONLY_STATEMENT)
        headings = page.locator("h2").all_inner_texts()
        assert headings[:3] == ["Capability profile", "Leaderboard", "Pairwise matrix"]
        expect(page.locator("#capability-profile tbody tr")).to_have_count(2)
        expect(page.locator("#snapshot-leaderboard tbody tr").first).to_contain_text("synth:strong")
        expect(page.locator("#pairwise-matrix tbody tr")).to_have_count(2)
        assert_accessible(page, "snapshot page")
        page.screenshot(path=str(SHOT_DIR / "snapshot.png"), full_page=True)

        with page.expect_navigation():
            page.get_by_role("link", name="JSON (manifest, leaderboard, analyses)").click()
        assert '"content_sha256"' in page.content()
    finally:
        context.close()
    assert fetched and all(url.startswith("file://") for url in fetched), fetched
