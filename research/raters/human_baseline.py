"""Human baseline (SPEC 6): a person takes the evaluated model's seat, turn by turn.

A rater sees exactly what an EM sees (SPEC 4): for turn t, the earlier turns'
messages and replies, then the participant's message alone (to draft a reply),
then the original reply with the candidate replies masked, and the behaviour
questions the participant answered. Never the participant's annotations and
never a later turn. Answers are written into a RunConversation of the run of
EvaluatedModel ``human:<username>`` in the SPEC 3.2 shape, so the scorer and
every analysis treat the person like any model.

A person answers the behaviour questions once; their answers stand for both
the third-person and the participant-perspective wording (the two wordings
exist to probe models' sensitivity to phrasing, not people's).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, QuerySet
from django.http import Http404
from django.utils import timezone

from attunebench import canonical as cf
from attunebench import catalogue as cat
from attunebench.metrics import agreement
from attunebench.metrics.agreement import RaterAgreement
from attunebench.metrics.keys import HUMAN_PREFIX
from attunebench.replay.protocol import masked_labels
from collection.models import Conversation, PanasSurvey, Turn
from research.access.roles import is_researcher
from research.models import HumanAssignment
from scoring.models import HUMAN_LEASE_EXPIRES, HUMAN_LEASE_OWNER, EvaluatedModel, EvaluationRun, RunConversation
from scoring.run_scoring import do_score_evaluation_run

HUMAN_MODE = "default"
HUMAN_PANAS_STRATEGY = "absolute"  # the rater sees pre-PANAS totals and predicts the 20 post items


class HumanBaselineError(ValueError):
    """A request the rater or researcher must correct; the message is shown to them."""


WITHDRAWN_MESSAGE = "The participant withdrew from the study: this conversation can no longer be rated."


def is_withdrawn(conversation: Conversation) -> bool:
    """Whether the participant withdrew (``do_withdraw`` sets the status in the same transaction)."""
    return conversation.status == Conversation.Status.WITHDRAWN


def open_assignments() -> QuerySet[HumanAssignment]:
    """Assignments that can still be rated: one whose participant withdrew is closed and listed nowhere."""
    return HumanAssignment.objects.exclude(conversation__status=Conversation.Status.WITHDRAWN)


def human_model_name(user: User) -> str:
    return f"{HUMAN_PREFIX}{user.get_username()}"


def human_model(user: User) -> EvaluatedModel:
    model, _ = EvaluatedModel.objects.get_or_create(
        name=human_model_name(user),
        defaults={"kind": EvaluatedModel.Kind.HUMAN, "notes": "Human baseline rater (SPEC 6)."},
    )
    return model


def human_run(user: User) -> EvaluationRun:
    """The one run that collects a rater's conversations (newest if several exist)."""
    model = human_model(user)
    run = EvaluationRun.objects.filter(evaluated_model=model, mode=HUMAN_MODE).order_by("-created_at").first()
    if run is None:
        run = EvaluationRun.objects.create(
            evaluated_model=model,
            mode=HUMAN_MODE,
            panas_strategy=HUMAN_PANAS_STRATEGY,
            status=EvaluationRun.Status.RUNNING,
            started_at=timezone.now(),
            selection={"human_baseline": True},
            prompt_version="human",
        )
    return run


def do_assign(conversation: Conversation, rater: User, assigned_by: User | None) -> HumanAssignment:
    """Assign a complete conversation to a rater; assigning twice returns the existing assignment."""
    if is_withdrawn(conversation):
        raise HumanBaselineError(WITHDRAWN_MESSAGE)
    if conversation.status != Conversation.Status.COMPLETE:
        raise HumanBaselineError("Only complete conversations can be rated.")
    if not conversation.turns.exists():
        raise HumanBaselineError("This conversation has no turns.")
    with transaction.atomic():
        existing = HumanAssignment.objects.filter(rater=rater, conversation=conversation).first()
        if existing:
            return existing
        run = human_run(rater)
        run_conversation = RunConversation.objects.create(
            run=run,
            conversation=conversation,
            status=RunConversation.Status.RUNNING,
            lease_owner=HUMAN_LEASE_OWNER,  # a person's pace: never swept, never "stalled"
            lease_expires_at=HUMAN_LEASE_EXPIRES,
            output=_empty_output(conversation, rater),
        )
        EvaluationRun.objects.filter(pk=run.pk).update(
            conversations_total=F("conversations_total") + 1, status=EvaluationRun.Status.RUNNING, finished_at=None
        )
        return HumanAssignment.objects.create(
            rater=rater,
            conversation=conversation,
            run_conversation=run_conversation,
            assigned_by=assigned_by,
        )


def _empty_output(conversation: Conversation, rater: User) -> dict[str, Any]:
    return {
        "conversationId": conversation.conversation_id,
        "em_model": human_model_name(rater),
        "mode": HUMAN_MODE,
        "run_timestamp": cf.format_timestamp(timezone.now()),
        "turns": [],
        "post_conversation": None,
        "api_cost": 0.0,
        "duration_seconds": None,
        "prompt_version": "human",
    }


def access_assignment(user: User, assignment_id: int) -> HumanAssignment:
    """The assignment if it is the user's own (researchers may look at any, read-only in the view)."""
    try:
        assignment = HumanAssignment.objects.select_related("conversation", "run_conversation", "rater").get(
            pk=assignment_id
        )
    except HumanAssignment.DoesNotExist:
        raise Http404("No such assignment.") from None
    if assignment.rater_id != user.pk and not is_researcher(user):
        raise PermissionDenied("This conversation is assigned to someone else.")
    return assignment


# ---------------------------------------------------------------------------
# What the rater sees
# ---------------------------------------------------------------------------


@dataclass
class RaterStep:
    """One screen of the rater's replay."""

    stage: str  # "draft", "analysis", "post" or "done"
    turn_number: int | None
    total_turns: int
    history: list[Turn]
    current: Turn | None
    replies: list[tuple[str, str]]  # (masked label, text) in display order
    comparisons: list[dict[str, Any]]
    questions: list[cat.BinaryQuestion]
    draft: str | None
    pre_panas: PanasSurvey | None


def _output_turn(output: dict[str, Any], turn_number: int) -> dict[str, Any] | None:
    for turn in output.get("turns", []):
        if turn.get("turnNumber") == turn_number:
            return turn
    return None


def current_step(assignment: HumanAssignment) -> RaterStep:
    """The screen the rater is on, derived from what is stored (so reloads and new devices agree).

    After the participant withdrew, the rater sees nothing of the conversation any more.
    """
    if is_withdrawn(assignment.conversation):
        return RaterStep("withdrawn", None, 0, [], None, [], [], [], None, None)
    turns = list(assignment.conversation.turns.order_by("turn_number"))
    output = assignment.run_conversation.output if assignment.run_conversation else {}
    pre = assignment.conversation.panas_surveys.filter(kind=PanasSurvey.Kind.PRE).first()
    if assignment.is_complete:
        return RaterStep("done", None, len(turns), turns, None, [], [], [], None, pre)
    if assignment.turns_done >= len(turns):
        return RaterStep("post", None, len(turns), turns, None, [], [], [], None, pre)
    current = turns[assignment.turns_done]
    history = turns[: assignment.turns_done]
    stored = _output_turn(output or {}, current.turn_number)
    if stored is None:
        return RaterStep("draft", current.turn_number, len(turns), history, current, [], [], [], None, pre)
    # The replay's own masking, so a person in the model's seat sees exactly what a model sees (SPEC 4).
    labels = masked_labels(assignment.conversation.conversation_id, current.turn_number)
    alternates = getattr(current, "alternates", None)
    texts = {
        cat.RESPONSE_ORIGINAL: current.llm_response,
        cat.RESPONSE_ALTERNATE: alternates.llm_improved if alternates else "",
        cat.RESPONSE_HUMAN: alternates.human_edited if alternates else "",
    }
    replies = sorted(((labels[k], v) for k, v in texts.items() if v), key=lambda p: p[0])
    comparisons = [
        {
            "index": i,
            "question": cat.PAIRWISE_QUESTIONS.get(
                c.question_id, c.question_id.removeprefix(cat.CUSTOM_PAIRWISE_PREFIX)
            ),
            "a": labels[c.response_a],
            "b": labels[c.response_b],
        }
        for i, c in enumerate(current.pairwise_comparisons.order_by("position"))
    ]
    asked = [j.question_id for j in current.binary_judgements.order_by("position")]
    questions = [cat.BINARY_QUESTIONS_BY_ID[q] for q in asked if q in cat.BINARY_QUESTIONS_BY_ID]
    return RaterStep(
        "analysis",
        current.turn_number,
        len(turns),
        history,
        current,
        replies,
        comparisons,
        questions,
        stored.get("em_drafted_response"),
        pre,
    )


# ---------------------------------------------------------------------------
# Recording answers
# ---------------------------------------------------------------------------


def _lock(assignment: HumanAssignment) -> tuple[HumanAssignment, RunConversation]:
    locked = HumanAssignment.objects.select_for_update().get(pk=assignment.pk)
    if is_withdrawn(locked.conversation):
        raise HumanBaselineError(WITHDRAWN_MESSAGE)
    if locked.is_complete:
        raise HumanBaselineError("This conversation is already finished.")
    if locked.run_conversation_id is None:
        raise HumanBaselineError("This assignment lost its stored answers; ask a researcher to assign it again.")
    run_conversation = RunConversation.objects.select_for_update().get(pk=locked.run_conversation_id)
    return locked, run_conversation


def _stored_output(rc: RunConversation) -> dict[str, Any]:
    """A copy of the rater's answers so far (made with the assignment, so never missing)."""
    if rc.output is None:
        raise HumanBaselineError("This assignment lost its stored answers; ask a researcher to assign it again.")
    return dict(rc.output)


def do_record_draft(assignment: HumanAssignment, turn_number: int, draft: str) -> None:
    """Stage 1 of a turn: the reply the rater would give, written before seeing the original reply."""
    with transaction.atomic():
        locked, rc = _lock(assignment)
        expected = _expected_turn(locked)
        if turn_number != expected:
            raise HumanBaselineError(f"You are on turn {expected}; this answer was for turn {turn_number}.")
        output = _stored_output(rc)
        if _output_turn(output, turn_number) is not None:
            raise HumanBaselineError("The draft for this turn is already saved.")
        output["turns"] = [*output["turns"], {"turnNumber": turn_number, "em_drafted_response": draft.strip() or None}]
        rc.output = output
        rc.save(update_fields=["output", "updated_at"])


def do_record_analysis(
    assignment: HumanAssignment,
    turn_number: int,
    emotion_tags: list[dict[str, Any]],
    om_answers: dict[str, str],
    participant_answers: dict[str, str],
    pairwise: dict[str, str],
) -> None:
    """Stage 2 of a turn: emotion tags, behaviour answers and pairwise picks; then the next turn opens."""
    with transaction.atomic():
        locked, rc = _lock(assignment)
        if turn_number != _expected_turn(locked):
            raise HumanBaselineError(
                f"You are on turn {_expected_turn(locked)}; this answer was for turn {turn_number}."
            )
        output = _stored_output(rc)
        turns = [dict(t) for t in output["turns"]]
        stored = next((t for t in turns if t["turnNumber"] == turn_number), None)
        if stored is None:
            raise HumanBaselineError("Write your own reply for this turn first.")
        stored.update(
            {
                "em_emotion_tags": emotion_tags,
                "em_binary_om_assessment": om_answers,
                "em_binary_human_prediction": participant_answers,
                "em_binary_om_assessment_hp": dict(om_answers),
                "em_binary_human_prediction_hp": dict(participant_answers),
                "em_pairwise_selections": pairwise,
            }
        )
        cf.RunTurn.model_validate(stored)  # refuse anything the canonical reader would reject
        output["turns"] = turns
        rc.output = output
        rc.save(update_fields=["output", "updated_at"])
        locked.turns_done = F("turns_done") + 1
        locked.save(update_fields=["turns_done"])


def do_record_post(
    assignment: HumanAssignment,
    panas_items: dict[str, int],
    looking_for: list[str],
    emotion_clarity: str | None,
    model_fit: str | None,
    what_felt_off: list[str],
    four_branch: dict[str, int],
) -> None:
    """Post-conversation predictions; completes the assignment and scores it like a model's run."""
    with transaction.atomic():
        locked, rc = _lock(assignment)
        total = locked.conversation.turns.count()
        if locked.turns_done < total:
            raise HumanBaselineError("Finish every turn before the post-conversation questions.")
        output = _stored_output(rc)
        output["post_conversation"] = {
            "panas_strategy": HUMAN_PANAS_STRATEGY,
            "predicted_post_panas": {"totalPositiveAffect": None, "totalNegativeAffect": None, "items": panas_items},
            "predicted_conversation_wide": {
                "q1_lookingFor": looking_for,
                "q2_emotionClarity": emotion_clarity,
                "q3_modelFit": model_fit,
                "q3_followUp_whatFeltOff": what_felt_off,
                "fourBranchScores": four_branch,
            },
        }
        output["duration_seconds"] = (timezone.now() - locked.assigned_at).total_seconds()
        output["run_timestamp"] = cf.format_timestamp(timezone.now())
        output = cf.to_canonical_dict(cf.parse_run(output, source=f"human assignment {locked.pk}"))
        rc.output = output
        rc.status = RunConversation.Status.DONE
        rc.lease_owner, rc.lease_expires_at = "", None
        rc.save(update_fields=["output", "status", "lease_owner", "lease_expires_at", "updated_at"])
        locked.completed_at = timezone.now()
        locked.save(update_fields=["completed_at"])
        run_id = rc.run_id
        EvaluationRun.objects.filter(pk=run_id).update(conversations_done=F("conversations_done") + 1)
        transaction.on_commit(lambda: _after_completion(run_id))


def _after_completion(run_id: int) -> None:
    do_score_evaluation_run(run_id)
    run = EvaluationRun.objects.get(pk=run_id)
    if run.conversations_done >= run.conversations_total:
        EvaluationRun.objects.filter(pk=run_id).update(status=EvaluationRun.Status.DONE, finished_at=timezone.now())


def _expected_turn(assignment: HumanAssignment) -> int:
    numbers = list(assignment.conversation.turns.order_by("turn_number").values_list("turn_number", flat=True))
    if assignment.turns_done >= len(numbers):
        raise HumanBaselineError("Every turn is done; answer the post-conversation questions.")
    return numbers[assignment.turns_done]


# ---------------------------------------------------------------------------
# Agreement between raters
# ---------------------------------------------------------------------------


def rater_agreement() -> RaterAgreement:
    """Krippendorff's alpha between human raters on every conversation two or more of them finished.

    The units, the alpha and its bootstrap interval are the core's
    (``attunebench.metrics.agreement``); this only gathers the finished answers.
    """
    done = RunConversation.objects.filter(
        run__evaluated_model__kind=EvaluatedModel.Kind.HUMAN, status=RunConversation.Status.DONE
    ).values_list("conversation__conversation_id", "run__evaluated_model__name", "output")
    outputs: dict[str, dict[str, dict[str, Any]]] = {}
    for conversation_id, rater, output in done:
        if output is not None:
            outputs.setdefault(conversation_id, {})[rater] = output
    # The bootstrap is the dear part, so the result is cached under a digest of exactly the answers it
    # was computed from: any new or changed answer gives a new key, and no stale value can be served.
    digest = hashlib.sha256(json.dumps(outputs, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    key = f"research:agreement:v2:{digest}"  # the version changes whenever the cached type does
    cached = cache.get(key)
    if isinstance(cached, RaterAgreement):
        return cached
    result = agreement.rater_agreement(outputs)
    cache.set(key, result, timeout=3600)
    return result
