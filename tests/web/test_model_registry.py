"""The model registry in the researcher pages, under the secrets rules: configuration never sends a secret away.

Researchers list, add and edit models as the research group's rights allow;
params (the key variable among them) stay the superuser's, and a researcher may
set api_base only on an allowed host (this machine while live models are off, a
host of ATTUNE_PROVIDER_HOSTS when they are on); "test connection" makes one real call
through the replay's litellm path (here to the local fake OpenAI-compatible
server) and reports the answer or the provider's error without a 500.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from attunebench.replay.prompts import call_type_of
from scoring.models import EvaluatedModel

pytestmark = pytest.mark.django_db

BASE_FORM = {
    "name": "openai/local-em",
    "kind": "llm",
    "litellm_model": "openai/local-em",
    "max_concurrency": 4,
    "active": "on",
    "notes": "",
}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_researcher_sees_every_model_with_params_scrubbed(researcher):
    EvaluatedModel.objects.get_or_create(name="baseline:prior", kind="offline")  # installed by a migration
    legacy = EvaluatedModel.objects.create(name="legacy", litellm_model="openai/legacy")
    EvaluatedModel.objects.filter(pk=legacy.pk).update(params={"client_secret": "s3cr3t", "temperature": 0})
    page = _client(researcher).get(reverse("research:models"))
    body = page.content.decode()
    assert page.status_code == 200
    assert "baseline:prior" in body and "legacy" in body
    assert "s3cr3t" not in body and "[hidden]" in body
    detail = _client(researcher).get(reverse("research:model", args=[legacy.pk])).content.decode()
    assert "s3cr3t" not in detail and "[hidden]" in detail


def test_a_researcher_cannot_send_a_model_to_a_host_nobody_allowed(researcher, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS, settings.ATTUNE_PROVIDER_HOSTS = False, []
    client = _client(researcher)
    form_page = client.get(reverse("research:models")).content.decode()
    assert 'name="litellm_model"' in form_page and 'name="api_base"' in form_page
    assert 'name="params"' not in form_page
    posted = client.post(
        reverse("research:models"),
        {**BASE_FORM, "api_base": "https://collector.example.net/v1", "params": json.dumps({"api_key": "sk-x"})},
    )
    assert posted.status_code == 200
    assert "api_base host &#x27;collector.example.net&#x27; is not allowed for a model" in posted.content.decode()
    assert not EvaluatedModel.objects.filter(name="openai/local-em").exists()


def test_a_researcher_registers_a_server_on_this_machine_without_a_superuser(researcher, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS, settings.ATTUNE_PROVIDER_HOSTS = False, []
    posted = _client(researcher).post(
        reverse("research:models"),
        {**BASE_FORM, "api_base": "http://127.0.0.1:8000/v1", "params": json.dumps({"api_key_env": "OPENAI_API_KEY"})},
    )
    model = EvaluatedModel.objects.get(name="openai/local-em")
    assert posted.status_code == 302 and posted["Location"] == reverse("research:model", args=[model.pk])
    assert model.api_base == "http://127.0.0.1:8000/v1" and model.params == {}  # params stay the superuser's


def test_with_live_models_on_a_researcher_keeps_to_the_listed_hosts(researcher, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS, settings.ATTUNE_PROVIDER_HOSTS = True, ["gpu.lab.example"]
    client = _client(researcher)
    refused = client.post(reverse("research:models"), {**BASE_FORM, "api_base": "http://127.0.0.1:8000/v1"})
    assert refused.status_code == 200
    assert "api_base host &#x27;127.0.0.1&#x27; is not allowed for a live model" in refused.content.decode()
    taken = client.post(reverse("research:models"), {**BASE_FORM, "api_base": "https://gpu.lab.example/v1"})
    assert taken.status_code == 302
    assert EvaluatedModel.objects.get(name="openai/local-em").api_base == "https://gpu.lab.example/v1"


def test_a_model_that_reads_a_key_keeps_the_admins_endpoint(researcher, settings):
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    model = EvaluatedModel.objects.create(
        name="local",
        litellm_model="openai/local",
        api_base="http://127.0.0.1:9/v1",
        params={"api_key_env": "OPENAI_API_KEY"},
    )
    client = _client(researcher)
    kept = client.post(
        reverse("research:model", args=[model.pk]),
        {**BASE_FORM, "name": "local", "notes": "our test server", "api_base": "http://127.0.0.1:9/v1"},
    )
    assert kept.status_code == 302
    moved = client.post(
        reverse("research:model", args=[model.pk]),
        {**BASE_FORM, "name": "local", "api_base": "http://127.0.0.1:7777/v1"},
    )
    assert moved.status_code == 200
    assert "only an administrator may change where it is called" in moved.content.decode()
    model.refresh_from_db()
    assert model.notes == "our test server" and model.max_concurrency == 4
    assert model.api_base == "http://127.0.0.1:9/v1" and model.params == {"api_key_env": "OPENAI_API_KEY"}


def test_a_legacy_row_that_breaks_the_rules_says_why_instead_of_failing(researcher):
    model = EvaluatedModel.objects.create(name="old", litellm_model="openai/old")
    EvaluatedModel.objects.filter(pk=model.pk).update(api_base="https://collector.example.net/v1")
    page = _client(researcher).post(
        reverse("research:model", args=[model.pk]),
        {**BASE_FORM, "name": "old", "api_base": "https://collector.example.net/v1"},
    )
    assert page.status_code == 200
    assert "api_base host &#x27;collector.example.net&#x27; is not allowed" in page.content.decode()


def test_a_superuser_sets_api_base_and_params_under_the_same_rules_as_the_admin(site_admin, settings):
    settings.ATTUNE_PROVIDER_HOSTS = []
    client = _client(site_admin)
    refused = client.post(
        reverse("research:models"),
        {**BASE_FORM, "api_base": "https://collector.example.net/v1", "params": json.dumps({"temperature": 0})},
    )
    assert refused.status_code == 200
    assert "&#x27;collector.example.net&#x27; is not allowed" in refused.content.decode()
    own_secret = client.post(
        reverse("research:models"),
        {**BASE_FORM, "api_base": "", "params": json.dumps({"api_key_env": "ATTUNE_SECRET_KEY"})},
    )
    assert own_secret.status_code == 200 and "application&#x27;s own secrets" in own_secret.content.decode()
    stored_key = client.post(reverse("research:models"), {**BASE_FORM, "params": json.dumps({"api_key": "sk-1"})})
    assert "API keys come from the environment only" in stored_key.content.decode()
    assert not EvaluatedModel.objects.filter(name="openai/local-em").exists()
    added = client.post(
        reverse("research:models"),
        {**BASE_FORM, "api_base": "http://127.0.0.1:9/v1", "params": json.dumps({"api_key_env": "OPENAI_API_KEY"})},
    )
    assert added.status_code == 302
    model = EvaluatedModel.objects.get(name="openai/local-em")
    assert model.api_base == "http://127.0.0.1:9/v1" and model.params == {"api_key_env": "OPENAI_API_KEY"}


def test_a_researcher_without_add_or_change_rights_only_reads(researcher, django_user_model):
    from django.contrib.auth.models import Permission

    group = researcher.groups.get()
    group.permissions.remove(*Permission.objects.filter(codename__in=["add_evaluatedmodel", "change_evaluatedmodel"]))
    researcher = django_user_model.objects.get(pk=researcher.pk)  # fresh permission cache
    model = EvaluatedModel.objects.create(name="local", litellm_model="openai/local")
    client = _client(researcher)
    assert 'name="litellm_model"' not in client.get(reverse("research:models")).content.decode()
    assert client.post(reverse("research:models"), BASE_FORM).status_code == 302
    assert client.post(reverse("research:model", args=[model.pk]), {**BASE_FORM, "name": "renamed"}).status_code == 302
    assert not EvaluatedModel.objects.filter(name__in=["renamed", "openai/local-em"]).exists()


def test_test_connection_calls_the_model_through_litellm_and_reports_the_answer(researcher, fake_openai_server):
    model = EvaluatedModel.objects.create(
        name="local",
        litellm_model="openai/fake-em",
        api_base=fake_openai_server.api_base,
        params={"temperature": 0, "api_key_env": "OPENAI_API_KEY"},
    )
    fake_openai_server.rewrite = '{"response": "ok"}'
    answer = _client(researcher).post(reverse("research:model_test", args=[model.pk]))
    body = answer.content.decode()
    assert answer.status_code == 200
    assert 'data-ok="true"' in body and "Connected" in body and "Answered a draft call in the expected format" in body
    assert '<q class="reply">{&quot;response&quot;: &quot;ok&quot;}</q>' in body
    assert 'class="latency"' in body and "1 + 1 tokens" in body
    # The preflight's probe: one real AttuneBench call (a draft), the same the launcher makes before a run.
    (request,) = fake_openai_server.requests
    assert request["model"] == "fake-em" and request["temperature"] == 0
    assert call_type_of(request["messages"]) == "draft"
    assert "sk-test-not-a-real-key" not in body


def test_test_connection_reports_a_provider_error_calmly_without_the_key(researcher, fake_openai_server):
    model = EvaluatedModel.objects.create(
        name="local", litellm_model="openai/fake-em", api_base=fake_openai_server.api_base
    )
    fake_openai_server.fail_next = 1
    answer = _client(researcher).post(reverse("research:model_test", args=[model.pk]))
    body = answer.content.decode()
    assert answer.status_code == 200
    host = fake_openai_server.api_base.split("//")[1].split("/")[0]
    assert 'data-ok="false"' in body and f"500 from {host}" in body and "upstream overloaded" in body
    assert len(fake_openai_server.requests) == 1  # one call: the test does not retry


def test_test_connection_refuses_what_a_run_would_refuse_without_calling(researcher, settings, fake_openai_server):
    model = EvaluatedModel.objects.create(
        name="local", litellm_model="openai/fake-em", api_base=fake_openai_server.api_base
    )
    settings.ATTUNE_ALLOW_LIVE_MODELS = True
    settings.ATTUNE_PROVIDER_HOSTS = []  # live mode: even this machine must be listed
    body = _client(researcher).post(reverse("research:model_test", args=[model.pk])).content.decode()
    assert 'data-ok="false"' in body and "Not called: local: api_base host &#x27;127.0.0.1&#x27; is not allowed" in body
    remote = EvaluatedModel.objects.create(name="openai/gpt-4o-mini", litellm_model="openai/gpt-4o-mini")
    settings.ATTUNE_ALLOW_LIVE_MODELS = False
    body = _client(researcher).post(reverse("research:model_test", args=[remote.pk])).content.decode()
    assert "Not called" in body and "ATTUNE_ALLOW_LIVE_MODELS is not set" in body
    assert fake_openai_server.requests == []


def test_test_connection_hides_a_key_the_provider_echoes(researcher, fake_openai_server, monkeypatch):
    monkeypatch.setenv("GROQ_API_KEY", "gsk-echoed-secret")
    model = EvaluatedModel.objects.create(
        name="local",
        litellm_model="openai/fake-em",
        api_base=fake_openai_server.api_base,
        params={"api_key_env": "GROQ_API_KEY"},
    )
    fake_openai_server.rewrite = "your key is gsk-echoed-secret"
    body = _client(researcher).post(reverse("research:model_test", args=[model.pk])).content.decode()
    assert "gsk-echoed-secret" not in body and "your key is [hidden]" in body


def test_offline_and_human_rows_need_no_connection(researcher):
    offline, _ = EvaluatedModel.objects.get_or_create(name="baseline:prior", kind="offline")
    human = EvaluatedModel.objects.create(name="human:alex", kind="human")
    client = _client(researcher)
    assert (
        "no provider to connect to" in client.post(reverse("research:model_test", args=[offline.pk])).content.decode()
    )
    assert (
        "humans rate through assignments"
        in client.post(reverse("research:model_test", args=[human.pk])).content.decode()
    )


def test_test_connection_is_post_only(researcher):
    model = EvaluatedModel.objects.create(name="local", litellm_model="openai/local")
    assert _client(researcher).get(reverse("research:model_test", args=[model.pk])).status_code == 405
