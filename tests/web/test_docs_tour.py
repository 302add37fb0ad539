"""The demo tour (docs/tour.md) shows the demo as it is: every page the tour names opens in a real browser on a
site set up by `attune demo`, and the tour's screenshots are taken here.

The committed screenshots in docs/images/tour/ are the ones the documentation site shows offline. Each run takes
them afresh into artifacts/tour/ (a run must not leave the checkout changed: the offline model's replies and the
server's port differ between runs); ``ATTUNE_REFRESH_TOUR=1`` writes them over the committed ones instead. A page the tour names that is missing, fails or shows an error fails the test,
and so does a screenshot the page shows that this test does not take (or one it takes that the page never shows).
Run alone with ``pytest -m browser tests/web/test_docs_tour.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from django.core.management import call_command
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
TOUR = ROOT / "docs" / "tour.md"
COMMITTED = ROOT / "docs" / "images" / "tour"
SHOTS = COMMITTED if os.environ.get("ATTUNE_REFRESH_TOUR") == "1" else ROOT / "artifacts" / "tour"
# One viewport for every screenshot: wide enough for the research tables, short enough to keep each PNG small.
VIEWPORT = {"width": 1280, "height": 800}
# The whole set stays small enough to commit: screenshots are of the viewport, never the full page.
MOST_BYTES = 1_000_000


@pytest.fixture
def demo(live_server, settings, tmp_path, capsys, monkeypatch):
    """The site exactly as `attune demo` leaves it (baselines scored, researcher login, study link)."""
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    # The demo keeps the logins it printed in the data directory: a fresh one, so an earlier run's are not reused.
    monkeypatch.setenv("ATTUNE_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    call_command("demo", "--no-serve")
    out = capsys.readouterr().out
    password = re.search(r"password: (\S+)", out).group(1)
    link = re.search(r"Participant study link: \S+?(/s/\S+)", out).group(1)
    return {"password": password, "link": link}


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    context.set_default_timeout(15_000)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    yield opened
    context.close()
    assert errors == [], "the tour's pages logged errors in the browser"


def referenced_shots() -> set[str]:
    """The screenshot file names docs/tour.md shows."""
    return set(re.findall(r"\]\(images/tour/([\w-]+\.png)\)", TOUR.read_text(encoding="utf-8")))


def named_paths() -> set[str]:
    """The site addresses docs/tour.md names (in backticks, placeholders in angle brackets)."""
    return set(re.findall(r"`(/[^`\s]*)`", TOUR.read_text(encoding="utf-8")))


def visit(page: Page, path: str, heading: str | re.Pattern[str], visited: list[str], named: str = "") -> None:
    """Open a page the tour names (as ``named``, when the tour writes it with placeholders); it must answer
    without an error and show its heading."""
    response = page.goto(path)
    assert response is not None and response.ok, f"{path}: HTTP {response and response.status}"
    expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
    visited.append(named or path)


def shot(page: Page, name: str, taken: list[str], top: str | None = None) -> None:
    """The viewport, from the top of the page or from the heading ``top``, as a 64-colour PNG.

    The pages are flat colours and text: a palette of 64 colours without dithering keeps them sharp at about a
    third of the size Chromium writes.
    """
    from PIL import Image

    SHOTS.mkdir(parents=True, exist_ok=True)
    if top is None:
        page.evaluate("window.scrollTo(0, 0)")
    else:
        page.get_by_role("heading", name=top, exact=True).evaluate("el => el.scrollIntoView()")
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), animations="disabled", caret="initial")
    with Image.open(path) as taken_image:
        palette = taken_image.convert("RGB").quantize(colors=64, dither=Image.Dither.NONE)
    palette.save(path, optimize=True)
    taken.append(path.name)


def log_in(page: Page, username: str, password: str) -> None:
    page.goto("/research/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-button")
    expect(page).not_to_have_url(re.compile("/login/"))


def test_every_page_of_the_tour_opens_and_its_screenshots_are_taken(page, demo, django_user_model):
    from attunebench import catalogue as cat
    from collection.models import Study
    from scoring.models import EvaluationRun

    taken: list[str] = []
    visited: list[str] = []
    study = Study.objects.get()

    # The participant's side: the open enrolment link, then the printed study link as a participant opens it.
    visit(page, f"/join/{study.slug}/", study.title, visited, named="/join/attune-demo/")
    visit(page, demo["link"], "About this study", visited, named="/s/<token>/")
    shot(page, "participant-consent", taken)
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    page.get_by_label("25-34", exact=True).check()
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="How do you feel right now?")).to_be_visible()
    for item in cat.PANAS_ITEMS:
        page.check(f"#id_{item}_2")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="What would you like to talk about?")).to_be_visible()
    page.get_by_label("Exam pressure", exact=True).check()
    page.get_by_label(cat.TOPIC_ATTITUDE_OPTIONS[1], exact=True).check()
    page.get_by_role("button", name="Start the chat").click()
    page.get_by_label("Your message").fill("I have exams next week and I can't sleep properly.")
    page.get_by_role("button", name="Send").click()
    continue_link = page.get_by_role("link", name="Continue to questions about this reply")
    expect(continue_link).to_be_visible()
    shot(page, "participant-chat", taken)
    continue_link.click()
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    shot(page, "participant-questions", taken)

    # The researcher's side, signed in with the login the demo printed.
    log_in(page, "researcher", demo["password"])
    visit(page, "/research/", "Evaluation dashboard", visited)
    expect(page.get_by_text("baseline:prior").first).to_be_visible()
    shot(page, "research-dashboard", taken)
    shot(page, "research-capability-profile", taken, top="Capability profile")
    run = EvaluationRun.objects.filter(evaluated_model__name="baseline:lexicon", mode="default").get()
    conversation = run.conversation_outputs.order_by("conversation__conversation_id").first().conversation
    drilldown = f"/research/runs/{run.pk}/conversations/{conversation.conversation_id}/"
    heading = re.compile(f"on {conversation.conversation_id}$")
    visit(page, drilldown, heading, visited, named="/research/runs/<run>/conversations/<id>/")
    shot(page, "research-conversation", taken)
    visit(page, "/research/runs/", "Run launcher", visited)
    shot(page, "research-runs", taken)
    visit(page, "/research/models/", "Model registry", visited)
    shot(page, "research-models", taken)
    visit(page, "/research/studies/", "Studies", visited)
    visit(page, f"/research/studies/{study.slug}/", re.compile(re.escape(study.title)), visited)
    shot(page, "research-study", taken)
    visit(page, "/research/datasets/", "Dataset versions & exports", visited)
    shot(page, "research-datasets", taken)
    visit(page, "/research/human/", "Human baseline", visited)
    shot(page, "research-human-baseline", taken)
    visit(page, "/api/docs/", re.compile("."), visited)

    # The admin, for a superuser.
    django_user_model.objects.create_superuser("ada", "ada@example.org", "admin-pass-123")
    page.context.clear_cookies()
    page.goto("/admin/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "admin-pass-123")
    page.click("input[type=submit]")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    visited.append("/admin/")
    shot(page, "admin", taken)

    assert named_paths() - set(visited) == set(), "docs/tour.md names pages this test does not open"
    assert sorted(taken) == sorted(referenced_shots()), "docs/tour.md and the screenshots taken differ"
    total = sum((SHOTS / name).stat().st_size for name in taken)
    assert total < MOST_BYTES, f"the tour's screenshots weigh {total} bytes"
    missing = [name for name in taken if not (COMMITTED / name).is_file()]
    assert missing == [], f"docs/images/tour/ lacks {missing}: run this test with ATTUNE_REFRESH_TOUR=1 and commit them"
