"""Secrets never leave by configuration.

A registry row may name where its model is served (api_base) and which
environment variable holds its key (params.api_key_env); neither may send one
of the application's own secrets, or a provider key, to a host nobody listed.
"""

from __future__ import annotations

import json
import re

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from scoring import replay_service
from scoring.models import EvaluatedModel
from tests.web.test_settings_env import _settings_process

pytestmark = pytest.mark.django_db


def _row(**fields) -> EvaluatedModel:
    return EvaluatedModel(name=fields.pop("name", "openai/em"), litellm_model="openai/em", **fields)


@pytest.mark.parametrize("name", ["ATTUNE_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "PATH"])
def test_a_model_naming_anything_but_a_provider_key_is_refused_at_save(name):
    with pytest.raises(ValidationError) as refused:
        _row(params={"api_key_env": name}).full_clean()
    assert f"api_key_env {name!r}" in refused.value.message_dict["params"][0]


def test_a_provider_key_variable_from_the_setting_is_accepted(settings):
    _row(params={"api_key_env": "OPENAI_API_KEY", "temperature": 0}).full_clean()
    settings.ATTUNE_PROVIDER_KEY_ENV = ["MY_GATEWAY_KEY"]
    _row(params={"api_key_env": "MY_GATEWAY_KEY"}).full_clean()
    with pytest.raises(ValidationError, match="OPENAI_API_KEY"):
        _row(params={"api_key_env": "OPENAI_API_KEY"}).full_clean()


def test_a_stored_key_is_refused_by_validation_and_by_the_database():
    with pytest.raises(ValidationError, match="API keys come from the environment only"):
        _row(params={"api_key": "sk-live"}).full_clean()
    with transaction.atomic(), pytest.raises(IntegrityError):
        EvaluatedModel.objects.create(name="keyed", litellm_model="openai/em", params={"api_key": "sk-live"})


def test_api_base_must_be_on_this_machine_or_a_listed_host(settings):
    settings.ATTUNE_PROVIDER_HOSTS = []
    _row(api_base="http://127.0.0.1:8001/v1").full_clean()
    with pytest.raises(ValidationError) as refused:
        _row(api_base="https://collector.example.net/v1").full_clean()
    assert "'collector.example.net' is not allowed" in refused.value.message_dict["api_base"][0]
    with pytest.raises(ValidationError, match="not an http"):
        _row(api_base="file:///etc/passwd").full_clean()
    settings.ATTUNE_PROVIDER_HOSTS = ["gateway.example.org"]
    _row(api_base="https://gateway.example.org/v1").full_clean()


def test_replay_refuses_an_unlisted_host_in_live_mode_and_loopback_only_offline(settings):
    local = EvaluatedModel.objects.create(name="local", litellm_model="openai/local", api_base="http://127.0.0.1:9/v1")
    remote = EvaluatedModel.objects.create(
        name="remote", litellm_model="openai/remote", api_base="https://collector.example.net/v1"
    )
    settings.ATTUNE_PROVIDER_HOSTS = []
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    assert replay_service.em_spec(local).api_base == "http://127.0.0.1:9/v1"
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    with pytest.raises(replay_service.ReplayRefused, match=re.escape("remote: api_base host 'collector.example.net'")):
        replay_service.em_spec(remote)
    with pytest.raises(
        replay_service.ReplayRefused, match=re.escape("local: api_base host '127.0.0.1' is not allowed")
    ):
        replay_service.em_spec(local)
    settings.ATTUNE_PROVIDER_HOSTS = ["collector.example.net"]
    assert replay_service.em_spec(remote).api_base == "https://collector.example.net/v1"


def test_replay_refuses_a_row_whose_key_variable_went_off_the_list(settings):
    row = EvaluatedModel.objects.create(
        name="local",
        litellm_model="openai/local",
        api_base="http://127.0.0.1:9/v1",
        params={"api_key_env": "GROQ_API_KEY"},
    )
    assert replay_service.em_spec(row).params["api_key_env"] == "GROQ_API_KEY"
    settings.ATTUNE_PROVIDER_KEY_ENV = ["OPENAI_API_KEY"]
    with pytest.raises(replay_service.ReplayRefused, match="api_key_env 'GROQ_API_KEY' is not a provider key"):
        replay_service.em_spec(row)


def test_settings_refuse_an_own_secret_on_the_key_list(tmp_path):
    code = "import django; django.setup()"
    result = _settings_process(tmp_path, code, ATTUNE_PROVIDER_KEY_ENV="OPENAI_API_KEY, DATABASE_URL,ATTUNE_SECRET_KEY")
    assert result.returncode != 0
    assert "ATTUNE_PROVIDER_KEY_ENV lists DATABASE_URL, ATTUNE_SECRET_KEY" in result.stderr
    shown = "from django.conf import settings as s; print(s.ATTUNE_PROVIDER_KEY_ENV, s.ATTUNE_PROVIDER_HOSTS)"
    result = _settings_process(
        tmp_path, f"{code}; {shown}", ATTUNE_PROVIDER_KEY_ENV="A_KEY,B_KEY", ATTUNE_PROVIDER_HOSTS="Gateway.Example.org"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['A_KEY', 'B_KEY'] ['gateway.example.org']"


def test_admin_lets_only_superusers_change_where_and_with_which_key(researcher, site_admin):
    row = EvaluatedModel.objects.create(
        name="local", litellm_model="openai/local", api_base="http://127.0.0.1:9/v1", params={"temperature": 0}
    )
    url = f"/admin/scoring/evaluatedmodel/{row.pk}/change/"
    as_researcher = Client()
    as_researcher.force_login(researcher)
    body = as_researcher.get(url).content.decode()
    assert 'name="api_base"' not in body and 'name="params"' not in body
    assert "http://127.0.0.1:9/v1" in body  # shown, read-only
    # A researcher's post cannot move the model elsewhere: read-only fields are ignored.
    form = {"name": "local", "kind": "llm", "litellm_model": "openai/local", "max_concurrency": 8, "active": "on"}
    posted = as_researcher.post(url, {**form, "api_base": "https://collector.example.net/v1", "params": "{}"})
    assert posted.status_code == 302
    row.refresh_from_db()
    assert row.api_base == "http://127.0.0.1:9/v1" and row.params == {"temperature": 0}

    as_admin = Client()
    as_admin.force_login(site_admin)
    assert 'name="params"' in as_admin.get(url).content.decode()
    refused = as_admin.post(
        url,
        {**form, "api_base": "http://127.0.0.1:9/v1", "params": json.dumps({"api_key_env": "ATTUNE_SECRET_KEY"})},
    )
    assert refused.status_code == 200 and "application&#x27;s own secrets" in refused.content.decode()
    row.refresh_from_db()
    assert row.params == {"temperature": 0}


def test_api_and_admin_never_show_a_stored_secret(researcher):
    row = EvaluatedModel.objects.create(name="legacy", litellm_model="openai/legacy")
    # A row saved before the rules existed (the constraint covers api_key; this name slips past it).
    EvaluatedModel.objects.filter(pk=row.pk).update(params={"client_secret": "s3cr3t", "temperature": 0})
    client = Client()
    client.force_login(researcher)
    api = client.get(reverse("api:model-detail", args=[row.pk]))
    assert api.status_code == 200
    assert api.json()["params"] == {"client_secret": "[hidden]", "temperature": 0}
    admin_page = client.get(f"/admin/scoring/evaluatedmodel/{row.pk}/change/").content.decode()
    assert "s3cr3t" not in admin_page and "[hidden]" in admin_page


def test_the_api_cannot_create_or_change_a_model(researcher):
    row = EvaluatedModel.objects.create(name="local", litellm_model="openai/local", api_base="http://127.0.0.1:9/v1")
    client = Client()
    client.force_login(researcher)
    moved = {"name": "local", "api_base": "https://collector.example.net/v1", "params": {"api_key_env": "PATH"}}
    assert client.post(reverse("api:model-list"), moved, content_type="application/json").status_code == 405
    detail = reverse("api:model-detail", args=[row.pk])
    assert client.patch(detail, moved, content_type="application/json").status_code == 405
    row.refresh_from_db()
    assert row.api_base == "http://127.0.0.1:9/v1" and row.params == {}


def test_researchers_cannot_add_or_move_the_participant_facing_model(researcher):
    """collection.OriginalModel (the model participants chat with) is view-only for the research group:
    where it is served is the admin's decision alone, as for evaluated models."""
    from collection.models import OriginalModel

    row = OriginalModel.objects.create(
        name="chat-model", provider="acme", litellm_model="openai/chat-model", api_base="http://127.0.0.1:9/v1"
    )
    client = Client()
    client.force_login(researcher)
    change = f"/admin/collection/originalmodel/{row.pk}/change/"
    page = client.get(change)
    assert page.status_code == 200 and 'name="api_base"' not in page.content.decode()  # shown read-only
    moved = {
        "name": "chat-model",
        "provider": "acme",
        "litellm_model": "openai/chat-model",
        "api_base": "https://collector.example.net/v1",
        "active": "on",
    }
    assert client.post(change, moved).status_code == 403
    assert client.get("/admin/collection/originalmodel/add/").status_code == 403
    assert client.post("/admin/collection/originalmodel/add/", {**moved, "name": "other"}).status_code == 403
    row.refresh_from_db()
    assert row.api_base == "http://127.0.0.1:9/v1"
    assert OriginalModel.objects.count() == 1
