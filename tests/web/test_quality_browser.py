"""Quality control in the browser: a participant who fails the attention checks while walking the study's pages
is flagged, and the researcher's exclusion decision is recorded (and reversed) from the quality pages."""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

from datasets.pseudonyms import export_pseudonym
from tests.web.test_participant_browser import answer_behaviour_questions, fill_panas, panas_ratings
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
    row = page.locator(f"#p-{export_pseudonym(person.pseudonym)}")
    expect(row).to_contain_text("Failed attention checks: 2 of 2 attention checks failed")
    row.get_by_role("link", name=export_pseudonym(person.pseudonym)).click()
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


#: The instruction's words around the answer it asks for (``collection.attention.instruction``).
INSTRUCTED = re.compile(r"please choose \u2018(.+?)\u2019 for this question")


def instructed_in(page: Page, field: str) -> str:
    """The answer a check's legend asks for, read from the page the participant sees."""
    legend = page.locator(f"#field-{field} legend")
    expect(legend).to_contain_text("To show you are reading carefully")
    match = INSTRUCTED.search(legend.inner_text())
    assert match is not None, legend.inner_text()
    return match.group(1)


def test_a_participant_who_answers_the_checks_wrongly_is_flagged_for_the_researcher(
    page: Page, study, researcher, settings
):
    """The whole walk through the real pages, both checks answered against their instruction: the answers
    are kept apart as failed checks (never as data), the summary flags them, the researcher sees the flag."""
    from annotation.models import BinaryJudgement
    from annotation.quality import ATTENTION, participant_quality, study_quality
    from attunebench import catalogue as cat
    from collection.models import AttentionCheck, Topic
    from collection.study_flow import do_enrol

    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0.005
    # two checks: one on turn 1's behaviour questions, one in the closing survey; none tolerated
    study.attention_checks = 2
    study.quality_max_failed_checks = 0
    study.min_turns = 1
    study.binary_sample_size = 6
    study.save()
    person = do_enrol(study)

    page.goto(f"/s/{person.token}/")
    expect(page.get_by_role("heading", name="About this study")).to_be_visible()
    page.get_by_label("I have read the information above and I agree to take part.").check()
    page.get_by_role("button", name="Continue").click()
    expect(page.get_by_role("heading", name="A little about you")).to_be_visible()
    page.get_by_label("25-34", exact=True).check()
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="How do you feel right now?")).to_be_visible()
    fill_panas(page, panas_ratings(0))
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="What would you like to talk about?")).to_be_visible()
    subtopic = Topic.objects.filter(studies=study).values_list("subtopic", flat=True).first() or "Exam pressure"
    page.get_by_label(subtopic, exact=True).check()
    page.get_by_label(cat.TOPIC_ATTITUDE_OPTIONS[0], exact=True).check()
    page.get_by_role("button", name="Start the chat").click()

    expect(page.get_by_role("heading", name=re.compile("^Chat about"))).to_be_visible()
    page.get_by_label("Your message").fill("I have exams next week and I feel anxious all the time.")
    page.get_by_role("button", name="Send").click()
    page.get_by_role("link", name="Continue to questions about this reply").click()

    # the answers page: the check sits among the behaviour questions; answer it against its instruction
    expect(page.get_by_role("heading", name="Did this reply change how you feel?")).to_be_visible()
    page.get_by_label(re.compile("^No change")).check()
    answer_behaviour_questions(page, 1)
    asked_label = instructed_in(page, "attention_check")
    label_to_value = {label: value for value, label in cat.YES_NO_NA_LABELS.items()}
    asked_answers = label_to_value[asked_label]
    given_answers = cat.YES_NO_NA[(cat.YES_NO_NA.index(asked_answers) + 1) % len(cat.YES_NO_NA)]
    page.check(f"#id_attention_check_{cat.YES_NO_NA.index(given_answers)}")
    page.get_by_role("button", name="Save and continue").click()

    expect(page.get_by_role("heading", name="The reply you would have wanted")).to_be_visible()
    page.get_by_label("The reply you would have wanted").fill(
        "Exams and no sleep is such a hard mix. Would it help to talk about the nights first?"
    )
    page.get_by_role("button", name="Save and continue").click()
    expect(page.get_by_role("heading", name="Comparing replies", exact=True)).to_be_visible()
    for index, pair in enumerate(page.locator("fieldset.pair").all()):
        pair.locator(f"input[type=radio][value='{'AB'[index % 2]}']").check()
    page.get_by_role("button", name="Save and continue").click()

    page.get_by_role("button", name="Finish the chat").click()
    page.get_by_role("button", name="Yes, finish the chat").click()
    expect(page.get_by_role("heading", name="How do you feel now, after the chat?")).to_be_visible()
    fill_panas(page, panas_ratings(2))
    page.get_by_role("button", name="Save and continue").click()

    # the closing survey: its check sits among the model ratings; answer it against its instruction too
    expect(page.get_by_role("heading", name="Your view of the conversation")).to_be_visible()
    page.locator("input[name=looking_for]").first.check()
    page.get_by_label(cat.Q2_OPTIONS[2], exact=True).check()
    page.get_by_label(cat.Q3_OPTIONS[1], exact=True).check()
    for branch in cat.FOUR_BRANCHES:
        page.check(f"#id_branch_{branch}_4")
    asked_survey = instructed_in(page, "attention_check")
    given_survey = str(int(asked_survey) % 7 + 1)
    page.check(f"#id_attention_check_{int(given_survey) - 1}")
    page.get_by_role("button", name="Finish").click()
    expect(page.get_by_role("heading", name="Thank you")).to_be_visible()

    # stored apart, as failed checks, exactly as answered; the behaviour answers hold only the real questions
    checks = {c.place: c for c in AttentionCheck.objects.filter(participant=person)}
    assert set(checks) == {AttentionCheck.Place.ANSWERS, AttentionCheck.Place.SURVEY}
    answers_check, survey_check = checks[AttentionCheck.Place.ANSWERS], checks[AttentionCheck.Place.SURVEY]
    assert (answers_check.instructed, answers_check.given, answers_check.passed) == (
        asked_answers,
        given_answers,
        False,
    )
    assert answers_check.turn is not None and answers_check.turn.turn_number == 1
    assert (survey_check.instructed, survey_check.given, survey_check.passed) == (asked_survey, given_survey, False)
    assert survey_check.turn is None
    assert BinaryJudgement.objects.filter(turn=answers_check.turn).count() == 6

    summary = participant_quality(person)
    assert (summary.checks_passed, summary.checks_failed) == (0, 2)
    flag = next(f for f in summary.flags if f.kind == ATTENTION)
    assert flag.summary == "2 of 2 attention checks failed"
    assert sorted((e["place"], e["instructed"], e["given"]) for e in flag.evidence) == [
        ("answers", asked_answers, given_answers),
        ("survey", asked_survey, given_survey),
    ]
    [in_study] = [s for s in study_quality(study) if s.participant.pk == person.pk]
    assert ATTENTION in in_study.flag_kinds

    # the researcher's quality pages show the participant flagged, with what was asked and answered
    log_in(page, "rita", "researcher-pass-123")
    page.goto(f"/research/quality/{study.slug}/")
    row = page.locator(f"#p-{export_pseudonym(person.pseudonym)}")
    expect(row).to_contain_text("Failed attention checks: 2 of 2 attention checks failed")
    expect(row.locator("td").nth(4)).to_have_text("0 of 2")  # after the participant and safety columns
    expect(row).to_contain_text("included")
    row.get_by_role("link", name=export_pseudonym(person.pseudonym)).click()
    evidence = page.locator("#flag-attention_check")
    expect(evidence).to_contain_text("2 of 2 attention checks failed")
    expect(evidence.locator("tr")).to_have_count(2)
    expect(page.get_by_text("Attention checks: 0 passed, 2 failed.")).to_be_visible()
