"""Moving conversations between the database and the canonical formats (SPEC 3.1).

Import validates every input first and writes in one transaction, so a bad file
means nothing is written. Export writes the one byte-stable canonical text, so
export → import → export reproduces the same bytes.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Count, Prefetch, Q, QuerySet

from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PairwiseComparison
from attunebench import canonical as cf
from attunebench import catalogue as cat
from attunebench.sources import iter_conversations
from attunebench.synth import document_filename
from collection.models import (
    Consent,
    Conversation,
    ConversationWideAnswers,
    FourBranchRating,
    OriginalModel,
    PanasSurvey,
    Participant,
    ParticipantProfile,
    SensitiveProfile,
    Topic,
    Turn,
    not_test_data,
)
from collection.study_flow import write_panas
from datasets.pseudonyms import export_pseudonym

EXPORT_FORMATS = ("json", "jsonl", "parquet")
#: An export job may also write a published dataset folder (attune publish dataset's layout), zipped.
PUBLISHED_FORMAT = "published"
JOB_FORMATS = (*EXPORT_FORMATS, PUBLISHED_FORMAT)
_REDACTED_ALIAS = re.compile(r"^om-[0-9a-f]{8}$")
_DECLARED_METADATA = {"model", "provider", "timestamp", "category", "subtopic", "completeness"}
_DECLARED_PROFILE = {"participant_id", "age", "traits", "goals", "responses", "diagnoses", "sensitiveDataConsent"}
#: Profile key of a canonical file saying the participant consented to sensitive data (diagnoses).
SENSITIVE_CONSENT_KEY = cf.SENSITIVE_CONSENT_KEY
#: The consent version recorded for an imported participant whose file says they consented.
IMPORTED_CONSENT_VERSION = "imported"


@dataclass
class ImportResult:
    imported: list[str] = field(default_factory=list)
    problems: list[cf.Problem] = field(default_factory=list)
    # Participants (by imported id) whose diagnoses were stored under recorded consent, and those whose
    # diagnoses were left out because no consent was recorded (SPEC 2.5).
    diagnoses_stored: set[str] = field(default_factory=set)
    diagnoses_not_stored: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------


#: How many conversation ids one "already in the database?" query asks about.
EXISTING_CHUNK = 1000

Documents = Iterable[tuple[str, cf.ConversationFile] | cf.Problem]


def import_paths(paths: Iterable[str | Path], attested_consent_version: str | None = None) -> ImportResult:
    """Validate every file first; write all of them in one transaction only if none has a problem.

    The files are read twice, validated one at a time and then written one at a time, so an import's
    memory does not grow with the files it imports.
    """
    return import_stream(lambda: iter_conversations(paths), attested_consent_version)


def import_documents(
    documents: list[tuple[str, cf.ConversationFile]],
    problems: list[cf.Problem] | None = None,
    attested_consent_version: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Validate, then write every document in one transaction; ``progress(done, total)`` as it writes.

    A diagnosis is stored only under recorded consent (SPEC 2.5): the file's own
    ``sensitiveDataConsent: true`` (recorded as consent version "imported"), or,
    for a participant whose file says nothing about it, the importer's
    attestation (``attested_consent_version``, the version recorded for them).
    Other diagnoses are not stored, and the result counts them.
    """
    given = list(problems or [])
    return import_stream(lambda: [*given, *documents], attested_consent_version, progress)


def import_stream(
    read: Callable[[], Documents],
    attested_consent_version: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """:func:`import_documents` over documents read twice: once to validate, once to write.

    ``read()`` gives the documents (or the problems found reading them) afresh each time it is
    called, in the same order. The first pass keeps only each conversation's id and source, so every
    bad input is reported before anything is written while memory stays flat whatever the number of
    conversations; the second writes them all in one transaction, so a failure leaves nothing behind.
    """
    problems: list[cf.Problem] = []
    seen: dict[str, str] = {}
    for item in read():
        if isinstance(item, cf.Problem):
            problems.append(item)
            continue
        source, doc = item
        # SPEC 2.4: only listed survey answers enter the database.
        problems.extend(cf.check_conversation_options(doc, source))
        if doc.conversationId in seen:
            problems.append(
                cf.Problem(
                    source=source,
                    path="conversationId",
                    message=f"{doc.conversationId!r} is also in {seen[doc.conversationId]}",
                )
            )
        seen.setdefault(doc.conversationId, source)
    ids = list(seen)
    for start in range(0, len(ids), EXISTING_CHUNK):
        chunk = ids[start : start + EXISTING_CHUNK]
        for cid in Conversation.objects.filter(conversation_id__in=chunk).values_list("conversation_id", flat=True):
            problems.append(
                cf.Problem(source=seen[cid], path="conversationId", message=f"{cid!r} is already in the database")
            )
    if problems:
        return ImportResult(problems=problems)
    result = ImportResult(imported=ids)
    total = len(ids)
    with transaction.atomic():
        done = 0
        for item in read():
            if isinstance(item, cf.Problem):  # the files changed between the passes
                raise ValueError(f"{item} (the input changed while it was imported; nothing was written)")
            write_conversation(item[1], attested_consent_version, result)
            done += 1
            if progress:
                progress(done, total)
        if done != total:
            raise ValueError(
                f"the input changed while it was imported ({done} conversations read for writing, "
                f"{total} validated); nothing was written"
            )
    result.diagnoses_not_stored -= result.diagnoses_stored  # a participant stored once is stored
    return result


def _original_model(model: str, provider: str) -> OriginalModel:
    found = OriginalModel.objects.filter(Q(alias=model) | Q(name=model)).first()
    if found:
        return found
    if _REDACTED_ALIAS.match(model):
        return OriginalModel.objects.create(name="", alias=model, provider="", active=False)
    return OriginalModel.objects.create(name=model, provider=provider, active=False)


def _topic(category: str, subtopic: str) -> Topic:
    topic, _ = Topic.objects.get_or_create(
        category=category,
        subtopic=subtopic,
        defaults={"in_catalogue": (category, subtopic) in set(cat.ALL_TOPICS), "order": 10_000},
    )
    return topic


def _participant(
    profile: cf.ParticipantProfile | None, attested_consent_version: str | None, result: ImportResult | None
) -> Participant | None:
    if profile is None:
        return None
    # Only the keyed hash is stored: an imported id (an e-mail address, a platform id) never enters the database.
    participant, _ = Participant.objects.get_or_create(pseudonym=export_pseudonym(profile.participant_id))
    consent = profile.sensitive_consent
    version = IMPORTED_CONSENT_VERSION if consent is True else attested_consent_version if consent is None else None
    if version is not None:
        Consent.objects.get_or_create(
            participant=participant, version=version, defaults={"sensitive_data_consent": True}
        )
    extra = {k: v for k, v in (profile.model_extra or {}).items() if k not in _DECLARED_PROFILE}
    ParticipantProfile.objects.update_or_create(
        participant=participant,
        defaults={
            "age_band": profile.age or "",
            "traits": profile.traits,
            "goals": profile.goals,
            "responses": profile.responses,
            "extra": extra,
        },
    )
    if profile.diagnoses is not None:
        # A file that says the participant did not consent is obeyed even where consent was recorded before.
        if consent is not False and has_sensitive_consent(participant):
            SensitiveProfile.objects.update_or_create(
                participant=participant, defaults={"diagnoses": profile.diagnoses}
            )
            if result is not None:
                result.diagnoses_stored.add(profile.participant_id)
        elif result is not None:
            result.diagnoses_not_stored.add(profile.participant_id)
    return participant


def _imported_completeness(declared: str, turn_states: list[str]) -> str:
    """The state of an imported conversation: what its file declares (absent = complete), never more.

    No turn with a reply makes it empty, and a complete one needs every turn complete.
    """
    if all(state == cat.TURN_NO_REPLY for state in turn_states):
        return cat.CONVERSATION_EMPTY
    if declared == cat.CONVERSATION_EMPTY or any(state != cat.TURN_COMPLETE for state in turn_states):
        return cat.CONVERSATION_UNFINISHED
    return declared


def write_conversation(
    doc: cf.ConversationFile, attested_consent_version: str | None = None, result: ImportResult | None = None
) -> Conversation:
    """Write one validated conversation (caller holds the transaction); diagnoses as :func:`import_documents` says."""
    meta = doc.metadata
    extra = {k: v for k, v in (meta.model_extra or {}).items() if k not in _DECLARED_METADATA}
    extra["turnCount"] = meta.turnCount
    turn_states = {t.turnNumber: t.completeness if t.llmResponse else cat.TURN_NO_REPLY for t in doc.turns}
    conversation = Conversation.objects.create(
        completeness=_imported_completeness(meta.completeness, list(turn_states.values())),
        conversation_id=doc.conversationId,
        participant=_participant(doc.participant_profile, attested_consent_version, result),
        original_model=_original_model(meta.model, meta.provider),
        topic=_topic(meta.category, meta.subtopic),
        status=Conversation.Status.COMPLETE,
        source=Conversation.Source.IMPORTED,
        provider=meta.provider,
        started_at=cf.parse_timestamp(meta.timestamp),
        metadata_extra=extra,
    )
    for kind, panas in ((PanasSurvey.Kind.PRE, doc.prePanas), (PanasSurvey.Kind.POST, doc.postPanas)):
        if panas is not None:
            write_panas(conversation, kind, panas)
    wide = doc.conversationWideQuestions
    if wide is not None:
        ConversationWideAnswers.objects.create(
            conversation=conversation,
            looking_for=wide.q1_lookingFor,
            emotion_clarity=wide.q2_emotionClarity or "",
            model_fit=wide.q3_modelFit or "",
            what_felt_off=wide.q3_followUp_whatFeltOff,
        )
        FourBranchRating.objects.bulk_create(
            [FourBranchRating(conversation=conversation, branch=b, rating=r) for b, r in wide.fourBranchScores.items()]
        )
    tags, judgements, comparisons, alternates = [], [], [], []
    # One INSERT for the turns (their ids come back), then one per kind of annotation: the queries of an
    # import grow with its conversations, not with their turns.
    turns = Turn.objects.bulk_create(
        [
            Turn(
                conversation=conversation,
                turn_number=t.turnNumber,
                user_message=t.userMessage,
                llm_response=t.llmResponse,
                selected_pairwise_questions=t.annotations.selectedPairwiseQuestions or [],
                completeness=turn_states[t.turnNumber],
                mood_answered=t.moodShiftTags is not None,
            )
            for t in doc.turns
        ]
    )
    for t, turn in zip(doc.turns, turns, strict=True):
        tags += [
            MoodTag(turn=turn, position=i, emotion=g.emotion, intensity=g.intensity)
            for i, g in enumerate(t.moodShiftTags or [])
        ]
        judgements += [
            BinaryJudgement(
                turn=turn,
                position=i,
                question_id=j.questionId,
                observed=j.observedBehavior,
                preferred=j.preferredBehavior,
                llm_value=j.llmValue,
            )
            for i, j in enumerate(t.annotations.binaryJudgements or [])
        ]
        comparisons += [
            PairwiseComparison(
                turn=turn,
                position=i,
                question_id=p.questionId,
                response_a=p.responseA,
                response_b=p.responseB,
                winner=p.winner,
            )
            for i, p in enumerate(t.annotations.pairwiseComparisons or [])
        ]
        if t.annotations.alternateResponses is not None:
            alternates.append(
                AlternateResponses(
                    turn=turn,
                    llm_improved=t.annotations.alternateResponses.llmImproved,
                    human_edited=t.annotations.alternateResponses.humanEdited,
                )
            )
    MoodTag.objects.bulk_create(tags)
    BinaryJudgement.objects.bulk_create(judgements)
    PairwiseComparison.objects.bulk_create(comparisons)
    AlternateResponses.objects.bulk_create(alternates)
    return conversation


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------


def exportable_conversations() -> QuerySet[Conversation]:
    """Conversations that may leave the database: never withdrawn ones (complete or not), never previews."""
    return (
        Conversation.objects.real()
        .exclude(status=Conversation.Status.WITHDRAWN)
        .exclude(participant__withdrawn_at__isnull=False)
    )


def usable_conversations() -> QuerySet[Conversation]:
    """Conversations new dataset versions, exports and scores may use: exportable ones whose participant a
    researcher has not excluded for quality (``annotation.quality.decide``; reversible, so applied when read)."""
    return exportable_conversations().exclude(participant__quality_excluded_at__isnull=False)


def quality_excluded_conversations() -> QuerySet[Conversation]:
    """Non-withdrawn conversations left out because of a researcher's current exclusion decision."""
    return exportable_conversations().filter(participant__quality_excluded_at__isnull=False)


def export_selection(include_unfinished: bool = False) -> QuerySet[Conversation]:
    """What an export holds: complete, non-withdrawn, not quality-excluded conversations; unfinished and empty
    ones only on request.

    Records of unfinished ones say so (``metadata.completeness`` and each unfinished
    turn's ``completeness``), and their unanswered steps are null (SPEC 3.1).
    """
    queryset = usable_conversations()
    return queryset if include_unfinished else queryset.filter(completeness=cat.CONVERSATION_COMPLETE)


def left_out_counts(included: QuerySet[Conversation]) -> dict[str, int]:
    """Why the database's other conversations are not in ``included``: withdrawn, excluded for quality by a
    researcher, empty, unfinished or (complete but) outside the selection. Three grouped queries."""
    withdrawn = Q(status=Conversation.Status.WITHDRAWN) | Q(participant__withdrawn_at__isnull=False)
    excluded = Q(participant__quality_excluded_at__isnull=False)
    rest = Conversation.objects.real().exclude(pk__in=included.values("pk"))  # previews are not data at all
    counts = {"withdrawn": rest.filter(withdrawn).count()}
    counts["quality_excluded"] = rest.exclude(withdrawn).filter(excluded).count()
    by_state = dict(
        rest.exclude(withdrawn)
        .exclude(excluded)
        .values_list("completeness")
        .annotate(n=Count("id"))
        .values_list("completeness", "n")
    )
    counts[cat.CONVERSATION_EMPTY] = by_state.get(cat.CONVERSATION_EMPTY, 0)
    counts[cat.CONVERSATION_UNFINISHED] = by_state.get(cat.CONVERSATION_UNFINISHED, 0)
    counts["not_selected"] = by_state.get(cat.CONVERSATION_COMPLETE, 0)
    return counts


def quality_exclusions_by_reason(included: QuerySet[Conversation]) -> dict[str, int]:
    """Conversations outside ``included`` left out by a researcher's exclusion, counted by the decision's reason."""
    rows = (
        quality_excluded_conversations()
        .exclude(pk__in=included.values("pk"))
        .values_list("participant__quality_exclusion_reason")
        .annotate(n=Count("id"))
        .values_list("participant__quality_exclusion_reason", "n")
    )
    return dict(sorted(rows))


def withdrawn_conversations() -> QuerySet[Conversation]:
    """Conversations that must not be shown, rated, scored or exported: the complement of the above
    (researchers' previews included)."""
    return Conversation.objects.filter(
        Q(status=Conversation.Status.WITHDRAWN) | Q(participant__withdrawn_at__isnull=False) | ~not_test_data()
    )


def with_export_relations(queryset: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Everything export needs, in a fixed number of queries however many conversations."""
    return (
        queryset.select_related(
            "original_model", "topic", "participant__profile", "participant__sensitive_profile", "wide_answers"
        )
        .prefetch_related(
            Prefetch(
                "turns",
                queryset=Turn.objects.order_by("turn_number")
                .select_related("alternates")
                .prefetch_related("mood_tags", "binary_judgements", "pairwise_comparisons"),
            ),
            Prefetch("panas_surveys", queryset=PanasSurvey.objects.prefetch_related("item_responses")),
            "four_branch_ratings",
            # has_sensitive_consent reads this list, so the consent check is one query, not one per conversation.
            Prefetch(
                "participant__consents",
                queryset=Consent.objects.filter(sensitive_data_consent=True),
                to_attr="sensitive_consents",
            ),
        )
        .order_by("conversation_id")
    )


def _panas(survey: PanasSurvey | None) -> dict[str, Any] | None:
    if survey is None:
        return None
    ratings = {r.item: r.rating for r in survey.item_responses.all()}
    return {
        "totalPositiveAffect": survey.total_positive,
        "totalNegativeAffect": survey.total_negative,
        "items": {item: ratings[item] for item in cat.PANAS_ITEMS if item in ratings},
    }


def has_sensitive_consent(participant: Participant) -> bool:
    """Whether consent to sensitive data is recorded (uses the ``sensitive_consents`` prefetch when present)."""
    prefetched = getattr(participant, "sensitive_consents", None)
    if prefetched is not None:
        return bool(prefetched)
    return participant.consents.filter(sensitive_data_consent=True).exists()


def consented_diagnoses(participant_pks: Iterable[int]) -> dict[int, list[str]]:
    """participant pk -> diagnoses, for participants whose consent to sensitive data is recorded (SPEC 2.5)."""
    consented = Consent.objects.filter(participant_id__in=list(participant_pks), sensitive_data_consent=True)
    return dict(
        SensitiveProfile.objects.filter(participant_id__in=consented.values("participant_id")).values_list(
            "participant_id", "diagnoses"
        )
    )


def _profile(participant: Participant | None) -> dict[str, Any] | None:
    """The exported profile: a keyed-hash pseudonym, and diagnoses only under recorded consent."""
    if participant is None:
        return None
    profile = getattr(participant, "profile", None)
    sensitive = getattr(participant, "sensitive_profile", None) if has_sensitive_consent(participant) else None
    exported: dict[str, Any] = {
        **(profile.extra if profile else {}),
        "participant_id": export_pseudonym(participant.pseudonym),
        "age": profile.age_band or None if profile else None,
        "traits": list(profile.traits) if profile else [],
        "goals": list(profile.goals) if profile else [],
        "responses": dict(profile.responses) if profile else {},
        "diagnoses": list(sensitive.diagnoses) if sensitive else None,
    }
    if sensitive is not None:
        exported[SENSITIVE_CONSENT_KEY] = True
    else:
        exported.pop(SENSITIVE_CONSENT_KEY, None)
    return exported


def conversation_to_dict(conversation: Conversation, include_model_identity: bool = False) -> dict[str, Any]:
    """The canonical object of a conversation (use with_export_relations for many)."""
    om = conversation.original_model
    turns = list(conversation.turns.all())
    metadata = dict(conversation.metadata_extra)
    metadata.setdefault("turnCount", len(turns))
    if conversation.completeness != cat.CONVERSATION_COMPLETE:
        metadata["completeness"] = conversation.completeness
    skipped = skipped_identical_comparisons(turns)
    if skipped:  # an imported file's own list stays in metadata_extra, as read
        metadata[SKIPPED_IDENTICAL_KEY] = skipped
    metadata.update(
        {
            "model": om.exported_identity if include_model_identity else om.alias,
            "provider": conversation.provider if include_model_identity else "",
            "timestamp": cf.format_timestamp(conversation.started_at),
            "category": conversation.topic.category,
            "subtopic": conversation.topic.subtopic,
        }
    )
    surveys = {s.kind: s for s in conversation.panas_surveys.all()}
    wide = getattr(conversation, "wide_answers", None)
    wide_dict = None
    if wide is not None:
        ratings = {r.branch: r.rating for r in conversation.four_branch_ratings.all()}
        wide_dict = {
            "q1_lookingFor": list(wide.looking_for),
            "q2_emotionClarity": wide.emotion_clarity or None,
            "q3_modelFit": wide.model_fit or None,
            "q3_followUp_whatFeltOff": list(wide.what_felt_off),
            "fourBranchScores": {b: ratings[b] for b in cat.FOUR_BRANCHES if b in ratings},
        }
    return {
        "conversationId": conversation.conversation_id,
        "metadata": metadata,
        "participant_profile": _profile(conversation.participant),
        "prePanas": _panas(surveys.get("pre")),
        "postPanas": _panas(surveys.get("post")),
        "conversationWideQuestions": wide_dict,
        "turns": [_turn_dict(t) for t in turns],
    }


#: Metadata key listing the comparisons never asked because both texts were the same (metadata is open, SPEC 3.1).
SKIPPED_IDENTICAL_KEY = "skippedIdenticalComparisons"


def skipped_identical_comparisons(turns: list[Turn]) -> list[dict[str, Any]]:
    """Per turn, the (question, pair) comparisons skipped as identical; they are not in ``pairwiseComparisons``.

    A skipped pair has no winner and was never shown, so it is left out of the
    comparisons (where a null winner would count against every evaluated model)
    and listed here instead, so nothing about what was asked is hidden.
    """
    return [
        {
            "turnNumber": turn.turn_number,
            "questionId": s["questionId"],
            "responseA": s["responseA"],
            "responseB": s["responseB"],
            "reason": s.get("reason", "identical"),
        }
        for turn in turns
        for s in turn.skipped_comparisons
    ]


def _turn_dict(turn: Turn) -> dict[str, Any]:
    """A turn's canonical object. In an unfinished turn a step not answered yet is null, never ``[]``
    (SPEC 2.1: an empty mood list means "no change"), and the turn says it is unfinished."""
    alternates = getattr(turn, "alternates", None)
    complete = turn.completeness == cat.TURN_COMPLETE
    judgements = [
        {
            "questionId": j.question_id,
            "observedBehavior": j.observed,
            "preferredBehavior": j.preferred,
            "llmValue": j.llm_value,
        }
        for j in sorted(turn.binary_judgements.all(), key=lambda j: j.position)
    ]
    comparisons = [
        {"questionId": p.question_id, "responseA": p.response_a, "responseB": p.response_b, "winner": p.winner}
        for p in sorted(turn.pairwise_comparisons.all(), key=lambda p: p.position)
    ]
    selected = list(turn.selected_pairwise_questions)
    pairwise_answered = complete or bool(selected or comparisons)
    data: dict[str, Any] = {
        "turnNumber": turn.turn_number,
        "userMessage": turn.user_message,
        "llmResponse": turn.llm_response,
        "moodShiftTags": [
            {"emotion": m.emotion, "intensity": m.intensity}
            for m in sorted(turn.mood_tags.all(), key=lambda m: m.position)
        ]
        if complete or turn.mood_answered
        else None,
        "annotations": {
            "binaryJudgements": judgements if complete or judgements else None,
            "alternateResponses": None
            if alternates is None
            else {"llmImproved": alternates.llm_improved, "humanEdited": alternates.human_edited},
            "pairwiseComparisons": comparisons if pairwise_answered else None,
            "selectedPairwiseQuestions": selected if pairwise_answered else None,
        },
    }
    if not complete:
        data["completeness"] = turn.completeness
    return data


def conversation_to_canonical(conversation: Conversation, include_model_identity: bool = False) -> cf.ConversationFile:
    """The conversation as a validated canonical document (for replay and scoring)."""
    return cf.parse_conversation(
        conversation_to_dict(conversation, include_model_identity), source=conversation.conversation_id
    )


def iter_canonical(
    queryset: QuerySet[Conversation], include_model_identity: bool = False, chunk_size: int = 200
) -> Iterator[cf.ConversationFile]:
    """Canonical documents in id order, loaded in chunks so memory stays flat for large exports.

    The order is the ids' code-point order, sorted here rather than by the database:
    a PostgreSQL created with a language collation (en_US, the postgres image's default)
    orders ``conv_2`` / ``Conv-1`` differently, and a reader recomputing a version's
    content hash sorts by code point (``datasets.versions.CONTENT_HASH_RULE``).
    """
    ids = [pk for _, pk in sorted(queryset.values_list("conversation_id", "pk"))]
    for start in range(0, len(ids), chunk_size):
        chunk = with_export_relations(Conversation.objects.filter(pk__in=ids[start : start + chunk_size]))
        for conversation in sorted(chunk, key=lambda c: c.conversation_id):
            yield conversation_to_canonical(conversation, include_model_identity)


def export_conversations(
    queryset: QuerySet[Conversation],
    fmt: str,
    out: str | Path,
    include_model_identity: bool = False,
    progress: Any = None,
) -> int:
    """Write an export; ``progress(done, total)`` is called as it goes. Returns the count written."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    out = Path(out)
    total = queryset.count()
    documents = iter_canonical(queryset, include_model_identity)

    def counted() -> Iterator[cf.ConversationFile]:
        for done, doc in enumerate(documents, start=1):
            yield doc
            if progress:
                progress(done, total)

    if fmt == "json":
        return _write_json(counted(), out)
    if fmt == "jsonl":
        out.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        with out.open("w", encoding="utf-8") as handle:
            for doc in counted():
                handle.write(cf.dumps_line(doc) + "\n")
                count += 1
        return count
    from datasets.parquet_export import write_turns_parquet

    return write_turns_parquet(counted(), out)


def _write_json(documents: Iterable[cf.ConversationFile], out: Path) -> int:
    count = 0
    if out.suffix.lower() == ".zip":
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for doc in documents:
                archive.writestr(document_filename(doc), cf.dumps_canonical(doc))
                count += 1
        return count
    out.mkdir(parents=True, exist_ok=True)
    for doc in documents:
        (out / document_filename(doc)).write_text(cf.dumps_canonical(doc), encoding="utf-8")
        count += 1
    return count
