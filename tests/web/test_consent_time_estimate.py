"""The consent page's time estimate: measured from the recorded page times, the default until there are enough."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.utils import timezone

from annotation.models import PageTime
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection import time_estimate as te
from collection.models import Participant, Study, Topic, Turn
from tests.web.test_participant_flow import Walker

pytestmark = [pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def timed_turns(study: Study, count: int, seconds_per_page: float, is_test: bool = False) -> None:
    """``count`` finished turns of one participant, each page open ``seconds_per_page`` seconds."""
    participant = flow.do_enrol(study)
    if is_test:
        Participant.objects.filter(pk=participant.pk).update(is_test=True)
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "35-44", [], [], None)
    flow.do_save_pre_panas(participant, dict.fromkeys(cat.PANAS_ITEMS, 4))
    conversation = flow.do_start_conversation(
        participant, Topic.objects.get(subtopic="Exam pressure"), cat.TOPIC_ATTITUDE_OPTIONS[0]
    )
    for number in range(1, count + 1):
        turn, _ = flow.do_add_message(conversation, number, f"Message {number}")
        flow.do_save_reply(turn, "A reply.")
        Turn.objects.filter(pk=turn.pk).update(
            annotation_completed_at=timezone.now(), completeness=cat.TURN_COMPLETE, mood_answered=True
        )
        for page in ("answers", "rewrite", "compare"):
            PageTime.objects.create(turn=turn, page=page, seconds=seconds_per_page)


def consent_page(client, study: Study) -> str:
    walker = Walker(client, flow.do_enrol(study))
    return walker.body(walker.get(walker.url("consent/")))


def test_too_few_timed_turns_give_the_default_range(client, study):
    timed_turns(study, te.MIN_TIMED_TURNS - 1, 60)
    page = consent_page(client, study)
    assert "usually 20 to 40 minutes." in page and "going by" not in page


def test_the_range_comes_from_the_recorded_page_times_and_ignores_test_participants(client, study):
    timed_turns(study, 6, 50)
    timed_turns(study, 6, 50)
    timed_turns(study, 12, 3000, is_test=True)  # a researcher's walk-through is no measure
    assert sorted(te.timed_turn_seconds(study)) == [150.0] * 12
    # 8 minutes outside the turns, then 3 turns of 150 s of questions and 120 s of chat: 21.5 minutes
    page = consent_page(client, study)
    assert "usually 20 to 25 minutes, going by how long the questions took people" in page


def test_the_estimate_spreads_with_the_middle_half_of_the_turns():
    study = Study(min_turns=4)
    seconds = [100.0] * 5 + [400.0] * 5 + [900.0] * 5
    result = te.estimate(study, seconds)
    # quartiles 100 and 900 s: 8 + 4 * (100 + 120) / 60 = 22.7 -> 20; 8 + 4 * (900 + 120) / 60 = 76 -> 80
    assert (result.low_minutes, result.high_minutes, result.measured_turns) == (20, 80, 15)
    assert te.estimate(study, seconds[:3]) == te.TimeEstimate(20, 40, 0)
