"""Erasure of a participant on a researcher's request: every row, in dependency order, and an audit record.

Collected data is PROTECTed against cascading deletes on purpose (nothing
disappears because a topic or a model was removed), so erasure deletes
explicitly, leaves first. It withdraws the participant first, which re-scores
the runs that held their conversations and withdraws the export files that
held them (on commit), then deletes: rater assignments, run outputs, their
call transcripts and scores, dataset-version memberships, annotations, turns, surveys,
conversations, consent, profiles and the participant. The ErasureRecord keeps
counts only (research/models.py).

Not reachable from here: model answers in the shared call cache
(ModelCallCache holds responses under a hash of the request, with no link to
a conversation) and run files ``attune eval`` wrote outside the database.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
from collection.models import (
    Consent,
    Conversation,
    ConversationWideAnswers,
    FourBranchRating,
    PanasItemResponse,
    PanasSurvey,
    Participant,
    ParticipantProfile,
    SensitiveProfile,
    Turn,
)
from collection.study_flow import do_withdraw
from datasets.models import DatasetVersion, ExportJob
from datasets.pseudonyms import find_participant
from research.models import ErasureRecord, HumanAssignment
from scoring.models import CallTranscript, ConversationScore, RunConversation
from scoring.withdrawal import runs_holding


class ErasureError(ValueError):
    """The participant to erase cannot be identified; the message says why."""


def access_participant_to_erase(identifier: str) -> Participant:
    """The participant a researcher names: by stored pseudonym, by the pseudonym exports show, or by the
    id an imported file carried (stored only as its keyed hash)."""
    identifier = identifier.strip()
    if not identifier:
        raise ErasureError("Name the participant: a pseudonym as exports or the admin show it.")
    found = find_participant(Participant.objects.all(), identifier)
    if found is None:
        raise ErasureError(f"No participant is known as {identifier!r}.")
    return found


def do_erase_participant(participant: Participant, erased_by: Any = None, via: str = "command") -> ErasureRecord:
    """Delete everything stored about ``participant``; returns the audit record (no personal data in it)."""
    with transaction.atomic():
        participant = Participant.objects.select_for_update().get(pk=participant.pk)
        conversation_pks = list(Conversation.objects.filter(participant=participant).values_list("pk", flat=True))
        runs = runs_holding(conversation_pks)
        started = set(ExportJob.objects.values_list("pk", flat=True).filter(status=ExportJob.Status.WITHDRAWN))
        do_withdraw(participant)  # re-scoring and export withdrawal are queued for the commit
        exports = sorted(
            set(ExportJob.objects.values_list("pk", flat=True).filter(status=ExportJob.Status.WITHDRAWN)) - started
        )
        turns = Turn.objects.filter(conversation_id__in=conversation_pks)
        surveys = PanasSurvey.objects.filter(conversation_id__in=conversation_pks)
        steps: list[tuple[str, QuerySet[Any]]] = [
            ("research.HumanAssignment", HumanAssignment.objects.filter(conversation_id__in=conversation_pks)),
            ("scoring.ConversationScore", ConversationScore.objects.filter(conversation_id__in=conversation_pks)),
            # Call transcripts hold the conversation's text in their prompts: counted on their own.
            (
                "scoring.CallTranscript",
                CallTranscript.objects.filter(run_conversation__conversation_id__in=conversation_pks),
            ),
            ("scoring.RunConversation", RunConversation.objects.filter(conversation_id__in=conversation_pks)),
            (
                "datasets.DatasetVersion_conversations",
                DatasetVersion.conversations.through.objects.filter(conversation_id__in=conversation_pks),
            ),
            ("annotation.MoodTag", MoodTag.objects.filter(turn__in=turns)),
            ("annotation.BinaryJudgement", BinaryJudgement.objects.filter(turn__in=turns)),
            ("annotation.PairwiseComparison", PairwiseComparison.objects.filter(turn__in=turns)),
            ("annotation.AlternateResponses", AlternateResponses.objects.filter(turn__in=turns)),
            ("collection.Turn", turns),
            ("collection.PanasItemResponse", PanasItemResponse.objects.filter(survey__in=surveys)),
            ("collection.PanasSurvey", surveys),
            ("collection.FourBranchRating", FourBranchRating.objects.filter(conversation_id__in=conversation_pks)),
            (
                "collection.ConversationWideAnswers",
                ConversationWideAnswers.objects.filter(conversation_id__in=conversation_pks),
            ),
            ("collection.Conversation", Conversation.objects.filter(pk__in=conversation_pks)),
            ("collection.Consent", Consent.objects.filter(participant=participant)),
            ("collection.ParticipantProfile", ParticipantProfile.objects.filter(participant=participant)),
            ("collection.SensitiveProfile", SensitiveProfile.objects.filter(participant=participant)),
            ("collection.Participant", Participant.objects.filter(pk=participant.pk)),
        ]
        rows = {}
        for label, queryset in steps:
            count, _ = queryset.delete()
            rows[label] = count
        return ErasureRecord.objects.create(
            erased_by=erased_by if getattr(erased_by, "is_authenticated", False) else None,
            via=via,
            rows_deleted=rows,
            runs_rescored=runs,
            exports_withdrawn=exports,
        )
