"""Quality control: each detector on hand-built data, reversible researcher decisions,
exclusion from new dataset versions and scores by rule, the datasheet by reason, and the research pages/API."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation import quality as q
from annotation.models import AlternateResponses, BinaryJudgement, PageTime
from annotation.page_times import do_record_page_time, page_stamp
from attunebench import catalogue as cat
from collection import attention
from collection.models import AttentionCheck, Conversation, OriginalModel, Participant, QualityDecision, Topic, Turn
from collection.study_flow import do_enrol
from datasets.exchange import usable_conversations
from datasets.pseudonyms import export_pseudonym
from datasets.selection import complete_conversations
from datasets.versions import build_datasheet, do_freeze_dataset_version


def make_conversation(participant: Participant, messages: list[str], complete: bool = True) -> Conversation:
    conversation = Conversation.objects.create(
        conversation_id=f"c-{participant.pseudonym}",
        participant=participant,
        original_model=OriginalModel.objects.first(),
        topic=Topic.objects.first(),
        status=Conversation.Status.COMPLETE if complete else Conversation.Status.IN_PROGRESS,
        completeness=cat.CONVERSATION_COMPLETE if complete else cat.CONVERSATION_UNFINISHED,
    )
    for n, text in enumerate(messages, start=1):
        Turn.objects.create(
            conversation=conversation,
            turn_number=n,
            user_message=text,
            llm_response="A reply.",
        )
    return conversation


def answer_page(turn: Turn, answers: list[tuple[str, str]]) -> None:
    for i, (observed, preferred) in enumerate(answers):
        BinaryJudgement.objects.create(
            turn=turn, position=i, question_id=cat.BINARY_QUESTION_IDS[i], observed=observed, preferred=preferred
        )


@pytest.fixture
def person(study):
    return do_enrol(study)


# ---------------------------------------------------------------------------
# Detectors, hand-derived
# ---------------------------------------------------------------------------


def test_bounded_edit_distance_matches_hand_counts():
    assert q.bounded_edit_distance("kitten", "sitting", 5) == 3  # k->s, e->i, +g
    assert q.bounded_edit_distance("kitten", "sitting", 2) == 3  # over the limit: limit + 1
    assert q.bounded_edit_distance("abc", "abc", 0) == 0
    assert q.bounded_edit_distance("abc", "abcdef", 2) == 3  # length gap alone exceeds the limit


def test_edit_share_below_threshold_only():
    original = "x" * 100
    assert q.edit_share(original, "x" * 98 + "yy", 0.05) == pytest.approx(0.02)  # 2 of 100 changed
    assert q.edit_share(original, "x" * 95 + "y" * 5, 0.05) is None  # exactly 5%: not below
    assert q.edit_share("I hear you.", "I  hear   you.", 0.05) == 0.0  # whitespace runs ignored


def test_short_messages_flag_needs_half_the_messages_short(study, person):
    study.quality_min_message_chars = 10
    study.save()
    make_conversation(person, ["ok", "fine", "I have been worried about my exam results all week."])
    flag = q.detect_short_messages(Participant.objects.get(pk=person.pk), study)
    assert flag is not None and flag.summary == "2 of 3 messages under 10 characters"
    assert [e["message"] for e in flag.evidence] == ["ok", "fine"]
    other = do_enrol(study)
    make_conversation(other, ["ok", "I have been worried about my exam results.", "And my family too, honestly."])
    assert q.detect_short_messages(other, study) is None  # 1 of 3 is short: under half


def test_straight_lining_needs_identical_answers_on_a_page_of_five(study, person):
    conversation = make_conversation(person, ["First message here.", "Second message here."])
    first, second = conversation.turns.order_by("turn_number")
    answer_page(first, [("yes", "yes")] * 5)  # all identical: flagged
    answer_page(second, [("yes", "yes")] * 4 + [("no", "yes")])  # one differs: fine
    flag = q.detect_straight_lining(person, study)
    assert flag is not None and flag.summary == "1 of 2 behaviour pages answered identically"
    assert flag.evidence == [{"turn": 1, "questions": 5, "observed": "yes", "preferred": "yes"}]
    third = do_enrol(study)
    turn = make_conversation(third, ["A message long enough."]).turns.get()
    answer_page(turn, [("na", "na")] * 4)  # four questions: too few to judge
    assert q.detect_straight_lining(third, study) is None


def test_unedited_ideal_reply_against_the_nearer_start(study, person):
    study.quality_min_edit_ratio = 0.1
    study.save()
    conversation = make_conversation(person, ["Message one is long.", "Message two is long."])
    first, second = conversation.turns.order_by("turn_number")
    Turn.objects.filter(pk__in=[first.pk, second.pk]).update(llm_response="abcdefghij")  # 10 characters
    AlternateResponses.objects.create(turn=first, llm_improved="zzzzzzzzzz", human_edited="abcdefghij")  # 0 of 10
    AlternateResponses.objects.create(turn=second, llm_improved="zzzzzzzzzz", human_edited="abcdeXYZij")  # 3 of 10
    flag = q.participant_quality(person).flags
    unedited = next(f for f in flag if f.kind == q.UNEDITED_REPLY)
    assert unedited.summary == "1 of 2 ideal replies changed less than 10%"
    assert unedited.evidence == [{"turn": 1, "compared_with": "the model's reply", "changed_share": 0.0}]


def test_too_fast_pages_from_recorded_page_times(study, person):
    study.quality_min_page_seconds = 8
    study.save()
    turn = make_conversation(person, ["A message long enough."]).turns.get()
    shown = timezone.now()
    do_record_page_time(turn, "answers", page_stamp(turn, "answers", shown), now=shown + timedelta(seconds=3))
    do_record_page_time(turn, "rewrite", page_stamp(turn, "rewrite", shown), now=shown + timedelta(seconds=40))
    assert do_record_page_time(turn, "compare", "forged", now=shown) is None  # no valid stamp: nothing recorded
    assert do_record_page_time(turn, "compare", page_stamp(turn, "rewrite", shown), now=shown) is None  # wrong page
    assert dict(PageTime.objects.filter(turn=turn).values_list("page", "seconds")) == {"answers": 3.0, "rewrite": 40.0}
    flag = q.detect_too_fast(person, study)
    assert flag is not None and flag.summary == "1 of 2 pages sent in under 8 s"
    assert flag.evidence == [{"turn": 1, "page": "answers", "seconds": 3.0}]


def test_a_page_sent_again_keeps_one_row_with_the_latest_time(study, person):
    turn = make_conversation(person, ["A message long enough."]).turns.get()
    shown = timezone.now()
    stamp = page_stamp(turn, "answers", shown)
    do_record_page_time(turn, "answers", stamp, now=shown + timedelta(seconds=5))
    first = PageTime.objects.get(turn=turn, page="answers")
    do_record_page_time(turn, "answers", stamp, now=shown + timedelta(seconds=9))
    again = PageTime.objects.get(turn=turn, page="answers")
    assert (again.pk, again.seconds) == (first.pk, 9.0)
    assert again.recorded_at >= first.recorded_at


def test_a_page_sent_through_the_real_view_stores_its_time_and_a_tampered_stamp_is_not_trusted(
    client, participant, settings, monkeypatch
):
    """The answers page's signed stamp (set when it was shown) is read back on submission; a stamp a
    participant could edit or make (backdated, signed without the server's key) records nothing."""
    import re
    from types import SimpleNamespace

    from django.core import signing

    from annotation import page_times
    from tests.web.test_participant_flow import Walker, every_answer

    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    walker = Walker(client, participant)
    walker.to_chat()
    assert walker.send("My exams start next week and I cannot sleep.", 1).status_code == 200
    assert walker.reply(1)[-1]["type"] == "done"
    turn = Turn.objects.get(conversation__participant=participant, turn_number=1)
    url = walker.url("turn/1/")

    # A clock for the stamps only (the page's "shown" and the submission), so the duration is exact.
    shown = timezone.now()
    clock = {"now": shown}
    monkeypatch.setattr(page_times, "timezone", SimpleNamespace(now=lambda: clock["now"]))

    html = walker.body(walker.get(url))
    stamp = re.search(r'name="page_stamp" value="([^"]+)"', html).group(1)
    assert page_times.shown_at(turn, "answers", stamp) == shown
    ids = list(dict.fromkeys(re.findall(r'name="observed_(B\d+)"', html)))
    token = re.search(r'name="shown" value="([^"]+)"', html).group(1)
    clock["now"] = shown + timedelta(seconds=12.5)
    data = {"step": "answers", "shown": token, "page_stamp": stamp, "no_change": "on", **every_answer(ids)}
    assert walker.post(url, data).status_code == 302
    assert list(PageTime.objects.filter(turn=turn).values_list("page", "seconds")) == [("answers", 12.5)]

    # The rewrite page, sent with a stamp that claims it was shown an hour ago
    html = walker.body(walker.get(url))
    assert 'name="page_stamp"' in html and 'name="human_edited"' in html
    backdated = {"turn": turn.pk, "page": "rewrite", "at": (shown - timedelta(hours=1)).timestamp()}
    forged = signing.dumps(backdated, key="not-the-server-key", salt="attune.annotation.page-time")
    signature = stamp.rpartition(":")[2]
    edited = signing.dumps(backdated, salt="attune.annotation.page-time").rpartition(":")[0] + ":" + signature
    rewrite = {"step": "rewrite", "human_edited": "I hear you; exams are hard.", "questions": ["general"]}
    assert walker.post(url, {**rewrite, "page_stamp": edited}).status_code == 302  # the reply is still kept
    assert AlternateResponses.objects.get(turn=turn).human_edited == "I hear you; exams are hard."
    assert page_times.shown_at(turn, "rewrite", forged) is None  # signed, but not with the server's key
    # the answers page's genuine stamp does not time the compare page either
    html = walker.body(walker.get(url))
    names = set(re.findall(r'name="(winner_\d+)"', html))
    assert walker.post(url, {"step": "compare", "page_stamp": stamp, **dict.fromkeys(names, "B")}).status_code == 302
    assert list(PageTime.objects.filter(turn=turn).values_list("page", "seconds")) == [("answers", 12.5)]


def test_attention_checks_placement_and_flag(study, person):
    study.attention_checks = 3
    study.quality_max_failed_checks = 0
    study.save()
    person.refresh_from_db()
    conversation = make_conversation(person, ["One message here.", "Two message here.", "Three message here."])
    t1, t2, t3 = conversation.turns.order_by("turn_number")
    assert attention.answers_check(t1) == cat.YES_NO_NA[t1.pk % 3]
    assert attention.answers_check(t2) is not None and attention.answers_check(t3) is None  # 3 checks: 2 turns + survey
    assert attention.survey_check(person) == attention.SURVEY_VALUES[person.pk % 4]
    attention.do_record_check(person, t1, "no", "no")
    attention.do_record_check(person, t2, "na", "yes")
    attention.do_record_check(person, None, "3", "")
    attention.do_record_check(person, t2, "na", "na")  # a repeat changes nothing
    attention.do_record_check(person, None, "3", "3")
    assert AttentionCheck.objects.get(turn=t2).passed is False
    assert AttentionCheck.objects.get(participant=person, place="survey").given == ""
    assert AttentionCheck.objects.filter(participant=person).count() == 3
    summary = q.participant_quality(person)
    assert (summary.checks_passed, summary.checks_failed) == (1, 2)
    flag = next(f for f in summary.flags if f.kind == q.ATTENTION)
    assert flag.summary == "2 of 3 attention checks failed"
    assert flag.evidence == [
        {"place": "answers", "turn": 2, "instructed": "na", "given": "yes"},
        {"place": "survey", "turn": None, "instructed": "3", "given": None},
    ]
    study.quality_max_failed_checks = 2
    study.save()
    assert q.ATTENTION not in q.participant_quality(person, study).flag_kinds


def test_study_quality_sorts_by_flags_and_lists_every_kind(study, person):
    study.quality_min_message_chars = 10
    study.save()
    calm = do_enrol(study)
    make_conversation(calm, ["A thoughtful and long message."])
    make_conversation(person, ["ok"])
    summaries = q.study_quality(study)
    assert [s.participant for s in summaries] == [person, calm]
    assert summaries[0].flag_kinds == [q.SHORT_MESSAGES] and summaries[1].flags == []
    assert q.flag_counts(summaries) == dict.fromkeys(q.FLAG_KINDS, 0) | {q.SHORT_MESSAGES: 1}
    assert set(q.FLAG_KINDS) == {q.ATTENTION, q.TOO_FAST, q.STRAIGHT_LINING, q.UNEDITED_REPLY, q.SHORT_MESSAGES}


# ---------------------------------------------------------------------------
# Decisions and their effect on datasets and scores
# ---------------------------------------------------------------------------


def test_decisions_are_logged_and_reversible(person, researcher):
    with pytest.raises(q.QualityError, match="reason"):
        q.decide(person, "exclude", researcher)
    with pytest.raises(q.QualityError, match="note"):
        q.decide(person, "exclude", researcher, reason=q.OTHER_REASON)
    q.decide(person, "exclude", researcher, reason=q.ATTENTION, note="Failed both checks.")
    person.refresh_from_db()
    assert person.quality_excluded_at is not None and person.quality_exclusion_reason == q.ATTENTION
    q.decide(person, "include", researcher, note="Checked the chat: fine.")
    person.refresh_from_db()
    assert person.quality_excluded_at is None and person.quality_exclusion_reason == ""
    history = q.decision_history(person)
    assert [(d.decision, d.reason, d.decided_by) for d in history] == [
        ("include", "", researcher),
        ("exclude", q.ATTENTION, researcher),
    ]


def test_exclusion_leaves_new_versions_but_not_frozen_ones(sample_conversations, researcher):
    before = do_freeze_dataset_version("before")
    conversation = complete_conversations().exclude(participant=None).first()
    person = conversation.participant
    k = complete_conversations().filter(participant=person).count()
    q.decide(person, "exclude", researcher, reason=q.SHORT_MESSAGES)
    assert conversation not in usable_conversations() and conversation not in complete_conversations()
    after = do_freeze_dataset_version("after")
    assert after.conversation_count == before.conversation_count - k
    sheet = build_datasheet(after, "json", False)
    assert sheet.data["left_out"]["quality_excluded"] == k
    assert sheet.data["quality_exclusions_by_reason"] == {q.SHORT_MESSAGES: k}
    markdown = sheet.as_markdown()
    assert "Excluded for quality" in markdown
    # the reader of the markdown sees the reason's label; datasheet.json keeps the code for scripts
    assert f"| Very short chat messages | {k} |" in markdown and f"| {q.SHORT_MESSAGES} |" not in markdown
    assert json.loads(sheet.as_json())["quality_exclusions_by_reason"] == {"short_messages": k}
    assert build_datasheet(before, "json", False).data["counts"]["conversations"] == before.conversation_count
    q.decide(person, "include", researcher)  # reversed: the next version has it again
    assert do_freeze_dataset_version("again").conversation_count == before.conversation_count


def test_scores_leave_out_excluded_conversations(sample_conversations, researcher):
    from scoring.run_scoring import do_score_evaluation_run
    from tests.web.conftest import make_scored_run

    run = make_scored_run("quality-em")
    scored = do_score_evaluation_run(run.pk)
    conversation = Conversation.objects.filter(run_outputs__run=run).exclude(participant=None).first()
    assert scored == run.conversations_total and conversation is not None
    q.decide(conversation.participant, "exclude", researcher, reason=q.OTHER_REASON, note="Test exclusion.")
    excluded = Conversation.objects.filter(participant=conversation.participant, run_outputs__run=run).count()
    assert excluded >= 1 and do_score_evaluation_run(run.pk) == scored - excluded


def test_attention_checks_never_reach_the_export(sample_conversations):
    from datasets.exchange import conversation_to_dict, with_export_relations

    conversation = Conversation.objects.exclude(participant=None).filter(turns__isnull=False).first()
    turn = conversation.turns.first()
    exported = with_export_relations(Conversation.objects.filter(pk=conversation.pk))
    before = conversation_to_dict(exported.get())
    attention.do_record_check(conversation.participant, turn, "yes", "no")
    assert conversation_to_dict(exported.all().get()) == before


def test_decision_constraint_needs_a_reason_to_exclude(person):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        QualityDecision.objects.create(participant=person, decision="exclude", reason="")


# ---------------------------------------------------------------------------
# Research pages and API
# ---------------------------------------------------------------------------


def test_pages_explain_the_checks_and_record_a_reversible_decision(client, study, person, researcher):
    study.quality_min_message_chars = 10
    study.save()
    make_conversation(person, ["ok"])
    client.force_login(researcher)
    page = client.get(f"/research/quality/{study.slug}/").content.decode()
    assert "Very short chat messages" in page and "1 of 1 messages under 10 characters" in page
    url = f"/research/quality/{study.slug}/{person.pseudonym}/"
    refused = client.post(url, {"decision": "exclude", "reason": "", "note": "why"})
    assert refused.status_code == 400 and "Choose the reason" in refused.content.decode()
    assert client.post(url, {"decision": "exclude", "reason": q.SHORT_MESSAGES, "note": "only ok"}).status_code == 302
    person.refresh_from_db()
    assert person.quality_exclusion_reason == q.SHORT_MESSAGES
    detail = client.get(url).content.decode()
    assert "excluded" in detail and "rita" in detail and "only ok" in detail
    client.post(url, {"decision": "include"})
    person.refresh_from_db()
    assert person.quality_excluded_at is None and QualityDecision.objects.filter(participant=person).count() == 2


def test_api_lists_summaries_and_records_decisions(client, study, person, researcher):
    study.quality_min_message_chars = 10
    study.save()
    make_conversation(person, ["ok"])
    client.force_login(researcher)
    body = client.get(f"/api/quality/{study.slug}/").json()
    assert body["flag_counts"][q.SHORT_MESSAGES] == 1 and set(body["checks"]) == set(q.FLAG_KINDS)
    assert body["participants"][0]["pseudonym"] == export_pseudonym(person.pseudonym)
    url = f"/api/quality/{study.slug}/{export_pseudonym(person.pseudonym)}/"
    bad = client.post(url, {"decision": "exclude"}, content_type="application/json")
    assert bad.status_code == 400 and "reason" in bad.json()["decision"][0]
    made = client.post(
        url, {"decision": "exclude", "reason": "other", "note": "Bot-like."}, content_type="application/json"
    )
    assert made.status_code == 201 and made.json()["excluded"] is True
    assert made.json()["history"][0]["decided_by"] == "rita"
    assert client.get("/api/quality/no-such-study/").status_code == 404
    schema = client.get("/api/schema/").content.decode()
    assert "/api/quality/{slug}/{pseudonym}/" in schema


def test_quality_shows_the_pseudonym_exports_show_and_finds_a_participant_by_either(client, study, person, researcher):
    """Flags must be matchable with /api/conversations/ and exports, which show only the export pseudonym."""
    study.quality_min_message_chars = 10
    study.save()
    conversation = make_conversation(person, ["ok"])
    conversation.conversation_id = "c-quality-match"  # not made of the stored id, which must appear nowhere
    conversation.save(update_fields=["conversation_id"])
    shown = export_pseudonym(person.pseudonym)
    client.force_login(researcher)
    listed = client.get("/api/conversations/").json()["results"]
    assert [c["participant"] for c in listed if c["conversation_id"] == conversation.conversation_id] == [shown]

    body = client.get(f"/api/quality/{study.slug}/")
    assert [p["pseudonym"] for p in body.json()["participants"]] == [shown]
    detail = client.get(f"/api/quality/{study.slug}/{shown}/")
    assert detail.status_code == 200 and detail.json()["pseudonym"] == shown
    assert client.get(f"/api/quality/{study.slug}/{person.pseudonym}/").json()["pseudonym"] == shown
    made = client.post(
        f"/api/quality/{study.slug}/{shown}/",
        {"decision": "exclude", "reason": q.SHORT_MESSAGES},
        content_type="application/json",
    )
    assert made.status_code == 201 and made.json()["pseudonym"] == shown
    person.refresh_from_db()
    assert person.quality_exclusion_reason == q.SHORT_MESSAGES
    assert client.get(f"/api/quality/{study.slug}/pp-{'0' * 28}/").status_code == 404
    # The stored id appears in no quality response: not in the list, the detail or the decision.
    for text in (body.content.decode(), detail.content.decode(), made.content.decode()):
        assert person.pseudonym not in text

    page = client.get(f"/research/quality/{study.slug}/").content.decode()
    assert f"/research/quality/{study.slug}/{shown}/" in page and person.pseudonym not in page
    one = client.get(f"/research/quality/{study.slug}/{shown}/")
    assert one.status_code == 200 and shown in one.content.decode() and person.pseudonym not in one.content.decode()
    for url in (reverse("research:conversation", args=[conversation.conversation_id]), reverse("research:collection")):
        text = client.get(url).content.decode()
        assert shown in text and person.pseudonym not in text, url
