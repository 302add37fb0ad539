"""Post-chat answers are stored as the benchmark's listed option strings, whatever the screen shows.

Covers the survey form, the data migration that rewrites earlier Q1 wording
(forward and back) and an export written with the earlier wording.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.forms import Q1_SCREEN_LABELS, SurveyForm
from collection.models import Conversation, ConversationWideAnswers, OriginalModel, Topic
from datasets.exchange import import_paths
from tests.documents import conversation_dict

MIGRATION = "0004_q1_listed_option_strings"
frozen = importlib.import_module(f"collection.migrations.{MIGRATION}")


def _conversation(conversation_id: str = "c") -> Conversation:
    return Conversation.objects.create(
        conversation_id=conversation_id,
        original_model=OriginalModel.objects.get_or_create(name="m")[0],
        topic=Topic.objects.get_or_create(category="Work", subtopic="Stress and burnout")[0],
    )


def _valid_post(**overrides) -> dict:
    data = {
        "looking_for": [cat.Q1_OPTIONS[0], cat.Q1_OPTIONS[4]],
        "emotion_clarity": cat.Q2_OPTIONS[2],
        "model_fit": cat.Q3_OPTIONS[1],
        **{f"branch_{b}": "5" for b in cat.FOUR_BRANCHES},
    }
    data.update(overrides)
    return data


# ---------------------------------------------------------------------------
# The survey form
# ---------------------------------------------------------------------------


def test_survey_shows_short_labels_but_submits_the_listed_strings():
    html = str(SurveyForm()["looking_for"])
    values = re.findall(r'value="([^"]*)"', html)
    assert [v.replace("&#x27;", "'") for v in values] == list(cat.Q1_OPTIONS)
    for label in Q1_SCREEN_LABELS.values():
        assert label in html


def test_every_q1_option_has_a_label_and_q2_q3_store_their_own_wording():
    assert set(Q1_SCREEN_LABELS) | {"Other"} == set(cat.Q1_OPTIONS)
    form = SurveyForm()
    assert [value for value, _ in form.fields["emotion_clarity"].choices] == list(cat.Q2_OPTIONS)
    assert [value for value, _ in form.fields["model_fit"].choices] == list(cat.Q3_OPTIONS)


def test_survey_answers_are_the_listed_strings_in_catalogue_order():
    form = SurveyForm(_valid_post(looking_for=[cat.Q1_OPTIONS[4], cat.Q1_OPTIONS[0]]))
    assert form.is_valid(), form.errors
    answers = form.answers()
    assert answers["looking_for"] == ["To just listen or let me vent", "To get specific information or advice"]
    assert answers["emotion_clarity"] == "Mixed or conflicted"
    assert answers["model_fit"] == "Mostly well-matched"


def test_survey_refuses_the_earlier_wording_and_screen_labels_as_values():
    for value in ("Just listen / let me vent", Q1_SCREEN_LABELS[cat.Q1_OPTIONS[2]]):
        form = SurveyForm(_valid_post(looking_for=[value]))
        assert not form.is_valid()
        assert "looking_for" in form.errors


@pytest.mark.django_db
def test_saved_survey_holds_the_listed_strings():
    conversation = _conversation()
    form = SurveyForm(_valid_post())
    assert form.is_valid(), form.errors
    flow.do_save_conversation_wide(conversation, form.answers())
    wide = ConversationWideAnswers.objects.get(conversation=conversation)
    assert wide.looking_for == ["To just listen or let me vent", "To get specific information or advice"]


@pytest.mark.django_db
def test_q1_other_has_a_text_box_kept_in_the_metadata_and_the_file_stays_canonical():
    from datasets.exchange import conversation_to_canonical

    html = str(SurveyForm()["looking_for_other"])
    assert "<textarea" in html and 'maxlength="300"' in html
    conversation = _conversation("c-other")
    # words under "Other" choose "Other" too
    form = SurveyForm(_valid_post(looking_for=[cat.Q1_OPTIONS[0]], looking_for_other="  Someone to  check in on me "))
    assert form.is_valid(), form.errors
    answers = form.answers()
    assert answers["looking_for"] == [cat.Q1_OPTIONS[0], "Other"]
    flow.do_save_conversation_wide(conversation, answers)
    conversation.refresh_from_db()
    assert ConversationWideAnswers.objects.get(conversation=conversation).looking_for == [cat.Q1_OPTIONS[0], "Other"]
    assert conversation.metadata_extra[cat.Q1_OTHER_TEXT_KEY] == "Someone to check in on me"
    doc = conversation_to_canonical(conversation)
    assert doc.conversationWideQuestions.q1_lookingFor == [cat.Q1_OPTIONS[0], "Other"]
    assert cf.check_conversation_options(doc) == []  # every stored answer is a listed string
    data = cf.to_canonical_dict(doc)
    assert data["metadata"][cat.Q1_OTHER_TEXT_KEY] == "Someone to check in on me"
    assert cf.load_conversation(json.dumps(data).encode(), source="x.json").metadata.model_extra == {
        cat.Q1_OTHER_TEXT_KEY: "Someone to check in on me",
        **{k: v for k, v in conversation.metadata_extra.items() if k != cat.Q1_OTHER_TEXT_KEY},
    }
    # saved again without text (or without "Other"): no stale words left behind
    flow.do_save_conversation_wide(conversation, {**answers, "looking_for_other": ""})
    conversation.refresh_from_db()
    assert cat.Q1_OTHER_TEXT_KEY not in conversation.metadata_extra
    too_long = SurveyForm(_valid_post(looking_for=["Other"], looking_for_other="x" * 301))
    assert not too_long.is_valid() and "looking_for_other" in too_long.errors


# ---------------------------------------------------------------------------
# The data migration
# ---------------------------------------------------------------------------


def test_frozen_mappings_match_the_catalogue_of_today_and_invert_exactly():
    # The migration must not import the catalogue, but when written it agreed with it.
    assert frozen.PREVIOUS_TO_LISTED == cat.LEGACY_OPTION_ALIASES
    assert set(frozen.PREVIOUS_TO_LISTED.values()) == set(cat.Q1_OPTIONS) - {"Other"}
    assert {v: k for k, v in frozen.LISTED_TO_PREVIOUS.items()} == frozen.PREVIOUS_TO_LISTED
    source = Path(frozen.__file__).read_text(encoding="utf-8")
    assert "attunebench" not in source and "collection.models" not in source


@pytest.mark.django_db(transaction=True)
def test_migration_rewrites_previous_wording_forward_and_restores_it_backward():
    executor = MigrationExecutor(connection)
    executor.migrate([("collection", "0003_participant_pending_pre_panas")])
    old_apps = executor.loader.project_state([("collection", "0003_participant_pending_pre_panas")]).apps
    OldAnswers = old_apps.get_model("collection", "ConversationWideAnswers")
    OldConversation = old_apps.get_model("collection", "Conversation")
    OldModel = old_apps.get_model("collection", "OriginalModel")
    OldTopic = old_apps.get_model("collection", "Topic")
    om = OldModel.objects.create(name="m")
    topic, _ = OldTopic.objects.get_or_create(category="Work", subtopic="Stress and burnout")

    def answers(conversation_id: str, looking_for: list) -> int:
        conversation = OldConversation.objects.create(conversation_id=conversation_id, original_model=om, topic=topic)
        return OldAnswers.objects.create(conversation=conversation, looking_for=looking_for).pk

    previous = answers("prev", ["Just listen / let me vent", "Specific information or advice", "Other"])
    empty = answers("empty", [])
    stray = answers("stray", ["Something nobody listed"])

    executor = MigrationExecutor(connection)
    executor.migrate([("collection", MIGRATION)])
    looking = dict(ConversationWideAnswers.objects.values_list("pk", "looking_for"))
    assert looking[previous] == ["To just listen or let me vent", "To get specific information or advice", "Other"]
    assert looking[empty] == []
    assert looking[stray] == ["Something nobody listed"]  # off-list answers are not guessed at

    executor = MigrationExecutor(connection)
    executor.migrate([("collection", "0003_participant_pending_pre_panas")])
    looking = dict(OldAnswers.objects.values_list("pk", "looking_for"))
    assert looking[previous] == ["Just listen / let me vent", "Specific information or advice", "Other"]
    assert looking[empty] == [] and looking[stray] == ["Something nobody listed"]

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


# ---------------------------------------------------------------------------
# Old exports
# ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_export_in_the_previous_wording_imports_as_the_listed_strings(tmp_path):
    data = conversation_dict("old-wording")
    data["conversationWideQuestions"]["q1_lookingFor"] = [
        "Just listen / let me vent",
        "help me think through options or decide",  # case differs too
        "Other",
    ]
    (tmp_path / "old.json").write_text(json.dumps(data), encoding="utf-8")
    result = import_paths([tmp_path])
    assert result.ok and result.imported == ["old-wording"]
    wide = ConversationWideAnswers.objects.get(conversation__conversation_id="old-wording")
    assert wide.looking_for == [
        "To just listen or let me vent",
        "To help me think through options or make a decision",
        "Other",
    ]
