"""Study set-up: status, model pool with weights, quotas, offered topics, preview mode.

Assignment expectations are derived by hand from the rule in
``collection.assignment``: lowest cell count / weight, then lowest study count
/ weight, then heavier weight, then alias.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Conversation, OriginalModel, Participant, Study, StudyModel, StudyQuota, Topic, Turn
from tests.migrations import migrate_to_newest, unapply

pytestmark = pytest.mark.django_db


def make_study(slug: str = "setup-study", **fields) -> Study:
    defaults = {
        "title": "Set-up study",
        "information": "About it.",
        "crisis_resources": "Call 112.",
        "open_enrolment": True,
    }
    return Study.objects.create(slug=slug, **{**defaults, **fields})


def ready_participant(study: Study, group: str = "", is_test: bool = False) -> Participant:
    """A participant who has consented, given a profile and the pre-chat mood: next is the topic."""
    participant = Participant.objects.create(study=study, group=group, is_test=is_test)
    flow.do_record_consent(participant, False)
    flow.do_save_profile(participant, "25-34", [], [], None)
    flow.do_save_pre_panas(participant, dict.fromkeys(cat.PANAS_ITEMS, 3))
    return participant


def models(*aliases: str) -> list[OriginalModel]:
    return [OriginalModel.objects.create(name=f"om {a}", alias=a, provider="offline") for a in aliases]


def start(study: Study, topic: Topic, group: str = "", is_test: bool = False) -> Conversation:
    return flow.do_start_conversation(ready_participant(study, group, is_test), topic, "Comfortable")


def aliases(conversations: list[Conversation]) -> list[str]:
    return [c.original_model.alias for c in conversations]


@pytest.fixture
def topics(demo_defaults) -> list[Topic]:
    return list(Topic.objects.filter(in_catalogue=True).order_by("order")[:3])


# ---------------------------------------------------------------------------
# Status: draft -> open -> closed
# ---------------------------------------------------------------------------


def test_open_is_the_one_definition_of_taking_participants(db) -> None:
    draft = make_study("s-draft", status=Study.Status.DRAFT)
    opened = make_study("s-open", status=Study.Status.OPEN)
    closed = make_study("s-closed", status=Study.Status.CLOSED)
    assert list(Study.objects.open()) == [opened]
    assert (draft.is_open, opened.is_open, closed.is_open) == (False, True, False)


@pytest.mark.parametrize("status", ["draft", "closed"])
def test_a_study_that_is_not_open_refuses_new_participants_calmly(db, status) -> None:
    study = make_study(status=status)
    client = Client()
    page = client.get(f"/join/{study.slug}/")
    assert page.status_code == 403
    assert "not taking new participants" in page.content.decode()
    with pytest.raises(flow.StudyNotOpen):
        flow.do_open_enrol(study)
    assert not Participant.objects.exists()


def test_status_rules(demo_defaults) -> None:
    from research.studies.setup import StudySetupError, do_set_status

    study = make_study(status=Study.Status.DRAFT)
    with pytest.raises(StudySetupError, match="draft study cannot become closed"):
        do_set_status(study, "closed")
    do_set_status(study, "open")
    assert Study.objects.get(pk=study.pk).status == "open"
    with pytest.raises(StudySetupError, match="open study cannot become draft"):
        do_set_status(study, "draft")
    do_set_status(study, "closed")
    do_set_status(study, "open")  # a closed study may reopen
    with pytest.raises(StudySetupError, match="Unknown status"):
        do_set_status(study, "paused")


def test_a_study_opens_only_with_a_model_to_assign(db) -> None:
    from research.studies.setup import StudySetupError, do_set_status

    study = make_study(status=Study.Status.DRAFT)
    Topic.objects.create(category="C", subtopic="s")
    with pytest.raises(StudySetupError, match="no active original model"):
        do_set_status(study, "open")
    (model,) = models("om-off")
    StudyModel.objects.create(study=study, original_model=model)
    OriginalModel.objects.filter(pk=model.pk).update(active=False)
    with pytest.raises(StudySetupError, match="switched off"):
        do_set_status(study, "open")
    assert Study.objects.get(pk=study.pk).status == "draft"


# ---------------------------------------------------------------------------
# The model pool and weighted, balanced assignment
# ---------------------------------------------------------------------------


def test_weights_share_conversations_in_proportion(topics) -> None:
    study = make_study()
    heavy, light = models("om-a", "om-b")
    StudyModel.objects.create(study=study, original_model=heavy, weight=2)
    StudyModel.objects.create(study=study, original_model=light, weight=1)
    # by hand: (0/2,0/1) tie -> heavier a; (1/2,0) b; (1/2,1) a; (1,1) tie -> heavier a; (3/2,1) b; (3/2,2) a
    assert aliases([start(study, topics[0]) for _ in range(6)]) == ["om-a", "om-b", "om-a", "om-a", "om-b", "om-a"]


def test_assignment_balances_across_topics_and_groups(topics) -> None:
    study = make_study(participant_groups="students, staff")
    a, b = models("om-a", "om-b")
    StudyModel.objects.create(study=study, original_model=a)
    StudyModel.objects.create(study=study, original_model=b)
    # Each new cell starts empty, so the study-wide count decides: a, then b, then a, then b.
    got = [
        start(study, topics[0], "students"),
        start(study, topics[1], "students"),
        start(study, topics[0], "staff"),
        start(study, topics[1], "staff"),
    ]
    assert aliases(got) == ["om-a", "om-b", "om-a", "om-b"]
    # Within a cell: topic 0 / students has a, so b comes next there.
    assert aliases([start(study, topics[0], "students")]) == ["om-b"]


def test_only_the_pool_is_used_and_previews_and_withdrawals_do_not_count(topics) -> None:
    study = make_study()
    a, b, outside = models("om-a", "om-b", "om-z")
    StudyModel.objects.create(study=study, original_model=a)
    StudyModel.objects.create(study=study, original_model=b)
    first = start(study, topics[0])
    assert first.original_model == a
    # a preview in the same cell does not count: still b's turn, not a's
    assert start(study, topics[0], is_test=True).original_model == b
    assert start(study, topics[0]).original_model == b
    flow.do_withdraw(first.participant)  # a's only counted conversation leaves the data
    assert start(study, topics[0]).original_model == a
    assert not Conversation.objects.filter(original_model=outside).exists()


def test_a_study_without_a_pool_keeps_the_old_rule(topics) -> None:
    study = make_study()
    conversation = start(study, topics[0])
    assert conversation.original_model.name in ("offline-scripted-listener", "offline-scripted-guide")


def test_pool_and_quota_constraints_hold_in_the_database(topics) -> None:
    study = make_study()
    (a,) = models("om-a")
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyModel.objects.create(study=study, original_model=a, weight=0)
    StudyModel.objects.create(study=study, original_model=a)
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyModel.objects.create(study=study, original_model=a, weight=3)
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyQuota.objects.create(study=study, kind="topic", cap=2)  # a topic quota needs its topic
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyQuota.objects.create(study=study, kind="group", topic=topics[0], group="x", cap=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyQuota.objects.create(study=study, kind="topic", topic=topics[0], cap=0)
    StudyQuota.objects.create(study=study, kind="topic", topic=topics[0], cap=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        StudyQuota.objects.create(study=study, kind="topic", topic=topics[0], cap=5)


def test_set_pool_keeps_exactly_the_weighted_models(demo_defaults) -> None:
    from research.studies.setup import StudySetupError, do_set_pool, pool_entries

    study = make_study()
    a, b = models("om-a", "om-b")
    do_set_pool(study, {a.pk: 3, b.pk: 1})
    do_set_pool(study, {a.pk: 2, b.pk: 0})
    assert list(StudyModel.objects.filter(study=study).values_list("original_model__alias", "weight")) == [("om-a", 2)]
    assert {e.model.alias: e.weight for e in pool_entries(study)}["om-b"] == 0
    with pytest.raises(StudySetupError, match="no longer exist"):
        do_set_pool(study, {999999: 1})


# ---------------------------------------------------------------------------
# Topics offered and quotas
# ---------------------------------------------------------------------------


def test_the_topic_page_offers_the_studys_topics_and_drops_full_ones(topics) -> None:
    from collection.forms import TopicForm

    study = make_study()
    study.topics.set(topics[:2])
    StudyQuota.objects.create(study=study, kind="topic", topic=topics[0], cap=1)
    form = TopicForm(study=study)
    assert form.topic_list() == topics[:2]
    start(study, topics[0], is_test=True)  # a preview never fills a quota
    assert TopicForm(study=study).topic_list() == topics[:2]
    start(study, topics[0])
    assert TopicForm(study=study).topic_list() == [topics[1]]
    late = ready_participant(study)
    with pytest.raises(flow.TopicFull):  # chosen while it was still offered
        flow.do_start_conversation(late, topics[0], "Comfortable")
    bound = TopicForm({"topic": str(topics[2].pk), "attitude": "Comfortable"}, study=study)
    assert not bound.is_valid()  # not one of the study's topics


def test_every_topic_full_gets_a_calm_page(topics) -> None:
    study = make_study()
    study.topics.set(topics[:1])
    StudyQuota.objects.create(study=study, kind="topic", topic=topics[0], cap=1)
    start(study, topics[0])
    late = ready_participant(study)
    late.token = late.issue_link()
    late.save()
    page = Client().get(reverse("collection:topic", kwargs={"token": late.token}))
    assert page.status_code == 200
    assert "Every topic of this study has all the conversations it needs" in page.content.decode()


def test_group_quotas_and_unknown_groups_at_the_join_page(demo_defaults) -> None:
    study = make_study(participant_groups="students, staff")
    StudyQuota.objects.create(study=study, kind="group", group="staff", cap=1)
    client = Client()
    assert client.get(f"/join/{study.slug}/?group=nurses").status_code == 400
    page = client.get(f"/join/{study.slug}/?group=staff")
    assert page.status_code == 200 and 'name="group" value="staff"' in page.content.decode()
    joined = flow.do_open_enrol(study, group="staff")
    assert joined.group == "staff"
    refused = Client().get(f"/join/{study.slug}/?group=staff")
    assert refused.status_code == 403
    assert "This part of the study has all the participants it needs" in refused.content.decode()
    with pytest.raises(flow.GroupFull):
        flow.do_open_enrol(study, group="staff")
    assert flow.do_open_enrol(study, group="students").group == "students"
    with pytest.raises(flow.UnknownGroup):
        flow.do_open_enrol(study, group="nurses")


def test_quota_service_refuses_what_the_study_does_not_have(topics) -> None:
    from research.studies.setup import StudySetupError, do_add_quota, do_remove_quota

    study = make_study(participant_groups="students")
    study.topics.set(topics[:1])
    with pytest.raises(StudySetupError, match="does not offer the topic"):
        do_add_quota(study, "topic", 3, topic=topics[1])
    with pytest.raises(StudySetupError, match="not one of the study's participant groups"):
        do_add_quota(study, "group", 3, group="staff")
    quota = do_add_quota(study, "topic", 3, topic=topics[0])
    assert do_add_quota(study, "topic", 5, topic=topics[0]).pk == quota.pk  # the cap changes, no second quota
    assert StudyQuota.objects.get(pk=quota.pk).cap == 5
    assert do_remove_quota(study, quota.pk) and not do_remove_quota(study, quota.pk)


# ---------------------------------------------------------------------------
# Preview participants never enter the data
# ---------------------------------------------------------------------------


def test_a_preview_is_left_out_of_exports_datasets_stats_and_monitoring(topics) -> None:
    from datasets.exchange import exportable_conversations, left_out_counts, withdrawn_conversations
    from datasets.selection import selection_queryset
    from research.studies.collection_stats import collection_stats
    from research.studies.monitoring import study_monitoring
    from research.studies.setup import do_start_preview

    study = make_study(status=Study.Status.DRAFT)
    preview = do_start_preview(study)
    assert preview.is_test and preview.token
    flow.do_record_consent(preview, False)
    flow.do_save_profile(preview, "25-34", [], [], None)
    flow.do_save_pre_panas(preview, dict.fromkeys(cat.PANAS_ITEMS, 3))
    conversation = flow.do_start_conversation(preview, topics[0], "Comfortable")
    Conversation.objects.filter(pk=conversation.pk).update(status="complete", completeness="complete")
    real = start(study, topics[1])

    assert list(exportable_conversations()) == [real]
    assert conversation not in selection_queryset(include_unfinished=True)
    assert withdrawn_conversations().filter(pk=conversation.pk).exists()  # never shown, rated or scored
    assert sum(left_out_counts(exportable_conversations()).values()) == 0
    stats = collection_stats()
    assert (stats.total, stats.participants) == (1, 1)
    assert study_monitoring(study).participants == 1


def test_the_preview_button_opens_the_flow_as_a_test_participant(demo_defaults, researcher) -> None:
    study = make_study(status=Study.Status.DRAFT)
    client = Client()
    client.force_login(researcher)
    response = client.post(reverse("research:study_preview", kwargs={"slug": study.slug}))
    preview = Participant.objects.get(study=study)
    assert preview.is_test
    assert response.status_code == 302 and response["Location"].startswith("/s/")
    consent = client.get(response["Location"], follow=True)
    assert "Preview: you are walking through this study as a test participant" in consent.content.decode()


# ---------------------------------------------------------------------------
# The researcher pages
# ---------------------------------------------------------------------------


SETTINGS = {
    "title": "Made on the page",
    "information": "What it is about.",
    "crisis_resources": "Call 112.",
    "consent_version": "2.0",
    "participant_groups": "students,  staff, students",
    "open_enrolment": "on",
    "min_turns": "2",
    "max_turns": "6",
    "binary_sample_size": "8",
    "max_participants": "",
    "live_call_budget": "500",
    "link_valid_days": "30",
}


def test_a_researcher_creates_and_edits_a_study_on_the_pages(demo_defaults, researcher) -> None:
    client = Client()
    client.force_login(researcher)
    topic = Topic.objects.order_by("order").first()
    made = client.post(reverse("research:study_create"), {**SETTINGS, "slug": "made-here", "topics": [topic.pk]})
    assert made.status_code == 302
    study = Study.objects.get(slug="made-here")
    assert (study.status, study.consent_version, study.binary_sample_size, study.live_call_budget) == (
        "draft",
        "2.0",
        8,
        500,
    )
    assert study.participant_groups == "students, staff" and list(study.topics.all()) == [topic]

    bad = client.post(
        reverse("research:study", kwargs={"slug": "made-here"}),
        {**SETTINGS, "min_turns": "5", "max_turns": "3", "binary_sample_size": "40"},
    )
    body = bad.content.decode()
    assert bad.status_code == 200
    assert "The most turns must be at least the fewest turns (5)." in body
    assert "less than or equal to 36" in body
    assert Study.objects.get(pk=study.pk).min_turns == 2  # nothing saved

    reserved = client.post(reverse("research:study_create"), {**SETTINGS, "slug": "new"})
    assert "reserved" in reserved.content.decode()


#: The platform, spend and quality settings, all different from the study's defaults.
PLATFORM_AND_QUALITY = {
    "platform_completion_url": "app.prolific.com/submissions/complete",  # no scheme: taken as https
    "platform_completion_code": "C1DONE",
    "platform_withdrawal_code": "C2WITHDREW",
    "platform_screenout_code": "C3NOCONSENT",
    "platform_study_id": "65f0abc",
    "platform_participant_param": "pid",
    "platform_study_param": "sid",
    "platform_session_param": "ses",
    "platform_code_param": "code",
    "live_spend_budget_usd": "12.50",
    "attention_checks": "3",
    "quality_min_page_seconds": "5",
    "quality_min_edit_ratio": "0.2",
    "quality_min_message_chars": "20",
    "quality_max_failed_checks": "1",
}

#: The settings a form may leave blank to keep what the study has (research.study_forms.KEEP_WHEN_BLANK).
KEPT_WHEN_BLANK = [
    "platform_participant_param",
    "platform_study_param",
    "platform_session_param",
    "platform_code_param",
    "attention_checks",
    "quality_min_page_seconds",
    "quality_min_edit_ratio",
    "quality_min_message_chars",
    "quality_max_failed_checks",
]


#: PLATFORM_AND_QUALITY as the study stores it.
STORED = {
    **PLATFORM_AND_QUALITY,
    "platform_completion_url": "https://app.prolific.com/submissions/complete",
    "live_spend_budget_usd": Decimal("12.50"),
    "attention_checks": 3,
    "quality_min_page_seconds": 5,
    "quality_min_edit_ratio": 0.2,
    "quality_min_message_chars": 20,
    "quality_max_failed_checks": 1,
}


def stored(study: Study) -> dict[str, object]:
    return {name: getattr(Study.objects.get(pk=study.pk), name) for name in [*SETTINGS, *PLATFORM_AND_QUALITY]}


def test_platform_spend_and_quality_settings_are_saved_from_the_page_and_take_effect(demo_defaults, researcher) -> None:
    from collection import recruitment
    from research.studies.forms import KEEP_WHEN_BLANK

    assert list(KEEP_WHEN_BLANK) == KEPT_WHEN_BLANK
    client = Client()
    client.force_login(researcher)
    topic = Topic.objects.order_by("order").first()
    made = client.post(
        reverse("research:study_create"),
        {**SETTINGS, **PLATFORM_AND_QUALITY, "slug": "on-prolific", "topics": [topic.pk], "min_turns": "2"},
    )
    assert made.status_code == 302
    study = Study.objects.get(slug="on-prolific")
    assert {name: value for name, value in stored(study).items() if name in STORED} == STORED
    # They take effect: the exit URL carries the code under its parameter, and the entry reads the new names.
    assert recruitment.return_url(study, recruitment.COMPLETED) == (
        "https://app.prolific.com/submissions/complete?code=C1DONE"
    )
    from research.studies.setup import do_set_status

    do_set_status(study, "open")
    enter = reverse("collection:enter", kwargs={"slug": study.slug})
    assert client.post(enter, {"pid": "panel-7", "sid": "65f0abc", "ses": "x"}).status_code == 302
    assert client.post(enter, {"pid": "panel-8", "sid": "another-study", "ses": "x"}).status_code == 400
    assert Participant.objects.filter(study=study, is_test=False).count() == 1
    page = client.get(reverse("research:study", kwargs={"slug": study.slug})).content.decode()
    assert 'value="C1DONE"' in page and 'value="12.50"' in page and 'value="0.2"' in page


def test_blank_platform_and_quality_fields_keep_what_the_study_has(demo_defaults, researcher) -> None:
    client = Client()
    client.force_login(researcher)
    blanks = {**dict.fromkeys(PLATFORM_AND_QUALITY, ""), **SETTINGS}
    client.post(reverse("research:study_create"), {**blanks, "slug": "all-blank"})
    fresh = Study.objects.get(slug="all-blank")
    # a new study left blank gets the model's defaults (Prolific's names, the default thresholds) ...
    defaults = {name: Study._meta.get_field(name).get_default() for name in KEPT_WHEN_BLANK}
    assert {name: getattr(fresh, name) for name in KEPT_WHEN_BLANK} == defaults
    assert defaults["platform_participant_param"] == "PROLIFIC_PID" and defaults["quality_min_page_seconds"] == 8
    # ... and the others are blank: no platform entries, no dollar limit
    assert (fresh.platform_completion_url, fresh.platform_completion_code, fresh.live_spend_budget_usd) == (
        "",
        "",
        None,
    )

    study = make_study("tuned", **STORED)
    url = reverse("research:study", kwargs={"slug": study.slug})
    assert client.post(url, {**SETTINGS, **dict.fromkeys(KEPT_WHEN_BLANK, "")}).status_code == 302
    kept = Study.objects.get(pk=study.pk)
    assert {name: getattr(kept, name) for name in KEPT_WHEN_BLANK} == {name: STORED[name] for name in KEPT_WHEN_BLANK}
    # the budget and the codes have no default to fall back on: blank means none (no dollar limit, no code)
    assert (kept.live_spend_budget_usd, kept.platform_completion_code) == (None, "")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("quality_min_edit_ratio", "1.5", "Give a share between 0 and 1 (0.05 = 5%)."),
        ("quality_min_edit_ratio", "-0.1", "Give a share between 0 and 1 (0.05 = 5%)."),
        ("live_spend_budget_usd", "-1", "Ensure this value is greater than or equal to 0."),
        ("live_spend_budget_usd", "ten dollars", "Enter a number."),
        ("attention_checks", "-1", "Ensure this value is greater than or equal to 0."),
        ("quality_min_page_seconds", "2.5", "Enter a whole number."),
        ("platform_completion_url", "not a url at all", "Enter a valid URL."),
    ],
)
def test_invalid_platform_spend_and_quality_values_are_refused_naming_the_field(
    demo_defaults, researcher, field, value, message
) -> None:
    study = make_study("tuned", **STORED)
    before = stored(study)
    client = Client()
    client.force_login(researcher)
    url = reverse("research:study", kwargs={"slug": study.slug})
    changed = {**SETTINGS, **PLATFORM_AND_QUALITY, "title": "A new title", "platform_completion_code": "NEW"}
    refused = client.post(url, {**changed, field: value})
    assert refused.status_code == 200
    assert refused.context["form"].errors == {field: [message]}
    body = refused.content.decode()
    # the message sits with its field on the page (Django names the error list after the field's id)
    assert f'id="id_{field}_error"' in body and escape(message) in body
    assert stored(study) == before  # nothing saved, not even the valid changes beside it
    assert client.post(url, changed).status_code == 302  # the same form with the value fixed saves
    assert Study.objects.get(pk=study.pk).platform_completion_code == "NEW"


@pytest.mark.parametrize(
    ("checks", "min_turns", "max_turns", "warning"),
    [
        (0, 1, 4, None),
        (1, 1, 1, None),  # the survey's check only
        (3, 2, 6, None),  # survey + turns 1 and 2: all met by the fewest turns
        (
            4,
            2,
            6,
            "The study asks for 4 attention checks, placed one in the closing survey and one among the behaviour "
            "questions of each of the first 3 turns, but a participant who finishes after the fewest turns (2) "
            "meets only 3. Raise the fewest turns to 3, or lower the attention checks to 3.",
        ),
        (
            5,
            1,
            2,
            "The study asks for 5 attention checks, but only 3 can ever be asked (one in the closing survey and "
            "one among the behaviour questions of each of the first 2 turns, the most turns). Lower the "
            "attention checks to 3, or raise the most turns and the fewest turns to 4.",
        ),
    ],
)
def test_attention_checks_that_cannot_all_be_placed_are_warned_of(db, checks, min_turns, max_turns, warning) -> None:
    from collection import attention
    from research.studies.setup import setup_warnings

    study = make_study(attention_checks=checks, min_turns=min_turns, max_turns=max_turns)
    assert attention.placement_warning(study) == warning
    assert setup_warnings(study) == ([warning] if warning else [])
    # the count agrees with where the pages place them: a participant who stops after the fewest turns
    participant = Participant.objects.create(study=study)
    conversation = Conversation.objects.create(
        conversation_id=f"c-checks-{checks}",
        participant=participant,
        original_model=models("om-checks")[0],
        topic=Topic.objects.create(category="C", subtopic="s"),
    )
    turns = [
        Turn.objects.create(conversation=conversation, turn_number=n, user_message="m", llm_response="r")
        for n in range(1, min_turns + 1)
    ]
    asked = sum(attention.answers_check(t) is not None for t in turns) + (
        attention.survey_check(participant) is not None
    )
    assert attention.checks_met(study, min_turns) == asked
    assert (asked < checks) == (warning is not None)


def test_the_set_up_page_warns_of_unplaceable_checks_before_the_study_opens(demo_defaults, researcher) -> None:
    client = Client()
    client.force_login(researcher)
    study = make_study(status=Study.Status.DRAFT)
    url = reverse("research:study", kwargs={"slug": study.slug})
    client.post(url, {**SETTINGS, "min_turns": "1", "max_turns": "6", "attention_checks": "4"})
    saved = Study.objects.get(pk=study.pk)
    assert (saved.attention_checks, saved.min_turns) == (4, 1)
    page = client.get(url).content.decode()
    assert 'id="setup-warnings"' in page
    assert "meets only 2" in page and "Raise the fewest turns to 3, or lower the attention checks to 2." in page
    # a warning, not a refusal: the study may still open (and the page keeps saying so)
    client.post(reverse("research:study_status", kwargs={"slug": study.slug}), {"status": "open"})
    assert Study.objects.get(pk=study.pk).status == "open"
    client.post(url, {**SETTINGS, "min_turns": "3", "max_turns": "6", "attention_checks": "4"})
    assert 'id="setup-warnings"' not in client.get(url).content.decode()


def test_pool_quota_and_status_forms_on_the_pages(demo_defaults, researcher) -> None:
    client = Client()
    client.force_login(researcher)
    study = make_study(status=Study.Status.DRAFT, participant_groups="students")
    listener, guide = demo_defaults.models
    url = reverse("research:study", kwargs={"slug": study.slug})
    client.post(
        reverse("research:study_pool", kwargs={"slug": study.slug}),
        {f"weight_{listener.pk}": "3", f"weight_{guide.pk}": "0"},
    )
    assert list(StudyModel.objects.filter(study=study).values_list("original_model", "weight")) == [(listener.pk, 3)]
    refused = client.post(
        reverse("research:study_pool", kwargs={"slug": study.slug}),
        {f"weight_{listener.pk}": "-1", f"weight_{guide.pk}": "x"},
        follow=True,
    )
    assert "The pool was not changed." in refused.content.decode()
    assert StudyModel.objects.get(study=study).weight == 3

    quotas = reverse("research:study_quotas", kwargs={"slug": study.slug})
    page = client.post(quotas, {"kind": "group", "group": "", "cap": "0"}, follow=True).content.decode()
    assert "The quota was not added." in page and "A cap is at least 1." in page
    client.post(quotas, {"kind": "group", "group": "students", "cap": "40"})
    assert StudyQuota.objects.get(study=study).cap == 40

    client.post(reverse("research:study_status", kwargs={"slug": study.slug}), {"status": "open"})
    assert Study.objects.get(pk=study.pk).status == "open"
    page = client.get(url).content.decode()
    assert "Close the study" in page and f"/join/{study.slug}/" in page


def test_staff_outside_the_research_group_cannot_set_up_studies(demo_defaults, django_user_model) -> None:
    staff = django_user_model.objects.create_user("stan", password="staff-pass-123", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.post(reverse("research:study_create"), {**SETTINGS, "slug": "sneaky"}).status_code == 403
    assert not Study.objects.filter(slug="sneaky").exists()


# ---------------------------------------------------------------------------
# The data migration: active -> status
# ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_active_studies_become_open_and_inactive_ones_closed(schema_restored):
    OldStudy = unapply("collection", "0008_study_setup_status_pool_quotas_preview").get_model("collection", "Study")
    common = {"information": "i", "crisis_resources": "c"}
    OldStudy.objects.create(slug="was-active", title="A", active=True, **common)
    OldStudy.objects.create(slug="was-inactive", title="I", active=False, **common)
    NewStudy = migrate_to_newest().get_model("collection", "Study")
    assert dict(NewStudy.objects.values_list("slug", "status")) == {"was-active": "open", "was-inactive": "closed"}
