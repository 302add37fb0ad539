"""Human baseline: a rater replays a conversation turn by turn and is scored like a model."""

from __future__ import annotations

import math

import pytest
from django.test import Client

from attunebench import canonical as cf
from attunebench import catalogue as cat

pytestmark = pytest.mark.django_db


@pytest.fixture
def assignment(sample_conversations, researcher, rater):
    from collection.models import Conversation
    from research.raters.human_baseline import do_assign

    conversation = Conversation.objects.get(conversation_id="conv-grief-02")  # 3 turns
    return do_assign(conversation, rater, researcher)


def answer_turn(client: Client, assignment, turn_number: int, draft: str) -> None:
    """Draft stage, then the analysis stage answering 'yes' to everything and 'A' to every comparison."""
    from research.raters.human_baseline import current_step

    url = f"/research/rate/{assignment.pk}/"
    assert client.post(url, {"turn_number": turn_number, "draft": draft}).status_code == 302
    assignment.refresh_from_db()
    step = current_step(assignment)
    assert step.stage == "analysis" and step.turn_number == turn_number
    data = {"turn_number": turn_number, "emotion_Upset": "on", "intensity_Upset": "5", "emotion_Guilty": "on"}
    for q in step.questions:
        data[f"om_{q.id}"] = cat.YES
        data[f"hp_{q.id}"] = cat.NO
    for c in step.comparisons:
        data[f"pw_{c['index']}"] = "A"
    response = client.post(url, data)
    assert response.status_code == 302, response.content[:500]


def test_rater_sees_no_future_turn_and_no_participant_annotation(assignment, rater):
    from collection.models import Turn

    client = Client()
    client.force_login(rater)
    turns = list(Turn.objects.filter(conversation=assignment.conversation).order_by("turn_number"))
    page = client.get(f"/research/rate/{assignment.pk}/").content.decode()
    assert turns[0].user_message in page
    assert turns[0].llm_response not in page  # the original reply comes only after the draft
    assert turns[1].user_message not in page and turns[2].user_message not in page
    client.post(f"/research/rate/{assignment.pk}/", {"turn_number": 1, "draft": "That sounds really hard."})
    page = client.get(f"/research/rate/{assignment.pk}/").content.decode()
    assert turns[0].llm_response in page and turns[1].user_message not in page
    for tag in turns[0].mood_tags.all():
        # the participant's own tags are never rendered as selected
        assert f'name="emotion_{tag.emotion}" checked' not in page
    assert "winner" not in page


def test_finished_rating_is_a_canonical_run_scored_like_a_model(assignment, rater, django_capture_on_commit_callbacks):
    from research.results.evaluation import apart_rows, evaluation_data, leaderboard_rows
    from scoring.models import ConversationScore, EvaluatedModel

    client = Client()
    client.force_login(rater)
    for number in (1, 2, 3):
        answer_turn(client, assignment, number, f"My reply to turn {number}")
    post = {f"panas_{item}": "3" for item in cat.PANAS_ITEMS}
    post.update({f"branch_{b}": "5" for b in cat.FOUR_BRANCHES})
    post.update(
        {
            "looking_for": [cat.Q1_OPTIONS[0]],
            "emotion_clarity": cat.Q2_OPTIONS[1],
            "model_fit": cat.Q3_OPTIONS[1],
            "what_felt_off": "Too much advice, Too generic",
        }
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"/research/rate/{assignment.pk}/", post).status_code == 302
    assignment.refresh_from_db()
    assert assignment.is_complete
    output = cf.parse_run(assignment.run_conversation.output)  # SPEC 3.2 shape, validated
    assert output.em_model == "human:ravi" and [t.turnNumber for t in output.turns] == [1, 2, 3]
    assert output.turns[0].em_drafted_response == "My reply to turn 1"
    assert {t.emotion for t in output.turns[0].em_emotion_tags} == {"Upset", "Guilty"}
    assert output.post_conversation.predicted_conversation_wide.q3_followUp_whatFeltOff == [
        "Too much advice",
        "Too generic",
    ]
    assert EvaluatedModel.objects.get(name="human:ravi").kind == EvaluatedModel.Kind.HUMAN
    score = ConversationScore.objects.get(run=assignment.run_conversation.run)
    assert score.coverage == 1.0 and 0 <= score.composite_score <= 100
    # A human row is never ranked among models (it rated other conversations than they did): it is shown apart.
    data = evaluation_data()
    assert leaderboard_rows(data) == []
    rows = apart_rows(data)
    assert [r.em_model for r in rows] == ["human:ravi"] and rows[0].human_baseline and rows[0].n_conversations == 1


def test_answers_for_the_wrong_turn_are_refused(assignment, rater):
    from research.raters.human_baseline import HumanBaselineError, do_record_draft

    with pytest.raises(HumanBaselineError, match="turn 1"):
        do_record_draft(assignment, 2, "skipping ahead")


def test_assigning_twice_keeps_one_assignment(assignment, researcher, rater):
    from research.models import HumanAssignment
    from research.raters.human_baseline import do_assign

    assert do_assign(assignment.conversation, rater, researcher).pk == assignment.pk
    assert HumanAssignment.objects.count() == 1


def _finished_output(conversation_id: str, rater: str, answers: list[tuple[str, str]], tags: list[set[str]]) -> dict:
    return {
        "conversationId": conversation_id,
        "em_model": f"human:{rater}",
        "mode": "default",
        "run_timestamp": "2026-01-01T00:00:00Z",
        "turns": [
            {
                "turnNumber": i + 1,
                "em_binary_om_assessment": {"B1": om},
                "em_binary_human_prediction": {"B1": hp},
                "em_emotion_tags": [{"emotion": e, "intensity": None} for e in sorted(tag)],
            }
            for i, ((om, hp), tag) in enumerate(zip(answers, tags, strict=True))
        ],
    }


def test_krippendorff_alpha_between_raters_matches_the_hand_computation(sample_conversations, django_user_model):
    """Two raters, binary units on one conversation.

    Units (om, hp per turn): rater a = yes,yes | no,no ; rater b = yes,no | no,no
    → pairable values: yes×2, no×6 in 4 units; one disagreeing unit.
    Nominal alpha = 1 − Do/De with n = 8 values:
      Do = (1/n) Σ_u (2·mismatches_u/(m_u − 1)) = (1/8)·(2·1/1) = 0.25
      De = (2·n_yes·n_no)/(n(n − 1)) = (2·3·5)/(8·7) = 30/56  (values: yes 3, no 5)
    Counting again: a gives yes,yes,no,no; b gives yes,no,no,no → yes = 3, no = 5.
      alpha = 1 − 0.25/(30/56) = 1 − 14/30 = 0.5333…
    """
    from collection.models import Conversation
    from research.raters.human_baseline import human_run, rater_agreement
    from scoring.models import RunConversation

    conversation = Conversation.objects.get(conversation_id="conv-grief-02")
    for name, answers, tags in (
        ("a", [("yes", "yes"), ("no", "no")], [{"Upset"}, {"Guilty"}]),
        ("b", [("yes", "no"), ("no", "no")], [{"Upset"}, {"Guilty"}]),
    ):
        user = django_user_model.objects.create_user(name)
        RunConversation.objects.create(
            run=human_run(user),
            conversation=conversation,
            status="done",
            output=_finished_output(conversation.conversation_id, name, answers, tags),
        )
    agreement = rater_agreement()
    assert agreement.raters == ["human:a", "human:b"] and agreement.conversations == 1
    assert agreement.binary.units == 4
    assert math.isclose(agreement.binary.alpha, 1 - 0.25 / (30 / 56))
    # identical emotion tags over all 20 items of 2 turns (40 units, values 0 and 1): perfect agreement
    assert agreement.emotion.units == 40 and agreement.emotion.alpha == 1.0
    assert agreement.per_item["Upset"].alpha == 1.0 and agreement.per_item["Proud"].alpha is None

    # Cached under a digest of the answers: the same answers give the stored result, a changed answer a new one.
    assert rater_agreement() == agreement
    changed = RunConversation.objects.get(run__evaluated_model__name="human:b")
    changed.output = _finished_output(
        conversation.conversation_id, "b", [("yes", "yes"), ("no", "no")], [{"Upset"}, {"Guilty"}]
    )
    changed.save()
    assert rater_agreement().binary.alpha == 1.0


def test_agreement_is_empty_with_fewer_than_two_raters(sample_conversations):
    from research.raters.human_baseline import rater_agreement

    agreement = rater_agreement()
    assert agreement.conversations == 0
    assert agreement.binary.alpha is None and agreement.emotion.alpha is None and agreement.pairwise.alpha is None


def test_a_rating_in_progress_holds_a_lease_no_sweeper_takes(assignment, rater):
    """A person rates at their own pace: the replay's sweeper never requeues their conversation and the
    run page never calls it stalled; storing the rating releases the lease."""
    from scoring.models import HUMAN_LEASE_OWNER, RunConversation
    from scoring.replay_service import stalled_conversations
    from scoring.run_control import sweep

    held = RunConversation.objects.get(pk=assignment.run_conversation_id)
    assert held.status == RunConversation.Status.RUNNING and held.lease_owner == HUMAN_LEASE_OWNER
    sweep()
    held.refresh_from_db()
    assert held.status == RunConversation.Status.RUNNING and held.requeued == 0
    assert not stalled_conversations().filter(pk=held.pk).exists()
