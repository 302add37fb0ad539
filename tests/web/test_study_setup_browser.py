"""A study set up entirely from the researcher pages, previewed, opened and joined, in headless Chromium.

The researcher makes a draft study on /research/studies/ (text, consent version, two topics, turn limits,
questions per turn, call and dollar budgets, the recruitment platform's completion code and parameter
names, attention checks: warned that they cannot all be met, then fixed), gives it a one-model pool and a
topic quota, walks its participant flow as a preview participant up to the first reply (nothing counted),
opens it, and a participant joins through the study's link and is offered the study's topics; another
enters through the platform's link under the study's own parameter name. Offline scripted models only.
"""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

from attunebench import catalogue as cat
from collection.models import Conversation, Participant, Study, StudyModel, StudyQuota, hash_platform_id
from collection.setup import ensure_defaults
from tests.web.axe_check import assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture
def site(live_server, settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    return ensure_defaults()


@pytest.fixture
def context(browser, live_server):
    made = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    made.set_default_timeout(10_000)
    yield made
    made.close()


def log_in(page: Page, username: str, password: str) -> None:
    page.goto("/research/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-button")


def walk_to_topic(page: Page) -> None:
    """Consent, profile and the pre-chat mood, as a participant would."""
    expect(page.get_by_role("heading", name="About this study")).to_be_visible()
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    page.get_by_label("25-34", exact=True).check()
    page.get_by_label("Analytical", exact=True).check()
    page.get_by_label("Feel heard", exact=True).check()
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="How do you feel right now?")).to_be_visible()
    for i, item in enumerate(cat.PANAS_ITEMS):
        page.check(f"#id_{item}_{i % 7}")
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="What would you like to talk about?")).to_be_visible()


def test_a_study_set_up_on_the_research_pages_is_previewed_opened_and_joined(context, site, researcher):
    from datasets.exchange import exportable_conversations
    from research.studies.collection_stats import collection_stats

    page = context.new_page()
    log_in(page, "rita", "researcher-pass-123")
    page.goto("/research/studies/")
    page.get_by_role("link", name="New study").click()

    page.fill("#id_slug", "ui-study")
    page.fill("#id_title", "Feelings at exam time")
    page.fill("#id_information", "We study how chat models respond to feelings about exams and money.")
    page.fill("#id_crisis_resources", "Call 112 in an emergency.")
    page.fill("#id_consent_version", "3.1")
    page.get_by_label("Study: Exam pressure", exact=True).check()
    page.get_by_label("Money: Debt worries", exact=True).check()
    page.fill("#id_min_turns", "1")
    page.fill("#id_max_turns", "4")
    page.fill("#id_binary_sample_size", "3")
    page.fill("#id_live_call_budget", "200")
    page.check("#id_open_enrolment")
    # Recruitment platform, dollar budget and quality control
    page.fill("#id_platform_completion_url", "app.prolific.com/submissions/complete")
    page.fill("#id_platform_completion_code", "C1DONE")
    page.fill("#id_platform_participant_param", "pid")
    page.fill("#id_platform_code_param", "code")
    page.fill("#id_live_spend_budget_usd", "7.50")
    page.fill("#id_attention_checks", "3")  # one turn at the fewest: only 2 can be met
    page.get_by_role("button", name="Create draft study").click()

    expect(page.locator("#study-status")).to_have_text("draft")
    study = Study.objects.get(slug="ui-study")
    assert (study.consent_version, study.min_turns, study.max_turns, study.binary_sample_size) == ("3.1", 1, 4, 3)
    assert (study.platform_completion_url, study.platform_completion_code) == (
        "https://app.prolific.com/submissions/complete",
        "C1DONE",
    )
    assert (study.platform_participant_param, study.platform_code_param, study.platform_study_param) == (
        "pid",
        "code",
        "STUDY_ID",  # left as it was: Prolific's default
    )
    assert (str(study.live_spend_budget_usd), study.attention_checks) == ("7.50", 3)
    expect(page.locator("#setup-warnings")).to_contain_text("meets only 2")
    page.fill("#id_attention_checks", "2")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator(".messages")).to_contain_text("Saved the study's settings.")
    expect(page.locator("#setup-warnings")).to_have_count(0)
    expect(page.locator("#id_platform_completion_code")).to_have_value("C1DONE")  # kept by the second save
    assert Study.objects.get(pk=study.pk).attention_checks == 2
    assert sorted(study.topics.values_list("subtopic", flat=True)) == ["Debt worries", "Exam pressure"]
    assert page.request.get("/join/ui-study/").status == 403  # a draft takes nobody

    listener, guide = site.models
    page.fill(f"#id_weight_{listener.pk}", "2")
    page.fill(f"#id_weight_{guide.pk}", "0")
    page.get_by_role("button", name="Save pool").click()
    expect(page.locator(".messages")).to_contain_text("The pool has 1 model.")
    assert list(StudyModel.objects.filter(study=study).values_list("original_model", "weight")) == [(listener.pk, 2)]

    page.select_option("#id_kind", "topic")
    page.select_option("#id_topic", label="Study: Exam pressure")
    page.fill("#id_cap", "1")
    page.get_by_role("button", name="Add quota").click()
    expect(page.locator(".messages")).to_contain_text("Quota saved: Study: Exam pressure, at most 1.")
    assert StudyQuota.objects.get(study=study).cap == 1
    assert_accessible(page, "study-set-up")

    # Preview: the real flow in a new tab, as a test participant
    with context.expect_page() as opened:
        page.get_by_role("button", name="Preview as a test participant").click()
    preview = opened.value
    expect(preview.locator("[data-preview]")).to_contain_text("Nothing you enter here is counted as data.")
    assert_accessible(preview, "preview-consent")
    walk_to_topic(preview)
    assert preview.locator("input[name=topic]").count() == 2  # the study's two topics only
    preview.get_by_label("Exam pressure", exact=True).check()
    preview.get_by_label(cat.TOPIC_ATTITUDE_OPTIONS[1], exact=True).check()
    preview.get_by_role("button", name="Start the chat").click()
    expect(preview.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    preview.get_by_label("Your message").fill("Exams start next week and I cannot sleep.")
    preview.get_by_role("button", name="Send").click()
    expect(preview.get_by_role("link", name="Continue to questions about this reply")).to_be_visible()
    tester = Participant.objects.get(study=study)
    assert tester.is_test
    assert Conversation.objects.get(participant=tester).original_model == listener  # the pool's only model
    assert not exportable_conversations().exists()
    assert collection_stats().participants == 0
    preview.close()

    # Open it: the join link now takes participants
    page.goto("/research/studies/ui-study/")
    page.get_by_role("button", name="Open the study").click()
    expect(page.locator("#study-status")).to_have_text("open")

    visitor = context.browser.new_context(viewport=DESKTOP, base_url=page.url.split("/research/")[0])
    joiner = visitor.new_page()
    joiner.set_default_timeout(10_000)
    joiner.goto("/join/ui-study/")
    expect(joiner.get_by_role("heading", name="Welcome to Feelings at exam time")).to_be_visible()
    joiner.get_by_role("button", name="Start").click()
    expect(joiner.locator("[data-preview]")).to_have_count(0)
    walk_to_topic(joiner)
    # the preview's conversation does not fill the one-place quota on Exam pressure
    assert joiner.locator("input[name=topic]").count() == 2
    participant = Participant.objects.get(study=study, is_test=False)
    assert participant.consents.get().version == "3.1"
    visitor.close()

    page.goto("/research/collection/?study=ui-study")
    expect(page.locator("[data-figure=participants]")).to_have_text("1")
    expect(page.locator("#monitoring-ui-study")).to_contain_text("$0.00 of $7.50")

    # The platform's entry link uses the study's own parameter name for the participant id
    panel = context.browser.new_context(viewport=DESKTOP, base_url=page.url.split("/research/")[0])
    entrant = panel.new_page()
    entrant.set_default_timeout(10_000)
    entrant.goto("/enter/ui-study/?pid=panel-7&STUDY_ID=p-1&SESSION_ID=s-1")
    entrant.get_by_role("button", name="Start").click()
    expect(entrant.get_by_role("heading", name="About this study")).to_be_visible()
    assert Participant.objects.get(study=study, platform_id_hash=hash_platform_id("panel-7")).is_test is False
    panel.close()
