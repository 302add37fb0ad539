"""Quality control in the browser: a participant who failed attention checks is flagged, and the researcher's
exclusion decision is recorded (and reversed) from the quality pages."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

from tests.web.test_research_browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport={"width": 1360, "height": 900}, base_url=live_server.url)
    page = context.new_page()
    yield page
    context.close()


def test_researcher_excludes_a_participant_who_failed_attention_checks(page: Page, study, researcher):
    from collection import attention
    from collection.models import Participant
    from collection.study_flow import do_enrol
    from tests.web.test_quality import make_conversation

    study.attention_checks = 3
    study.save()
    person = do_enrol(study)
    first, second = make_conversation(person, ["I am worried about exams.", "And sleeping badly."]).turns.order_by(
        "turn_number"
    )
    attention.do_record_check(person, first, "no", "yes")
    attention.do_record_check(person, second, "na", "yes")
    log_in(page, "rita", "researcher-pass-123")
    page.goto(f"/research/quality/{study.slug}/")
    row = page.locator(f"#p-{person.pseudonym}")
    expect(row).to_contain_text("Failed attention checks: 2 of 2 attention checks failed")
    row.get_by_role("link", name=person.pseudonym).click()
    expect(page.locator("#flag-attention_check")).to_contain_text("instructed")
    page.get_by_role("radio", name="Exclude").check()
    page.click("#decision-form button")
    expect(page.locator("#decision-error")).to_contain_text("Choose the reason")
    page.get_by_role("radio", name="Exclude").check()
    page.select_option("#reason", "attention_check")
    page.fill("#note", "Failed both checks.")
    page.click("#decision-form button")
    expect(page.locator("#current-decision")).to_contain_text("excluded")
    expect(page.locator("#history")).to_contain_text("Failed both checks.")
    assert Participant.objects.get(pk=person.pk).quality_exclusion_reason == "attention_check"
    page.get_by_role("radio", name="Include").check()
    page.click("#decision-form button")
    expect(page.locator("#current-decision")).to_contain_text("included")
    assert Participant.objects.get(pk=person.pk).quality_excluded_at is None
