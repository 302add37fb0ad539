"""The database itself refuses out-of-range and invalid values, whatever code writes them."""

from __future__ import annotations

import pytest
from django.db import DataError, IntegrityError, transaction
from django.db.models.deletion import ProtectedError

from annotation.models import BinaryJudgement, MoodTag, PairwiseComparison
from collection.models import (
    Conversation,
    ConversationWideAnswers,
    FourBranchRating,
    OriginalModel,
    PanasItemResponse,
    PanasSurvey,
    Topic,
    Turn,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def turn():
    conversation = Conversation.objects.create(
        conversation_id="c",
        original_model=OriginalModel.objects.create(name="m"),
        topic=Topic.objects.get_or_create(category="Work", subtopic="Stress and burnout")[0],
    )
    return Turn.objects.create(conversation=conversation, turn_number=1, user_message="hi", llm_response="hello")


def _rejected(factory) -> None:
    # SQLite reports every violation as IntegrityError; Postgres reports over-long strings as DataError.
    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        factory()


def test_turn_numbers_unique_and_positive(turn):
    _rejected(lambda: Turn.objects.create(conversation=turn.conversation, turn_number=1, user_message="x"))
    _rejected(lambda: Turn.objects.create(conversation=turn.conversation, turn_number=0, user_message="x"))


def test_ratings_and_totals_in_range(turn):
    conversation = turn.conversation
    _rejected(lambda: PanasSurvey.objects.create(conversation=conversation, kind="pre", total_positive=71))
    _rejected(lambda: PanasSurvey.objects.create(conversation=conversation, kind="pre", total_negative=9))
    _rejected(lambda: PanasSurvey.objects.create(conversation=conversation, kind="during"))
    survey = PanasSurvey.objects.create(conversation=conversation, kind="pre", total_positive=10, total_negative=70)
    _rejected(lambda: PanasItemResponse.objects.create(survey=survey, item="Proud", rating=8))
    _rejected(lambda: PanasItemResponse.objects.create(survey=survey, item="Proud", rating=0))
    _rejected(lambda: PanasItemResponse.objects.create(survey=survey, item="Happy", rating=3))
    _rejected(lambda: FourBranchRating.objects.create(conversation=conversation, branch="managing", rating=8))
    _rejected(lambda: FourBranchRating.objects.create(conversation=conversation, branch="coping", rating=3))
    _rejected(lambda: MoodTag.objects.create(turn=turn, position=0, emotion="Upset", intensity=9))
    _rejected(lambda: MoodTag.objects.create(turn=turn, position=0, emotion="", intensity=3))


def test_choice_values_enforced(turn):
    _rejected(lambda: BinaryJudgement.objects.create(turn=turn, position=0, question_id="B99", observed="yes"))
    _rejected(lambda: BinaryJudgement.objects.create(turn=turn, position=0, question_id="B1", observed="maybe"))
    _rejected(
        lambda: PairwiseComparison.objects.create(
            turn=turn, position=0, question_id="general", response_a="human", response_b="human", winner="A"
        )
    )
    _rejected(
        lambda: PairwiseComparison.objects.create(
            turn=turn, position=0, question_id="PW99", response_a="human", response_b="original"
        )
    )
    _rejected(
        lambda: PairwiseComparison.objects.create(
            turn=turn, position=0, question_id="general", response_a="human", response_b="original", winner="C"
        )
    )
    _rejected(lambda: ConversationWideAnswers.objects.create(conversation=turn.conversation, model_fit="Great"))
    _rejected(lambda: Conversation.objects.filter(pk=turn.conversation.pk).update(status="lost"))
    PairwiseComparison.objects.create(
        turn=turn,
        position=0,
        question_id="custom:Which felt warmer?",
        response_a="human",
        response_b="original",
        winner=None,
    )


def test_collected_data_is_protected_from_cascading_deletes(turn):
    MoodTag.objects.create(turn=turn, position=0, emotion="Upset", intensity=3)
    with pytest.raises(ProtectedError):
        turn.conversation.original_model.delete()
    with pytest.raises(ProtectedError):
        turn.conversation.topic.delete()
    with pytest.raises(ProtectedError):
        turn.conversation.delete()
