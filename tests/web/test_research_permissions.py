"""Permission matrix: every researcher page and API endpoint against every persona.

Personas: anonymous, a participant holding only a study-link session, a plain
logged-in account (a human-baseline rater), a researcher (staff) and an admin
(superuser). Participants and anonymous visitors are sent to the log-in page
(pages) or refused (API); a non-staff account gets 403; researchers and admins
get in.
"""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("export_dir")]

ANONYMOUS, PARTICIPANT, RATER, RESEARCHER, ADMIN = "anonymous", "participant", "rater", "researcher", "admin"
PERSONAS = (ANONYMOUS, PARTICIPANT, RATER, RESEARCHER, ADMIN)
STAFF = {RESEARCHER, ADMIN}


@pytest.fixture
def world(scored_runs, researcher, site_admin, rater, study):
    """Scored runs, a frozen dataset version with a finished export, and a human-baseline assignment."""
    from collection.models import Conversation
    from datasets.models import ExportJob
    from datasets.versions import do_freeze_dataset_version, run_export_job
    from research.raters.human_baseline import do_assign

    version = do_freeze_dataset_version("perm-v1", user=researcher)
    job = ExportJob.objects.create(dataset_version=version, fmt="jsonl", progress_total=version.conversation_count)
    run_export_job(job.pk)
    conversation = Conversation.objects.order_by("conversation_id").first()
    assignment = do_assign(conversation, rater, researcher)
    return {
        "run": scored_runs[0],
        "version": version,
        "job": job,
        "conversation": conversation.conversation_id,
        "assignment": assignment,
    }


def client_for(persona: str, request: pytest.FixtureRequest) -> Client:
    client = Client()
    if persona == PARTICIPANT:
        from collection.study_flow import do_enrol

        participant = do_enrol(request.getfixturevalue("study"))
        response = client.get(f"/s/{participant.token}/")
        assert response.status_code in (200, 302)
    elif persona == RATER:
        client.force_login(request.getfixturevalue("rater"))
    elif persona == RESEARCHER:
        client.force_login(request.getfixturevalue("researcher"))
    elif persona == ADMIN:
        client.force_login(request.getfixturevalue("site_admin"))
    return client


def researcher_pages(w: dict) -> list[str]:
    run, conversation = w["run"].pk, w["conversation"]
    return [
        "/research/",
        "/research/?weighting=equal&sort=emotion_tracking&dir=asc",
        "/research/collection/",
        f"/research/conversations/{conversation}/",
        "/research/runs/",
        f"/research/runs/{run}/",
        f"/research/runs/{run}/progress/",
        f"/research/runs/{run}/conversations/{conversation}/",
        "/research/figures/leaderboard.csv",
        "/research/figures/capability_profile.svg",
        "/research/figures/independence.csv",
        "/research/figures/discrimination.csv",
        "/research/figures/by_topic.csv",
        "/research/figures/by_group.csv",
        "/research/figures/turn_position.csv",
        "/research/datasets/",
        f"/research/datasets/{w['version'].pk}/",
        f"/research/exports/{w['job'].pk}/status/",
        f"/research/exports/{w['job'].pk}/download/",
        "/research/human/",
    ]


def researcher_posts(w: dict) -> list[tuple[str, dict]]:
    run = w["run"].pk
    return [
        ("/research/runs/estimate/", {"modes": ["default"]}),
        ("/research/runs/", {"modes": ["default"]}),
        (f"/research/runs/{run}/cancel/", {}),
        (f"/research/runs/{run}/resume/", {}),
        ("/research/datasets/", {"name": ""}),
        (f"/research/datasets/{w['version'].pk}/export/", {"fmt": "nonsense"}),
        ("/research/human/", {}),
    ]


def api_gets(w: dict) -> list[str]:
    run = w["run"].pk
    return [
        "/api/schema/",
        "/api/docs/",
        "/api/conversations/",
        f"/api/conversations/{w['conversation']}/",
        "/api/models/",
        f"/api/models/{w['run'].evaluated_model_id}/",
        "/api/dataset-versions/",
        f"/api/dataset-versions/{w['version'].pk}/",
        "/api/exports/",
        f"/api/exports/{w['job'].pk}/",
        f"/api/exports/{w['job'].pk}/download/",
        "/api/runs/",
        f"/api/runs/{run}/",
        f"/api/runs/{run}/scores/",
        "/api/leaderboard/",
        "/api/analyses/",
    ]


def api_posts(w: dict) -> list[tuple[str, dict]]:
    run = w["run"].pk
    return [
        ("/api/runs/", {"models": ["synth:strong"], "modes": ["default"], "dry_run": True}),
        (f"/api/runs/{run}/cancel/", {}),
        (f"/api/runs/{run}/resume/", {}),
        ("/api/dataset-versions/", {"name": "from-api"}),
        (f"/api/dataset-versions/{w['version'].pk}/exports/", {"fmt": "jsonl"}),
    ]


def is_login_redirect(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith("/research/login/")


@pytest.mark.parametrize("persona", PERSONAS)
def test_researcher_pages_admit_only_staff(persona, world, request):
    client = client_for(persona, request)
    for url in researcher_pages(world):
        response = client.get(url)
        if persona in STAFF:
            assert response.status_code == 200, (persona, url, response.status_code)
        elif persona == RATER:
            assert response.status_code == 403, (persona, url, response.status_code)
        else:
            assert is_login_redirect(response), (persona, url, response.status_code)


@pytest.mark.parametrize("persona", PERSONAS)
def test_researcher_actions_refuse_everyone_but_staff(persona, world, request):
    from datasets.models import DatasetVersion
    from research.models import HumanAssignment
    from scoring.models import EvaluationRun

    client = client_for(persona, request)
    before = (EvaluationRun.objects.count(), DatasetVersion.objects.count(), HumanAssignment.objects.count())
    for url, data in researcher_posts(world):
        response = client.post(url, data)
        if persona in STAFF:
            assert response.status_code in (200, 302) and not is_login_redirect(response), (persona, url)
        elif persona == RATER:
            assert response.status_code == 403, (persona, url, response.status_code)
        else:
            assert is_login_redirect(response), (persona, url, response.status_code)
    # invalid forms and state checks mean nothing was created, whoever asked
    assert (EvaluationRun.objects.count(), DatasetVersion.objects.count(), HumanAssignment.objects.count()) == before


@pytest.mark.parametrize("persona", PERSONAS)
def test_api_admits_only_staff(persona, world, request):
    client = client_for(persona, request)
    for url in api_gets(world):
        response = client.get(url)
        if persona in STAFF:
            assert response.status_code == 200, (persona, url, response.status_code)
        elif url == "/api/docs/" and not response.wsgi_request.user.is_authenticated:
            assert is_login_redirect(response), (persona, url, response.status_code)  # a person: sign in first
        else:
            assert response.status_code in (401, 403), (persona, url, response.status_code)
    for url, data in api_posts(world):
        response = client.post(url, data, content_type="application/json")
        if persona in STAFF:
            assert response.status_code not in (401, 403), (persona, url, response.status_code)
        else:
            assert response.status_code in (401, 403), (persona, url, response.status_code)


@pytest.mark.parametrize("persona", PERSONAS)
def test_rater_pages_need_a_login_and_the_right_rater(persona, world, request):
    client = client_for(persona, request)
    assignment = world["assignment"]
    home = client.get("/research/rate/")
    step = client.get(f"/research/rate/{assignment.pk}/")
    answer = client.post(f"/research/rate/{assignment.pk}/", {"turn_number": 1, "draft": "hello"})
    if persona in (ANONYMOUS, PARTICIPANT):
        assert is_login_redirect(home) and is_login_redirect(step) and is_login_redirect(answer)
    elif persona == RATER:
        assert home.status_code == 200 and step.status_code == 200 and answer.status_code == 302
    else:
        # staff may look at any assignment but never answer in someone else's name
        assert home.status_code == 200 and step.status_code == 200 and answer.status_code == 404


def test_api_accepts_token_auth(world, researcher):
    from research.access.api_tokens import do_issue_token

    token = do_issue_token(researcher)
    response = Client().get("/api/runs/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    assert response.json()["count"] == 4  # three model runs and the rater's human:ravi run


def test_admin_lists_every_model_of_the_four_apps(world, site_admin):
    from django.apps import apps
    from django.contrib import admin

    client = Client()
    client.force_login(site_admin)
    for label in ("collection", "annotation", "scoring", "research"):
        for model in apps.get_app_config(label).get_models():
            assert admin.site.is_registered(model), model
            url = f"/admin/{label}/{model._meta.model_name}/"
            assert client.get(url).status_code == 200, url
            assert client.get(url + "?q=a").status_code == 200, url


def test_research_group_can_read_collected_data_but_not_change_it(researcher):
    assert researcher.has_perm("collection.view_conversation")
    assert researcher.has_perm("scoring.add_evaluationrun")
    assert not researcher.has_perm("collection.change_conversation")
    assert not researcher.has_perm("annotation.delete_moodtag")
