"""The comparable leaderboard, skill and the pairwise comparison matrix in a real headless Chromium.

Screenshots go to artifacts/screenshots/research/ (git-ignored), and the test asserts on what they show.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import expect

from tests.web.test_comparable_leaderboard import scored_run
from tests.web.test_research_browser import DESKTOP, SHOT_DIR, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    page = context.new_page()
    yield page
    context.close()


def test_dashboard_ranks_one_set_shows_skill_and_the_comparison_matrix(page, researcher, sample_conversations):
    scored_run("baseline:prior", skill=0.3)
    scored_run("baseline:prior", "verbose", skill=0.3)
    scored_run("synth:strong", skill=0.85)
    scored_run("synth:weak", skill=0.2)
    scored_run("human:ravi", skill=0.7, limit=4)

    log_in(page, "rita", "researcher-pass-123")
    board = page.locator("table.leaderboard")
    expect(board.locator("tbody tr").first).to_be_visible()
    expect(page.locator(".compared-set")).to_contain_text("Compared on 15 conversations")
    expect(page.locator(".disclaimer")).to_contain_text("not a certificate")
    # Ranked: the two models and the prior once; the human (4 conversations) is apart, with its n.
    ranked = board.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.model)")
    assert ranked[0] == "synth:strong" and sorted(ranked) == ["baseline:prior", "synth:strong", "synth:weak"]
    expect(board.locator("th[data-column=skill]")).to_be_visible()
    expect(board.locator("th[data-column=response_quality]")).to_be_visible()
    prior_skill = board.locator('tr[data-model="baseline:prior"] td.skill')
    expect(prior_skill).to_contain_text("0.00")
    apart = page.locator('#apart tr[data-model="human:ravi"]')
    expect(apart).to_have_attribute("data-n", "4")
    expect(page.locator("#human-pairings")).to_contain_text("synth:strong [default]")
    shot(page, "results-dashboard")

    # One palette keyed by model: the swatch beside a row has the colour of that model's bars in the profile.
    from research.results.charts import model_colours

    colour = model_colours(["baseline:prior", "human:ravi", "synth:strong", "synth:weak"])["synth:strong"]
    swatch = board.locator('tr[data-model="synth:strong"] .swatch').get_attribute("style")
    assert swatch == f"background:{colour}"
    profile_svg = page.locator("#fig-capability_profile svg").inner_html()
    assert f'fill="{colour}"' in profile_svg
    assert "synth:strong [default] (n=15)" in profile_svg and "score, 0–1" in profile_svg  # n and axis labelled

    matrix = page.locator("#fig-comparison_matrix")
    expect(matrix).to_contain_text("P(row beats column)")
    expect(matrix.locator("svg")).to_contain_text("synth:strong [default]")
    expect(matrix.locator("svg")).to_contain_text("p=")
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    matrix.screenshot(path=str(SHOT_DIR / "part-comparison-matrix.png"))
    leaderboard_text = page.locator("#leaderboard").inner_text()
    assert "baseline:prior" in leaderboard_text and "ignores the mode" in leaderboard_text
