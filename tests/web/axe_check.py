"""axe-core on a participant page at desktop width and at 390 px, with a readable failure.

Shared by the participant browser walks: ``assert_accessible(page, "name")`` runs
axe-core (its default WCAG A/AA and best-practice rules) on the page as it is now,
once at 1280 px and once at 390 px, then puts the viewport back. On failure the
message lists each violation's rule id, impact and the elements it found.
"""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

WIDTHS = (1280, 390)
_AXE = Axe()


def violations(page: Page) -> list[str]:
    """One line per axe-core violation: rule id, impact, what it means and the CSS targets it hit."""
    found = _AXE.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {v['help']} -> {[node['target'] for node in v['nodes']]}" for v in found]


def assert_accessible(page: Page, name: str) -> None:
    """axe-core finds no violation on the page at 1280 px nor at 390 px; the viewport is restored after."""
    before = page.viewport_size
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 844 if width < 600 else 900})
            problems = violations(page)
            assert problems == [], f"axe-core on {name} at {width} px:\n" + "\n".join(problems)
    finally:
        if before is not None:
            page.set_viewport_size(before)
