"""Query budgets: every researcher page, API list endpoint and admin list costs a fixed number of queries.

Each endpoint is requested against a world of 10 rows and a world of 1,000 rows
of what it lists, and must spend exactly its budget in both: a count that grew
with the rows would be an N+1. The worlds are built once per module with
bulk_create inside a transaction that is rolled back afterwards, so the 1,000-row
world costs a few seconds, once, and leaves nothing behind for other tests.

Each measured request is the first of a freshly logged-in client, made with
the cache emptied, so evaluation pages pay for recomputing their data (their
dearest path) and no count depends on which test ran before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from attunebench import canonical as cf
from attunebench import catalogue as cat
from datasets.pseudonyms import export_pseudonym

pytestmark = pytest.mark.django_db

SIZES = (10, 1000)
TURNS_PER_CONVERSATION = 2
SCORED_MODELS = (("budget:strong", 0.85), ("budget:middling", 0.5), ("budget:weak", 0.15))


@dataclass
class World:
    """The rows one size of the world was built with, and the handles the endpoints need."""

    n: int
    researcher: Any
    long_conversation: Any
    main_run: Any
    newest_run: Any
    main_version: Any
    newest_job: Any
    long_assignment: Any
    newest_snapshot: Any

    def conversation_id(self, i: int) -> str:
        return f"budget-{i:05d}"


def _synth_pool() -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Real scorer records (per scored model) and EM outputs, from the core on synthetic conversations."""
    from attunebench.metrics.engine import score_runs
    from attunebench.metrics.results import to_json
    from attunebench.synth import synth_conversations, synth_run

    documents = synth_conversations(4, seed=11, min_turns=TURNS_PER_CONVERSATION, max_turns=TURNS_PER_CONVERSATION)
    records: dict[str, list[dict[str, Any]]] = {}
    outputs: list[dict[str, Any]] = []
    for name, skill in SCORED_MODELS:
        runs = [synth_run(d, name, "default", 7, skill=skill) for d in documents]
        result = score_runs(documents, runs)
        assert not result.skipped
        # Stored exactly as scoring.run_scoring stores them.
        records[name] = [to_json(s.record.model_copy(update={"details": s.details})) for s in result.scores]
        outputs.extend(cf.to_canonical_dict(r) for r in runs)
    return records, outputs


def _jittered(record: dict[str, Any], step: int) -> dict[str, Any]:
    """The record with every metric nudged by a distinct tiny amount.

    Recycled records would give the analyses' paired tests tied differences,
    and scipy answers ties in samples of 13 or fewer with a permutation test
    taking about half a second per test: tie-free values keep the 10-row world fast.
    Later turns get larger nudges, so early-versus-late differences are tie-free too.
    """
    from attunebench.metrics.keys import METRIC_KEYS

    def nudged(value: Any, amount: float) -> Any:
        if isinstance(value, float):
            return value + amount
        if isinstance(value, dict):
            return {k: nudged(v, amount) for k, v in value.items()}
        if isinstance(value, list):
            return [nudged(v, amount) for v in value]
        return value

    amount = step * 1.4142e-7
    out = dict(record)
    out.update({k: record[k] + amount for k in METRIC_KEYS if isinstance(record.get(k), float)})
    out["turns"] = [nudged(t, amount * (t["turn_index"] + 2)) for t in record["turns"]]
    return out


def build_world(n: int) -> World:
    """n of everything a researcher page or API list shows (conversations, turns with annotations, runs...)."""
    from django.contrib.auth import get_user_model

    from annotation.models import AlternateResponses, BinaryJudgement, MoodTag, PageTime, PairwiseComparison
    from collection.models import (
        AttentionCheck,
        Consent,
        Conversation,
        ConversationWideAnswers,
        FourBranchRating,
        LiveCall,
        OriginalModel,
        PanasItemResponse,
        PanasSurvey,
        Participant,
        ParticipantProfile,
        QualityDecision,
        SafetyEvent,
        SensitiveProfile,
        Study,
        StudyModel,
        StudyQuota,
        Topic,
        Turn,
    )
    from datasets.models import DatasetVersion, ExportJob
    from research.access.roles import do_make_researcher
    from research.models import HumanAssignment
    from scoring.models import (
        CallTranscript,
        ConversationScore,
        EvaluatedModel,
        EvaluationRun,
        ModelCallCache,
        RunConversation,
        RunScore,
    )

    records, outputs = _synth_pool()
    start = timezone.now() - timedelta(days=30)
    user_model = get_user_model()
    researcher = user_model.objects.create_user("rita-budget")
    do_make_researcher(researcher)
    second_rater = user_model.objects.create_user("ravi-budget")

    Study.objects.bulk_create(
        Study(slug=f"budget-study-{i:05d}", title=f"Budget study {i:05d}", information="i", crisis_resources="c")
        for i in range(n)
    )
    Study.objects.filter(slug__startswith="budget-study-").update(open_enrolment=True)
    topics = list(Topic.objects.order_by("pk")[:4])
    Topic.objects.bulk_create(
        Topic(category="Budget", subtopic=f"budget topic {i:05d}", in_catalogue=False) for i in range(n)
    )
    # n original models in the registry; conversations use the first three.
    models = OriginalModel.objects.bulk_create(
        OriginalModel(name=f"budget-om-{k}", alias=f"om-budget{k}", provider="offline", active=k < 3) for k in range(n)
    )[:3]
    # Study set-up: each budget study has a one-model pool and a quota on a topic of its own.
    budget_studies = list(Study.objects.filter(slug__startswith="budget-study-").order_by("slug"))
    budget_topics = list(Topic.objects.filter(category="Budget").order_by("subtopic"))
    StudyModel.objects.bulk_create(StudyModel(study=s, original_model=models[0]) for s in budget_studies)
    StudyQuota.objects.bulk_create(
        StudyQuota(study=s, kind="topic", topic=t, cap=5) for s, t in zip(budget_studies, budget_topics, strict=True)
    )
    participants = Participant.objects.bulk_create(
        Participant(pseudonym=f"p-budget{i:05d}", token_hash=f"budget-token-{i:05d}") for i in range(n + 1)
    )
    Consent.objects.bulk_create(Consent(participant=p, version="1.0") for p in participants)
    SensitiveProfile.objects.bulk_create(
        SensitiveProfile(participant=p, diagnoses=["anxiety"] if i % 2 else ["none"])
        for i, p in enumerate(participants)
    )

    def conversation(cid: str, i: int, started: Any) -> Conversation:
        return Conversation(
            conversation_id=cid,
            participant=participants[i],
            original_model=models[i % len(models)],
            topic=topics[i % len(topics)],
            status=Conversation.Status.COMPLETE,
            completeness=cat.CONVERSATION_COMPLETE,
            source=Conversation.Source.COLLECTED if i % 2 else Conversation.Source.IMPORTED,
            started_at=started,
            completed_at=started + timedelta(minutes=20),
        )

    conversations = Conversation.objects.bulk_create(
        conversation(f"budget-{i:05d}", i, start + timedelta(minutes=i)) for i in range(n)
    )
    # The long conversation has n turns; it starts first so the newest-50 lists show the short ones.
    long_conversation = Conversation.objects.bulk_create([conversation("budget-long", n, start - timedelta(days=1))])[0]

    turns = Turn.objects.bulk_create(
        [
            Turn(
                conversation=c,
                turn_number=t,
                user_message=f"message {c.conversation_id}/{t}",
                llm_response=f"reply {c.conversation_id}/{t}",
                annotation_started_at=c.started_at,
                annotation_completed_at=c.started_at + timedelta(seconds=30 + t),
                completeness=cat.TURN_COMPLETE,
                mood_answered=True,
            )
            for c in conversations
            for t in range(1, TURNS_PER_CONVERSATION + 1)
        ]
        + [
            Turn(
                conversation=long_conversation,
                turn_number=t,
                user_message=f"long message {t}",
                llm_response=f"long reply {t}",
                completeness=cat.TURN_COMPLETE,
                mood_answered=True,
            )
            for t in range(1, n + 1)
        ]
    )
    MoodTag.objects.bulk_create(MoodTag(turn=t, position=0, emotion="Upset", intensity=3) for t in turns)
    BinaryJudgement.objects.bulk_create(
        BinaryJudgement(turn=t, position=k, question_id=q, observed=cat.YES, preferred=cat.NO)
        for t in turns
        for k, q in enumerate(cat.BINARY_QUESTION_IDS[:2])
    )
    PairwiseComparison.objects.bulk_create(
        PairwiseComparison(turn=t, position=0, question_id="general", response_a="original", response_b="human")
        for t in turns
    )
    AlternateResponses.objects.bulk_create(
        AlternateResponses(turn=t, llm_improved="improved", human_edited="edited") for t in turns
    )
    PageTime.objects.bulk_create(PageTime(turn=t, page="answers", seconds=12.0) for t in turns)
    AttentionCheck.objects.bulk_create(
        AttentionCheck(
            participant_id=t.conversation.participant_id,
            turn=t,
            place="answers",
            instructed="Yes",
            given="No",
            passed=False,
        )
        for t in turns
    )
    QualityDecision.objects.bulk_create(QualityDecision(participant=p, decision="include") for p in participants)
    SafetyEvent.objects.bulk_create(
        SafetyEvent(
            study=budget_studies[i % len(budget_studies)],
            participant_id=t.conversation.participant_id,
            turn=t,
            level="concern",
            source="message",
            signals=["hopelessness"],
            shown="resources",
        )
        for i, t in enumerate(turns)
    )
    LiveCall.objects.bulk_create(
        LiveCall(study=budget_studies[i % len(budget_studies)], litellm_model="openai/budget", cost_usd=0.01)
        for i in range(n)
    )
    surveys = PanasSurvey.objects.bulk_create(
        PanasSurvey(conversation=long_conversation, kind=kind, total_positive=20, total_negative=20)
        for kind in ("pre", "post")
    )
    PanasItemResponse.objects.bulk_create(
        PanasItemResponse(survey=s, item=item, rating=2) for s in surveys for item in cat.PANAS_ITEMS
    )
    ConversationWideAnswers.objects.create(conversation=long_conversation, looking_for=["Comfort"])
    FourBranchRating.objects.bulk_create(
        FourBranchRating(conversation=long_conversation, branch=b, rating=3) for b in cat.FOUR_BRANCHES
    )
    # One of each per short conversation too, so every admin list has n rows (one PANAS item is enough there).
    short_surveys = PanasSurvey.objects.bulk_create(
        PanasSurvey(conversation=c, kind="post", total_positive=20, total_negative=20) for c in conversations
    )
    PanasItemResponse.objects.bulk_create(
        PanasItemResponse(survey=s, item=cat.PANAS_ITEMS[0], rating=2) for s in short_surveys
    )
    ConversationWideAnswers.objects.bulk_create(ConversationWideAnswers(conversation=c) for c in conversations)
    FourBranchRating.objects.bulk_create(
        FourBranchRating(conversation=c, branch=cat.FOUR_BRANCHES[0], rating=3) for c in conversations
    )
    ParticipantProfile.objects.bulk_create(ParticipantProfile(participant=p, age_band="25-34") for p in participants)
    ModelCallCache.objects.bulk_create(
        ModelCallCache(key=f"{i:064x}", model="openai/x", response="cached reply") for i in range(n)
    )

    versions = DatasetVersion.objects.bulk_create(
        DatasetVersion(
            name=f"budget-v{i:05d}",
            description=f"version {i}",
            content_hash=f"{i:064x}",
            created_at=start + timedelta(minutes=i),
            created_by=researcher,
            frozen=True,
        )
        for i in range(n)
    )
    main_version = versions[-1]  # the newest
    DatasetVersion.conversations.through.objects.bulk_create(
        DatasetVersion.conversations.through(datasetversion_id=main_version.pk, conversation_id=c.pk)
        for c in conversations
    )
    DatasetVersion.objects.filter(pk=main_version.pk).update(conversation_count=n)
    job_states = [
        {"status": ExportJob.Status.DONE, "file_size": 2048, "file_sha256": "ab" * 32, "progress_done": 5},
        {"status": ExportJob.Status.FAILED, "error": "disk full", "progress_done": 1},
        {"status": ExportJob.Status.RUNNING, "progress_done": 2},
        {"status": ExportJob.Status.QUEUED, "progress_done": 0},
    ]
    jobs = ExportJob.objects.bulk_create(
        ExportJob(
            dataset_version=main_version,
            fmt="json",
            created_by=researcher,
            created_at=start + timedelta(minutes=i),
            progress_total=5,
            **job_states[i % len(job_states)],
        )
        for i in range(n)
    )

    ems = EvaluatedModel.objects.bulk_create(
        EvaluatedModel(name=f"budget-em-{i:05d}", kind=EvaluatedModel.Kind.LLM, litellm_model="openai/x")
        for i in range(n)
    )
    judge = EvaluatedModel.objects.create(name="budget-judge", kind=EvaluatedModel.Kind.LLM)
    statuses = [s for s, _ in EvaluationRun.Status.choices]
    runs = EvaluationRun.objects.bulk_create(
        EvaluationRun(
            evaluated_model=ems[i],
            judge_model=judge,
            mode=cat.MODES[i % len(cat.MODES)],
            dataset_version=versions[i],
            status=statuses[i % len(statuses)],
            conversations_total=4,
            conversations_done=i % 5,
            created_at=start + timedelta(minutes=i),
            created_by=researcher,
        )
        for i in range(n)
    )
    RunScore.objects.bulk_create(RunScore(run=r, composite_score=50.0, metrics={}) for r in runs)
    scored_models = EvaluatedModel.objects.bulk_create(EvaluatedModel(name=name) for name, _ in SCORED_MODELS)
    scored_runs = EvaluationRun.objects.bulk_create(
        EvaluationRun(
            evaluated_model=m,
            status=EvaluationRun.Status.DONE,
            conversations_total=n + 1,
            conversations_done=n + 1,
            created_at=timezone.now() + timedelta(minutes=k),
        )
        for k, m in enumerate(scored_models)
    )
    main_run = scored_runs[0]
    RunScore.objects.bulk_create(RunScore(run=r, composite_score=60.0, metrics={}) for r in scored_runs)
    # composite_score rises with i, so the run page's best-first list starts with the newest conversation
    ConversationScore.objects.bulk_create(
        ConversationScore(
            run=r,
            conversation=c,
            composite_score=100.0 * i / (n + 1),
            coverage=1.0,
            metrics=_jittered(records[name][i % len(records[name])], (i + 1) * (k + 1)),
        )
        for k, (r, (name, _)) in enumerate(zip(scored_runs, SCORED_MODELS, strict=True))
        for i, c in enumerate([*conversations, long_conversation])
    )
    # Every run has an output for the long conversation, so its viewer lists n + 1 runs.
    RunConversation.objects.bulk_create(
        RunConversation(run=r, conversation=long_conversation, status=RunConversation.Status.DONE, output=outputs[0])
        for r in [*runs, main_run]
    )
    # The main run's output for the long conversation has n model calls, for its call transcript.
    main_output = RunConversation.objects.get(run=main_run, conversation=long_conversation)
    CallTranscript.objects.bulk_create(
        CallTranscript(
            run_conversation=main_output,
            sequence=i,
            call_type="draft",
            turn_number=1,
            role="em",
            model="budget:strong",
            messages=[
                {"role": "system", "content": "budget system"},
                {"role": "user", "content": f"budget prompt {i}"},
            ],
            raw_reply=f"budget reply {i}",
            parsed={"response": f"budget reply {i}"},
            prompt_tokens=10,
            completion_tokens=5,
            cost_usd=0.0,
            latency_s=0.01,
            transport_attempts=1,
        )
        for i in range(n)
    )

    human_runs = []
    for rater in (researcher, second_rater):
        model = EvaluatedModel.objects.create(name=f"human:{rater.username}", kind=EvaluatedModel.Kind.HUMAN)
        human_runs.append(
            EvaluationRun.objects.create(
                evaluated_model=model, status=EvaluationRun.Status.RUNNING, selection={"human_baseline": True}
            )
        )
    done = RunConversation.objects.bulk_create(
        RunConversation(
            run=human_runs[0], conversation=c, status=RunConversation.Status.DONE, output=outputs[i % len(outputs)]
        )
        for i, c in enumerate(conversations)
        if i % 2 == 0
    )
    # A second rater on two of the same conversations, so rater agreement has something to compute.
    RunConversation.objects.bulk_create(
        RunConversation(run=human_runs[1], conversation=c, status=RunConversation.Status.DONE, output=outputs[-1])
        for c in conversations[0:4:2]
    )
    done_by_conversation = {rc.conversation_id: rc for rc in done}
    HumanAssignment.objects.bulk_create(
        HumanAssignment(
            rater=researcher,
            conversation=c,
            assigned_by=researcher,
            assigned_at=start + timedelta(minutes=i),
            turns_done=TURNS_PER_CONVERSATION if i % 2 == 0 else 1,
            completed_at=c.completed_at if i % 2 == 0 else None,
            run_conversation=done_by_conversation.get(c.pk),
        )
        for i, c in enumerate(conversations)
    )
    # Halfway through the long conversation: the rater's screen shows n/2 earlier turns.
    long_assignment = HumanAssignment.objects.create(
        rater=researcher, conversation=long_conversation, assigned_by=researcher, turns_done=n // 2
    )
    from research.models import ResultSnapshot

    snapshots = ResultSnapshot.objects.bulk_create(
        ResultSnapshot(
            name=f"budget-snapshot-{i:05d}",
            created_by=researcher,
            created_at=start + timedelta(minutes=i),
            manifest={"conversation_set_label": "budget set", "runs": [{"id": i}], "compared_conversations": ["c"]},
            leaderboard={"rows": [{"em_model": f"budget-row-{i:05d}", "mode": "default"}], "apart": []},
            table=[["em_model"], [f"budget-row-{i:05d}"]],
            analysis=None,
            content_sha256=f"{i:064d}",
        )
        for i in range(n)
    )
    from research.models import ErasureRecord

    ErasureRecord.objects.bulk_create(
        ErasureRecord(
            erased_by=researcher, via="command", rows_deleted={"collection.Participant": 1}, runs_rescored=[i]
        )
        for i in range(n)
    )
    return World(
        n=n,
        newest_snapshot=snapshots[-1],
        researcher=researcher,
        long_conversation=long_conversation,
        main_run=main_run,
        newest_run=runs[-1],
        main_version=main_version,
        newest_job=jobs[-1],
        long_assignment=long_assignment,
    )


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"{n}-rows")
def world(request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    """One world per size, shared by the module's tests and rolled back after them."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield build_world(request.param)
        transaction.set_rollback(True)


@dataclass(frozen=True)
class Endpoint:
    """A GET endpoint, its fixed query budget, and text that proves the rows were rendered."""

    name: str
    budget: int
    url: Callable[[World], str]
    shows: Callable[[World], list[str]]
    headers: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.name


def _r(name: str, *args: Any) -> str:
    return reverse(name, args=args)


def _model_pk(name: str) -> int:
    from scoring.models import EvaluatedModel

    return EvaluatedModel.objects.values_list("pk", flat=True).get(name=name)


# Budgets: session and user (2) are in every count, and on researcher pages and the API the research-group
# check (1, research.roles.is_researcher; counted in the number, not repeated in the comments); each comment
# lists the rest.
ENDPOINTS = [
    Endpoint(
        "research:home",
        # runs, newest run score, score stamps (cache key), scores, conversation details, diagnoses; the set
        # selector lists the selections of the scored runs already loaded (no frozen-dataset query any more)
        9,
        lambda w: _r("research:home"),
        lambda w: ["budget:strong", "budget:weak", "live conversations (no version) · all topics"],
    ),
    Endpoint(
        "research:home leaderboard fragment",
        9,  # runs, newest run score, score stamps (cache key), scores, conversation details, diagnoses
        lambda w: _r("research:home") + "?part=leaderboard",
        lambda w: ["budget:middling"],
        headers=(("HTTP_HX_REQUEST", "true"),),
    ),
    Endpoint(
        "research:figure leaderboard.csv",
        9,  # runs, newest run score, score stamps (cache key), scores, conversation details, diagnoses
        lambda w: _r("research:figure", "leaderboard", "csv"),
        lambda w: ["budget:strong"],
    ),
    Endpoint(
        "research:collection",
        # by status, by category, by model, turns, annotated turns, timings, identity screen outcomes, participants,
        # withdrawn, newest 50, studies (limits); monitoring of one study: the study picker, its
        # participants, conversations, consents, profiles, post-chat moods, turns, quotas, conversations per
        # topic and participants per group (the quotas' fill), quality summaries (participants; the detectors'
        # prefetches run only when the study has participants), live spend, safety flags
        27,
        lambda w: _r("research:collection"),
        lambda w: [w.conversation_id(w.n - 1), w.conversation_id(max(0, w.n - 50))],
    ),
    Endpoint(
        "research:conversation",
        12,  # conversation, PANAS, items, turns (+alternates), tags, judgements, comparisons, Four-Branch, runs
        lambda w: _r("research:conversation", w.long_conversation.conversation_id),
        lambda w: [f"long message {w.n}", f"budget-em-{w.n - 1:05d}"],
    ),
    Endpoint(
        "research:runs",
        7,  # form: models, judges, datasets; newest 50 runs (+model, judge, dataset)
        lambda w: _r("research:runs"),
        lambda w: [f'id="run-{w.newest_run.pk}"', f"budget-em-{w.n - 1:05d}", "budget-judge"],
    ),
    Endpoint(
        "research:run",
        10,  # run, its score, first 500 conversation scores (+conversation, topic), stalled and failed conversations,
        # how many of its conversations' participants withdrew, the conversations with failed or defaulted turns
        lambda w: _r("research:run", w.main_run.pk),
        lambda w: [w.conversation_id(w.n - 1)],
    ),
    Endpoint(
        "research:run_progress",
        4,  # run
        lambda w: _r("research:run_progress", w.main_run.pk),
        lambda w: [f'id="progress-{w.main_run.pk}"'],
    ),
    Endpoint(
        "research:drilldown",
        # run, conversation, output, score, turns, tags, judgements, comparisons, PANAS, items, wide, Four-Branch,
        # and the conversation as the scorer reads it (conversation + relations, turns, tags, judgements,
        # comparisons, PANAS, items, Four-Branch, sensitive-data consent)
        24,
        lambda w: _r("research:drilldown", w.main_run.pk, w.long_conversation.conversation_id),
        lambda w: [f"long message {w.n}"],
    ),
    Endpoint(
        "research:transcript",
        7,  # run (+model, judge), conversation (+topic), output, its calls (all n)
        lambda w: _r("research:transcript", w.main_run.pk, w.long_conversation.conversation_id),
        lambda w: [f"budget prompt {w.n - 1}", f"budget reply {w.n - 1}", "budget prompt 0"],
    ),
    Endpoint(
        "research:snapshots",
        4,  # snapshots (+creator), at most 500
        lambda w: _r("research:snapshots"),
        lambda w: [f"budget-snapshot-{w.n - 1:05d}", f"budget-snapshot-{w.n - 2:05d}"],
    ),
    Endpoint(
        "research:snapshot",
        4,  # the snapshot (+creator); everything shown is inside it
        lambda w: _r("research:snapshot", w.newest_snapshot.pk),
        lambda w: [f"budget-row-{w.n - 1:05d}"],
    ),
    Endpoint(
        "api:snapshot-list",
        5,  # count, page (+creator)
        lambda w: _r("api:snapshot-list"),
        lambda w: [f"budget-snapshot-{w.n - 1:05d}"],
    ),
    Endpoint(
        "research:models",
        6,  # permissions (2: the account's own and its groups', for the add form), every model
        lambda w: _r("research:models"),
        lambda w: ["budget-em-00000", f"budget-em-{w.n - 1:05d}", "budget-judge"],
    ),
    Endpoint(
        "research:model",
        6,  # permissions (2: the account's own and its groups', for the edit form), the model
        lambda w: _r("research:model", _model_pk("budget-judge")),
        lambda w: ["budget-judge", 'name="litellm_model"'],
    ),
    Endpoint(
        "research:token",
        4,  # the researcher's own token
        lambda w: _r("research:token"),
        lambda w: ["API token"],
    ),
    Endpoint(
        "research:datasets",
        4,  # versions (+creator, export count)
        lambda w: _r("research:datasets"),
        lambda w: ["budget-v00000", w.main_version.name],
    ),
    Endpoint(
        "research:dataset",
        # version, datasheet (rows, diagnoses, consents, turns by completeness, left out: withdrawn, by
        # completeness, quality-excluded), quality exclusions by reason, summary, export jobs (+creator)
        14,
        lambda w: _r("research:dataset", w.main_version.pk),
        lambda w: [f'id="export-{w.newest_job.pk}"'],
    ),
    Endpoint(
        "research:export_status",
        4,  # job
        lambda w: _r("research:export_status", w.newest_job.pk),
        lambda w: [f'id="export-{w.newest_job.pk}"'],
    ),
    Endpoint(
        "research:human",
        7,  # agreement outputs, form: raters, conversations; assignments (+rater, conversation, output)
        lambda w: _r("research:human"),
        lambda w: [w.conversation_id(0), w.conversation_id(w.n - 1), "compare"],
    ),
    Endpoint(
        "research:rater_home",
        3,  # own assignments (+conversation, topic, turn count)
        lambda w: _r("research:rater_home"),
        lambda w: [w.conversation_id(0), w.conversation_id(w.n - 1)],
    ),
    Endpoint(
        "research:rate",
        6,  # assignment, turns, pre-chat PANAS, topic
        lambda w: _r("research:rate", w.long_assignment.pk),
        lambda w: [f"long message {w.n // 2}</div>", f"long message {w.n // 2 + 1}"],
    ),
    Endpoint(
        "landing",
        1,  # open studies; no session for an anonymous visitor
        lambda w: _r("landing"),
        lambda w: ["Budget study 00000", f"Budget study {w.n - 1:05d}"],
    ),
    Endpoint(
        "api:conversation-list",
        5,  # count, page (+topic, model, participant, turn count)
        lambda w: _r("api:conversation-list"),
        # Participants as exports show them: the keyed-hash pseudonym, never the stored id.
        lambda w: [w.conversation_id(0), f'"participant":"{export_pseudonym("p-budget00000")}"'],
    ),
    Endpoint(
        "api:conversation-list ?dataset_version",
        5,  # count, page
        lambda w: _r("api:conversation-list") + f"?dataset_version={w.main_version.pk}",
        lambda w: [w.conversation_id(0), f'"count":{w.n}'],
    ),
    Endpoint(
        "api:conversation-detail",
        12,  # conversation, turns, tags, judgements, comparisons, PANAS, items, Four-Branch, sensitive-data consent
        lambda w: _r("api:conversation-detail", w.long_conversation.conversation_id),
        lambda w: [f"long message {w.n}"],
    ),
    Endpoint(
        "api:model-list",
        5,  # count, page
        lambda w: _r("api:model-list"),
        lambda w: ["budget-em-00000"],
    ),
    Endpoint(
        "api:dataset-version-list",
        5,  # count, page (+creator)
        lambda w: _r("api:dataset-version-list"),
        lambda w: [w.main_version.name, '"created_by":"rita-budget"'],
    ),
    Endpoint(
        "api:export-list",
        5,  # count, page
        lambda w: _r("api:export-list"),
        lambda w: [f'"id":{w.newest_job.pk},'],
    ),
    Endpoint(
        "api:run-list",
        5,  # count, page (+model, judge, score)
        lambda w: _r("api:run-list"),
        lambda w: ['"evaluated_model":"budget:weak"', '"judge_model":"budget-judge"'],
    ),
    Endpoint(
        "api:run-scores",
        6,  # run, count, page (+conversation)
        lambda w: _r("api:run-scores", w.main_run.pk),
        lambda w: [w.conversation_id(0), f'"count":{w.n + 1}'],
    ),
    Endpoint(
        "api:run-conversations",
        6,  # run, count, page (+conversation)
        lambda w: _r("api:run-conversations", w.main_run.pk),
        lambda w: [w.long_conversation.conversation_id, '"stalled":false'],
    ),
    Endpoint(
        "api:run-transcript",
        7,  # run, conversation, output, its calls (all n)
        lambda w: _r("api:run-transcript", w.main_run.pk, w.long_conversation.conversation_id),
        lambda w: [f"budget prompt {w.n - 1}", f"budget reply {w.n - 1}"],
    ),
    Endpoint(
        "api:leaderboard",
        9,  # runs, newest run score, score stamps (cache key), scores, conversation details, diagnoses
        lambda w: _r("api:leaderboard"),
        lambda w: ["budget:strong", "budget:weak"],
    ),
    Endpoint(
        "api:analyses",
        9,  # runs, newest run score, score stamps (cache key), scores, conversation details, diagnoses
        lambda w: _r("api:analyses"),
        lambda w: ["budget:middling"],
    ),
    Endpoint(
        "api:agreement",
        4,  # session, user, research group check, the raters' finished outputs
        lambda w: _r("api:agreement"),
        lambda w: ['"emotion"'],
    ),
]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_query_budget(world: World, endpoint: Endpoint, django_assert_num_queries: Any) -> None:
    client = Client()
    client.force_login(world.researcher)
    url = endpoint.url(world)
    headers = dict(endpoint.headers)
    cache.clear()
    with django_assert_num_queries(endpoint.budget):
        response = client.get(url, **headers)
    assert response.status_code == 200
    body = response.content.decode()
    for text in endpoint.shows(world):
        assert text in body, f"{endpoint} at {world.n} rows does not show {text!r}"


# Django admin, which researchers may view (research.access.roles): the index (session, user, permissions (2), recent
# actions) and each model's list of 100 rows a page: session, user, permissions (2), the count (twice: filtered
# and total) and the page, plus what is noted beside it.
ADMIN_BUDGETS = {
    "index": 5,
    "annotation.alternateresponses": 7,
    "annotation.binaryjudgement": 7,
    "annotation.moodtag": 9,  # + emotion and intensity filter choices
    "annotation.pairwisecomparison": 8,  # + question filter choices
    "collection.consent": 8,  # + consent-version filter choices
    "collection.conversation": 11,  # + model and category filter choices, date hierarchy (2) (+turn count)
    "collection.conversationwideanswers": 7,
    "collection.fourbranchrating": 8,  # + rating filter choices
    "collection.livecall": 8,  # + study filter choices (+study)
    "collection.attentioncheck": 7,  # (+participant)
    "collection.qualitydecision": 8,  # + reason filter choices (+participant, decided by)
    "collection.safetyevent": 8,  # + study filter choices (+study)
    "annotation.pagetime": 7,  # (+turn)
    "collection.originalmodel": 8,  # + provider filter choices (+conversation count)
    "collection.panasitemresponse": 7,
    "collection.panassurvey": 7,
    "collection.participant": 10,  # + study filter choices, date hierarchy (2) (+study, conversation count)
    "collection.participantprofile": 9,  # + age-band and attitude filter choices
    "collection.sensitiveprofile": 4,  # refused (403): diagnoses are not the research group's to view
    "collection.pendingtask": 4,  # refused (403): tasks kept while the broker was away are administrators' only
    "collection.study": 8,  # + consent-version filter choices (+participant count)
    "collection.studymodel": 8,  # + study filter choices (+study, original model)
    "collection.studyquota": 8,  # + study filter choices (+study, topic)
    "collection.topic": 8,  # + category filter choices
    "collection.turn": 8,  # + category filter choices
    "datasets.datasetversion": 7,  # (+creator)
    "datasets.exportjob": 7,
    "research.humanassignment": 8,  # + rater filter choices
    "research.resultsnapshot": 7,  # (+created by, joined)
    "research.erasurerecord": 7,  # counts only, nothing about the participant (+erased by)
    "scoring.conversationscore": 9,  # + model and category filter choices
    "scoring.evaluatedmodel": 7,
    "scoring.evaluationrun": 10,  # + model filter choices, date hierarchy (2)
    "scoring.modelcallcache": 9,  # + model and prompt-version filter choices
    "scoring.calltranscript": 8,  # + role filter choices (+the run conversation of each row, joined)
    "scoring.runconversation": 8,  # + model filter choices
    "scoring.runscore": 8,  # + model filter choices
}
# Accounts, API tokens and login attempts: admins only, not a research list.
NOT_RESEARCH_DATA = ("auth", "knox", "axes")


def _admin_models() -> dict[str, Any]:
    from django.contrib import admin

    return {
        model._meta.label_lower: model
        for model in admin.site._registry
        if model._meta.app_label not in NOT_RESEARCH_DATA
    }


def test_every_admin_list_has_a_budget() -> None:
    assert set(ADMIN_BUDGETS) - {"index"} == set(_admin_models())


@pytest.mark.parametrize(("label", "budget"), ADMIN_BUDGETS.items(), ids=list(ADMIN_BUDGETS))
def test_admin_query_budget(world: World, label: str, budget: int, django_assert_num_queries: Any) -> None:
    model = _admin_models().get(label)
    if model is None:
        url = reverse("admin:index")
    else:
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    client = Client()
    client.force_login(world.researcher)
    cache.clear()  # with Redis the session is cached; the budgets count reading it from the database
    with django_assert_num_queries(budget):
        response = client.get(url)
    if label in {"collection.sensitiveprofile", "collection.pendingtask"}:
        assert response.status_code == 403
        return
    assert response.status_code == 200
    body = response.content.decode()
    if model is None:
        assert "Evaluation runs" in body
        return
    total = model._default_manager.count()
    assert total >= world.n, f"{label}: the world should hold at least {world.n} rows"
    assert 'id="result_list"' in body and f"{total} {model._meta.verbose_name_plural}" in body
