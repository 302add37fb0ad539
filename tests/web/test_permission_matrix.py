"""Who may open what: every URL pattern against every role, from one table.

The roles are the documented ones (research.access.roles): an anonymous visitor, a
participant holding a study link (never a Django user), a rater (a plain
account), a staff account outside the research group, a researcher (staff in
the research group) and a superuser. Every pattern the URL resolver knows,
admin and API included, is requested once per role with real objects behind
its arguments, and the outcome must match the table. A new URL without an
entry fails ``test_every_url_pattern_has_an_entry``: deciding who may open it is
part of adding it.

Outcomes: ``in`` (the view answered: a page, a redirect elsewhere, 405 for a
POST-only view), ``login`` (sent to a login page), ``denied`` (401/403),
``missing`` (404).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

ROLES = ("anonymous", "participant", "rater", "staff", "researcher", "superuser")


@dataclass(frozen=True)
class Pattern:
    route: str  # the full pattern, e.g. "research/runs/<int:run_id>/"
    name: str  # "namespace:name", or "" for an unnamed pattern
    converters: tuple[str, ...]  # argument names, in order


def _walk(patterns: list[Any], prefix: str = "", namespace: str = "", args: tuple[str, ...] = ()) -> Iterator[Pattern]:
    for p in patterns:
        here = (*args, *p.pattern.regex.groupindex)
        if isinstance(p, URLResolver):
            inner = f"{namespace}{p.namespace}:" if p.namespace else namespace
            yield from _walk(p.url_patterns, prefix + str(p.pattern), inner, here)
        elif isinstance(p, URLPattern):
            name = f"{namespace}{p.name}" if p.name else ""
            yield Pattern(prefix + str(p.pattern), name, here)


def all_patterns() -> list[Pattern]:
    return list(_walk(get_resolver().url_patterns))


# Outcomes per role, in ROLES order.
PUBLIC = ("in", "in", "in", "in", "in", "in")
LINK = PUBLIC  # the study link is the participant's credential: whoever holds it is let in
RESEARCH = ("login", "login", "denied", "denied", "in", "in")
API = ("denied", "denied", "denied", "denied", "in", "in")
SIGNED_IN = ("login", "login", "in", "in", "in", "in")
ASSIGNEE = ("login", "login", "in", "denied", "in", "in")  # a rating page: its rater, and researchers to check it
ADMIN_SITE = ("login", "login", "login", "in", "in", "in")  # any staff account reaches the (empty) index
ADMIN_ONLY = ("login", "login", "login", "denied", "denied", "in")
RESEARCH_ADMIN = ("login", "login", "login", "denied", "in", "in")

# Named patterns outside the admin. Format-suffix variants of an API route share its name.
EXPECTED: dict[str, tuple[str, ...]] = {
    "landing": PUBLIC,
    "healthz": PUBLIC,
    "favicon": PUBLIC,
    "research:login": PUBLIC,
    "research:logout": PUBLIC,
    "research:home": RESEARCH,
    "research:figure": RESEARCH,
    "research:collection": RESEARCH,
    "research:conversation": RESEARCH,
    "research:runs": RESEARCH,
    "research:run_estimate": RESEARCH,
    "research:run": RESEARCH,
    "research:run_progress": RESEARCH,
    "research:run_download": RESEARCH,
    "research:run_cancel": RESEARCH,
    "research:run_resume": RESEARCH,
    "research:run_requeue": RESEARCH,
    "research:run_retry_failed": RESEARCH,
    "research:drilldown": RESEARCH,
    "research:transcript": RESEARCH,
    "research:datasets": RESEARCH,
    "research:dataset": RESEARCH,
    "research:dataset_export": RESEARCH,
    "research:export_status": RESEARCH,
    "research:export_download": RESEARCH,
    "research:human": RESEARCH,
    "research:quality_study": RESEARCH,
    "research:quality_participant": RESEARCH,
    "research:models": RESEARCH,
    "research:model": RESEARCH,
    "research:model_test": RESEARCH,  # POST only: a GET is 405 ("in") for those let through
    "research:token": RESEARCH,
    "research:snapshots": RESEARCH,
    "research:snapshot": RESEARCH,
    "research:snapshot_download": RESEARCH,
    # Study set-up: researchers; status, pool, quotas and preview are POST-only (a GET is 405, "in").
    "research:studies": RESEARCH,
    "research:study_create": RESEARCH,
    "research:study": RESEARCH,
    "research:study_status": RESEARCH,
    "research:study_pool": RESEARCH,
    "research:study_safety": RESEARCH,
    "research:study_quotas": RESEARCH,
    "research:study_preview": RESEARCH,
    "api:study-monitoring": API,
    "api:study-safety-events": API,
    "research:rater_home": SIGNED_IN,
    "research:rate": ASSIGNEE,
    "api:schema": API,
    "api:docs": RESEARCH,  # a page for people: without a login it sends them to sign in, not a JSON 401
    "api:docs-asset": PUBLIC,  # Swagger UI's own static files, no data
    # Operational counts, no participant data: this machine (loopback, unproxied, as the test client is) or the
    # metrics token; any other address is refused (tests/web/test_metrics.py).
    "metrics": PUBLIC,
    "api:leaderboard": API,
    "api:quality-study": API,
    "api:quality-participant": API,
    "api:analyses": API,
    "api:api-root": API,
    "api:conversation-list": API,
    "api:conversation-detail": API,
    "api:model-list": API,
    "api:model-detail": API,
    "api:dataset-version-list": API,
    "api:dataset-version-detail": API,
    "api:dataset-version-export": API,
    "api:export-list": API,
    "api:export-detail": API,
    "api:export-download": API,
    "api:run-list": API,
    "api:run-detail": API,
    "api:run-cancel": API,
    "api:run-resume": API,
    "api:run-requeue": API,
    "api:run-retry_failed": API,
    "api:run-conversations": API,
    "api:run-scores": API,
    "api:run-download": API,
    "api:run-transcript": API,
    "api:agreement": API,
    "api:snapshot-list": API,
    "api:snapshot-detail": API,
    "api:token": API,
    "api:participant-erasure": API,  # DELETE only: a GET is 405 ("in") for those let through
    "api:not-found": ("missing", "missing", "missing", "missing", "missing", "missing"),  # JSON 404 for all
    "collection:join": LINK,
    "collection:resume": LINK,
    "collection:consent": LINK,
    "collection:profile": LINK,
    "collection:pre_panas": LINK,
    "collection:topic": LINK,
    "collection:chat": LINK,
    "collection:chat_send": LINK,
    "collection:chat_reply": LINK,
    "collection:chat_finish": LINK,
    "collection:post_panas": LINK,
    "collection:survey": LINK,
    "collection:done": LINK,
    "collection:withdraw": LINK,
    "collection:not_taking_part": LINK,
    "collection:platform_return": LINK,
    # The distress protocol: the panel's choices, a break, stopped for wellbeing.
    "collection:safety_choice": LINK,
    "collection:taking_a_break": LINK,
    "collection:stopped": LINK,
    # The world's study takes no platform entries: a calm page for everyone, whoever asks.
    "collection:enter": ("missing", "missing", "missing", "missing", "missing", "missing"),
    "collection:annotation:annotate": LINK,
    "collection:annotation:review": LINK,
    # Django admin's own pages.
    "admin:index": ADMIN_SITE,
    "admin:login": PUBLIC,
    "admin:logout": PUBLIC,
    "admin:password_change": ADMIN_SITE,
    "admin:password_change_done": ADMIN_SITE,
    "admin:jsi18n": ADMIN_SITE,
    # Asked without a field to complete it refuses every account; a real lookup needs the model's view right.
    "admin:autocomplete": ("login", "login", "login", "denied", "denied", "denied"),
    "admin:view_on_site": ("login", "login", "login", "missing", "missing", "missing"),  # no model has a site page
    "admin:app_list": ("login", "login", "login", "missing", "in", "in"),  # staff outside the group see no app
    "": ("login", "login", "login", "missing", "missing", "missing"),  # the catch-all: unknown admin URLs
}
# admin/<app>/<model>/<id>/ only redirects to the change page (checked on its own), whoever asks.
BARE_OBJECT_URL = ("login", "login", "login", "in", "in", "in")

# Each model in the admin: what the research group may do there (research.roles.RESEARCH_GROUP_PERMISSIONS).
# Staff outside the group get nothing; superusers everything.
ADMIN_MODELS: dict[str, str] = {
    "auth.group": "",
    "auth.user": "",
    "knox.authtoken": "",  # API tokens (digests): admins only
    "collection.study": "view add change",  # studies are set up on the research pages
    "collection.studymodel": "view add change delete",  # a study's model pool
    "collection.studyquota": "view add change delete",  # a study's quotas
    "collection.participant": "view",
    "collection.consent": "view",
    "collection.participantprofile": "view",
    "collection.sensitiveprofile": "",  # diagnoses: admins only
    "collection.originalmodel": "view",
    "collection.topic": "view",
    "collection.conversation": "view",
    "collection.turn": "view",
    "collection.panassurvey": "view",
    "collection.panasitemresponse": "view",
    "collection.conversationwideanswers": "view",
    "collection.fourbranchrating": "view",
    "collection.livecall": "view",  # read-only: written by live calls only
    "collection.attentioncheck": "view",  # read-only: written by the participant pages only
    "collection.qualitydecision": "view",  # read-only: decisions are made on the quality pages
    "collection.safetyevent": "view",  # read-only: written by the participant pages only
    "collection.pendingtask": "",  # tasks kept while the broker was away: administrators only, read-only
    "annotation.pagetime": "view",  # read-only: written by the annotation pages only
    "annotation.moodtag": "view",
    "annotation.binaryjudgement": "view",
    "annotation.alternateresponses": "view",
    "annotation.pairwisecomparison": "view",
    "datasets.datasetversion": "view add",
    "datasets.exportjob": "view add",
    "scoring.evaluatedmodel": "view add change",
    "scoring.evaluationrun": "view add change",
    "scoring.runconversation": "view",
    "scoring.conversationscore": "view",
    "scoring.runscore": "view",
    "scoring.modelcallcache": "view",
    "scoring.calltranscript": "view",  # read-only: written by replays only
    "research.humanassignment": "view add change delete",
    # django-axes' login attempts and lockouts: admins only.
    "axes.accessattempt": "",
    "axes.accesslog": "",
    "axes.accessfailurelog": "",
    "research.resultsnapshot": "view",  # frozen: made on the research pages, read-only in the admin
    "research.erasurerecord": "view add",  # "add" = may erase (the participant action); records are immutable
}
# Admin pages nobody may use whatever their permissions: an erasure record is written only by an erasure.
ADMIN_CLOSED = ("login", "login", "login", "denied", "denied", "denied")
ADMIN_PAGE_EXCEPTIONS = {
    "admin:research_erasurerecord_add": ADMIN_CLOSED,
    "admin:research_erasurerecord_delete": ADMIN_CLOSED,
    # Written by the study itself (live calls, attention checks, page times) or on the quality pages (decisions).
    "admin:collection_livecall_add": ADMIN_CLOSED,
    "admin:collection_attentioncheck_add": ADMIN_CLOSED,
    "admin:collection_qualitydecision_add": ADMIN_CLOSED,
    "admin:collection_safetyevent_add": ADMIN_CLOSED,
    "admin:annotation_pagetime_add": ADMIN_CLOSED,
    "admin:collection_pendingtask_add": ADMIN_CLOSED,  # kept by collection.task_queue only
}
# Admin pages nobody may use, superusers included: login attempts are recorded by django-axes, never typed in.
ADMIN_NOBODY = {
    ("axes.accessattempt", "add"),
    ("axes.accesslog", "add"),
    ("axes.accessfailurelog", "add"),
    ("research.resultsnapshot", "add"),
    ("scoring.calltranscript", "add"),
    ("research.resultsnapshot", "delete"),
}
ADMIN_ACTION_NEEDS = {
    "changelist": "view",
    "change": "view",
    "history": "view",
    "add": "add",
    "delete": "delete",
    "password_change": "change",  # auth.user only
}


def _admin_model(pattern: Pattern) -> tuple[Any, str] | None:
    """(model, action) for an admin model pattern, named or not."""
    parts = pattern.route.split("/")
    for model in admin.site._registry:
        meta = model._meta
        if parts[:3] == ["admin", meta.app_label, meta.model_name]:
            if pattern.name:
                return model, pattern.name.removeprefix(f"admin:{meta.app_label}_{meta.model_name}_")
            return model, "change"  # <path:object_id>/ redirects to the change page
    return None


def expected(pattern: Pattern) -> tuple[str, ...] | None:
    found = _admin_model(pattern)
    if found is None:
        return EXPECTED.get(pattern.name)
    model, action = found
    if not pattern.name:
        return BARE_OBJECT_URL
    if pattern.name in ADMIN_PAGE_EXCEPTIONS:
        return ADMIN_PAGE_EXCEPTIONS[pattern.name]
    label = model._meta.label_lower
    if (label, action) in ADMIN_NOBODY:
        return ("login", "login", "login", "denied", "denied", "denied")
    if label not in ADMIN_MODELS or action not in ADMIN_ACTION_NEEDS:
        return None
    return RESEARCH_ADMIN if ADMIN_ACTION_NEEDS[action] in ADMIN_MODELS[label].split() else ADMIN_ONLY


def test_every_url_pattern_has_an_entry() -> None:
    missing = [p.route for p in all_patterns() if expected(p) is None]
    assert not missing, f"URL patterns with no entry in the permission matrix: {missing}"
    assert set(ADMIN_MODELS) == {m._meta.label_lower for m in admin.site._registry}


# ---------------------------------------------------------------------------
# The world every URL is requested in
# ---------------------------------------------------------------------------


@pytest.fixture
def world(scored_runs, researcher, site_admin, rater, participant, export_dir, django_user_model):
    from django.contrib.contenttypes.models import ContentType

    from collection.models import Consent, Conversation, SensitiveProfile
    from datasets.models import ExportJob
    from datasets.versions import do_freeze_dataset_version, run_export_job
    from research.access.api_tokens import do_issue_token
    from research.models import HumanAssignment
    from scoring.models import ModelCallCache

    staff = django_user_model.objects.create_user("stan", password="staff-pass-123", is_staff=True)
    version = do_freeze_dataset_version("matrix-v1", user=researcher)
    job = ExportJob.objects.create(dataset_version=version, fmt="json", created_by=researcher)
    run_export_job(job.pk)
    conversation = Conversation.objects.filter(pk__in=version.conversations.values("pk")).first()
    assert conversation is not None
    assignment = HumanAssignment.objects.create(rater=rater, conversation=conversation, assigned_by=researcher)
    do_issue_token(researcher)
    ModelCallCache.objects.create(key="k" * 64, model="synth:strong", response="{}")
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    login_row = {"user_agent": "matrix", "ip_address": "127.0.0.1", "username": "nobody", "http_accept": "*/*"}
    AccessAttempt.objects.create(
        **login_row, path_info="/research/login/", get_data="", post_data="", failures_since_start=1
    )
    AccessLog.objects.create(**login_row, path_info="/research/login/")
    AccessFailureLog.objects.create(**login_row, path_info="/research/login/")
    from research.models import ErasureRecord

    ErasureRecord.objects.create(via="command", rows_deleted={"collection.Participant": 1})
    from scoring.models import CallTranscript, RunConversation

    CallTranscript.objects.create(
        run_conversation=RunConversation.objects.first(), sequence=0, call_type="draft", role="em", model="matrix"
    )
    from collection.models import OriginalModel, StudyModel, StudyQuota, Topic

    StudyModel.objects.create(study=participant.study, original_model=OriginalModel.objects.order_by("pk").first())
    StudyQuota.objects.create(study=participant.study, kind="topic", topic=Topic.objects.order_by("pk").first(), cap=3)
    from annotation.models import PageTime
    from collection.models import AttentionCheck, LiveCall, QualityDecision, Turn

    first_turn = Turn.objects.filter(conversation=conversation).order_by("turn_number").first()
    PageTime.objects.create(turn=first_turn, page="answers", seconds=12.0)
    AttentionCheck.objects.create(
        participant=conversation.participant,
        turn=first_turn,
        place="answers",
        instructed="Yes",
        given="Yes",
        passed=True,
    )
    QualityDecision.objects.create(participant=conversation.participant, decision="include")
    from collection.models import SafetyEvent

    event = SafetyEvent.objects.create(
        study=participant.study,
        participant=conversation.participant,
        turn=first_turn,
        level="urgent",
        source="message",
        signals=["plan"],
        shown="panel",
    )
    LiveCall.objects.create(study=participant.study, litellm_model="openai/matrix", cost_usd=0.01)
    from collection.models import PendingTask

    PendingTask.objects.create(task="annotation.prepare_rewrite", args=[first_turn.pk], error="matrix")
    if not Consent.objects.exists():
        Consent.objects.create(participant=conversation.participant, version="v1")
    if not SensitiveProfile.objects.exists():
        SensitiveProfile.objects.create(participant=conversation.participant, diagnoses=["example"])
    from research.results.evaluation import evaluation_data
    from research.results.snapshots import do_freeze_snapshot

    snapshot = do_freeze_snapshot("matrix-snapshot", "", evaluation_data(), "spec", researcher)
    run = scored_runs[0]
    values = {
        "snapshot_id": snapshot.pk,
        "model_id": run.evaluated_model_id,
        "run_id": run.pk,
        "version_id": version.pk,
        "job_id": job.pk,
        "assignment_id": assignment.pk,
        "conversation_id": conversation.conversation_id,
        "name": "leaderboard",
        "ext": "csv",
        "path": "swagger-ui-dist/swagger-ui.css",
        "format": "json",
        "token": participant.token,
        "slug": participant.study.slug,
        "pseudonym": participant.pseudonym,
        "turn_number": 1,
        "event_id": event.pk,
        "url": "nowhere/",
        "content_type_id": ContentType.objects.get_for_model(Conversation).pk,
        "object_id": conversation.pk,
        "app_label": "collection",
    }
    api_pk = {
        "model": run.evaluated_model_id,
        "dataset-version": version.pk,
        "export": job.pk,
        "run": run.pk,
        "snapshot": snapshot.pk,
    }
    clients = {role: Client() for role in ROLES}
    clients["participant"].get(f"/s/{participant.token}/")  # holds the link and its session
    for role, user in (("rater", rater), ("staff", staff), ("researcher", researcher), ("superuser", site_admin)):
        clients[role].force_login(user)
    return values, api_pk, clients


def _url(pattern: Pattern, values: dict[str, Any], api_pk: dict[str, int], prefer: Any = None) -> str:
    """The pattern's address with real objects behind it; an admin object leading to ``prefer`` (a participant)
    is chosen over the first row when there is one."""
    from django.urls import reverse

    from collection.admin_withdrawal import participant_lookup

    kwargs = {arg: values[arg] for arg in pattern.converters if arg not in ("pk", "id")}
    if pattern.name == "api:not-found":
        kwargs["path"] = "no-such-endpoint/"  # the API's catch-all takes any path ending in a slash
    if "pk" in pattern.converters:
        resource = pattern.name.removeprefix("api:").rsplit("-", 1)[0]
        kwargs["pk"] = api_pk[resource.removesuffix("-version") + "-version" if "dataset" in resource else resource]
    found = _admin_model(pattern)
    if found is not None:
        rows = found[0]._default_manager.order_by("pk")
        lookup = participant_lookup(found[0])
        if prefer is not None and lookup is not None and rows.filter(**{lookup or "pk": prefer.pk}).exists():
            rows = rows.filter(**{lookup or "pk": prefer.pk})
        first = rows.values_list("pk", flat=True).first()
        assert first is not None, f"no {found[0]._meta.label} in the world"
        kwargs.update({arg: first for arg in ("object_id", "id") if arg in pattern.converters})
    if pattern.name:
        return reverse(pattern.name, kwargs=kwargs)
    route = "/" + pattern.route.removesuffix("(?P<url>.*)$")
    for arg, value in kwargs.items():
        route = route.replace(f"<path:{arg}>", str(value))
    return route + ("nowhere/" if "url" in kwargs else "")


def _outcome(response: Any) -> str:
    status = response.status_code
    assert status < 500, f"server error {status}"
    if status in (301, 302) and "/login/" in response.get("Location", ""):
        return "login"
    if status in (401, 403):
        return "denied"
    if status == 404:
        return "missing"
    return "in"


# Every URL pattern times every role: minutes on a loaded 2-core machine, more than the suite's default limit.
@pytest.mark.timeout(1200)
@pytest.mark.django_db
def test_every_role_gets_what_the_table_says(world) -> None:
    values, api_pk, clients = world
    wrong = []
    for pattern in all_patterns():
        want = expected(pattern)
        assert want is not None, pattern.route
        url = _url(pattern, values, api_pk)
        got = tuple(_outcome(clients[role].get(url)) for role in ROLES)
        if got != want:
            wrong.append(f"{url} ({pattern.name or pattern.route}): expected {want}, got {got}")
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(wrong)


# Pages that may still name a withdrawn participant's conversation or pseudonym (never their words), and why.
WITHDRAWN_NAMED: dict[str, str] = {
    # A frozen snapshot is immutable (its content hash covers the manifest): it keeps the ids it compared.
    "admin:research_resultsnapshot_change": "a frozen snapshot's manifest lists the conversation ids it compared",
    "api:snapshot-detail": "a frozen snapshot's manifest lists the conversation ids it compared",
    # Erasure requests are handled on the participant list (its action), so the pseudonym stays findable.
    "admin:collection_participant_changelist": "the erasure action lives on the participant list",
    "admin:collection_participant_change": "the erasure action lives on the participant list",
    "admin:collection_participant_history": "the erasure action lives on the participant list",
}


def _markers(participant: Any, conversation: Any) -> tuple[list[str], list[str]]:
    """What would give a withdrawn participant's data away: their ids, and the words only they wrote, as a
    page (HTML-escaped) or the API (JSON-escaped) would write them."""
    import html
    import json

    from collection.models import Turn
    from datasets.pseudonyms import export_pseudonym

    texts = [
        text
        for text in conversation.turns.values_list("user_message", flat=True)
        if len(text) >= 20 and not Turn.objects.filter(user_message=text).exclude(conversation=conversation).exists()
    ]
    ids = [conversation.conversation_id, participant.pseudonym, export_pseudonym(participant.pseudonym)]

    def forms(values: list[str]) -> list[str]:
        return sorted({form for text in values for form in (text, html.escape(text), json.dumps(text)[1:-1])})

    return forms(ids), forms(texts)


@pytest.mark.timeout(1200)
@pytest.mark.django_db
def test_no_page_admin_or_api_shows_a_withdrawn_participants_data_to_anyone_but_superusers(
    world, django_capture_on_commit_callbacks
) -> None:
    """The withdrawal column of the matrix, derived like the rest: every URL pattern the resolver knows is
    requested by every role but the superuser, with the withdrawn participant's own objects behind its
    arguments (their conversation, pseudonym, assignment, safety event; in the admin, a row of theirs for
    every registered model that leads to a participant). No answer may carry their ids or their words, no
    admin change page of their rows opens, and no admin list holds them. Superusers still see them, marked."""
    from collection.admin_withdrawal import participant_lookup
    from collection.models import Conversation
    from collection.study_flow import do_withdraw

    values, api_pk, clients = world
    conversation = Conversation.objects.get(conversation_id=values["conversation_id"])
    gone = conversation.participant
    with django_capture_on_commit_callbacks(execute=True):
        do_withdraw(gone)
    values = {**values, "pseudonym": gone.pseudonym}
    ids, words = _markers(gone, conversation)
    assert words, "the withdrawn conversation has no words of its own to look for"
    leaked = []
    for pattern in all_patterns():
        url = _url(pattern, values, api_pk, prefer=gone)
        found = _admin_model(pattern)
        lookup = participant_lookup(found[0]) if found else None
        for role in ROLES[:-1]:
            response = clients[role].get(url)
            assert response.status_code < 500, (url, role)
            body = b"".join(response) if response.streaming else response.content
            text = body.decode("utf-8", "replace")
            named = pattern.name in WITHDRAWN_NAMED
            shown = [marker for marker in (words if named else ids + words) if marker in text]
            if shown:
                leaked.append(f"{url} as {role}: {shown[0][:40]!r}")
            if found is None or lookup is None or response.status_code != 200:
                continue
            model, action = found
            if named:
                continue
            theirs = model._default_manager.filter(**{lookup or "pk": gone.pk})
            if action == "changelist" and response.context and "cl" in response.context:
                if response.context["cl"].queryset.filter(pk__in=theirs.values("pk")).exists():
                    leaked.append(f"{url} as {role}: the list holds their rows")
            elif action in ("change", "history", "delete") and theirs.exists():
                leaked.append(f"{url} as {role}: their row's {action} page opened")
    assert not leaked, f"{len(leaked)} leak(s) of a withdrawn participant's data:\n" + "\n".join(leaked)
    # Superusers, who handle erasure requests, still reach a withdrawn conversation in the admin, marked.
    admin_page = clients["superuser"].get(f"/admin/collection/conversation/{conversation.pk}/change/")
    assert admin_page.status_code == 200
    listed = clients["superuser"].get("/admin/collection/conversation/").content.decode()
    assert conversation.conversation_id in listed and "column-participant_withdrawn" in listed


@pytest.mark.django_db
def test_researchers_are_the_research_group_not_every_staff_account(django_user_model) -> None:
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from research.access.roles import RESEARCH_GROUP, is_researcher

    call_command("create_researcher", "rosa", "--password", "quiet-harbour-lamp-7", stdout=io.StringIO())
    rosa = django_user_model.objects.get(username="rosa")
    assert is_researcher(rosa)
    staff = django_user_model.objects.create_user("stan", is_staff=True)
    assert not is_researcher(django_user_model.objects.get(pk=staff.pk))
    staff.groups.add(Group.objects.get(name=RESEARCH_GROUP))
    assert is_researcher(django_user_model.objects.get(pk=staff.pk))
    rosa.is_active = False
    assert not is_researcher(rosa)
    boss = django_user_model.objects.create_superuser("boss", "b@example.org", "boss-pass-123")
    assert is_researcher(boss)


@pytest.mark.django_db
def test_the_admin_never_shows_a_participants_study_token(participant, researcher, site_admin) -> None:
    from django.urls import reverse

    for user in (researcher, site_admin):
        client = Client()
        client.force_login(user)
        for url in (
            reverse("admin:collection_participant_changelist"),
            reverse("admin:collection_participant_change", args=[participant.pk]),
        ):
            response = client.get(url)
            assert response.status_code == 200
            assert participant.token not in response.content.decode(), (user.username, url)
