"""Study-link tokens: stored hashed, shown once, never in the admin; links expire and can be revoked."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from collection.models import Participant, hash_token
from collection.study_flow import LINK_GONE, access_participant, do_issue_link

pytestmark = pytest.mark.django_db


def test_only_the_hash_of_a_token_is_stored(participant):
    assert participant.token and participant.token_hash == hash_token(participant.token)
    stored = Participant.objects.filter(pk=participant.pk).values()[0]
    assert participant.token not in {str(v) for v in stored.values()}
    assert Client().get(reverse("collection:resume", args=[participant.token])).status_code == 302
    assert Client().get(reverse("collection:resume", args=[participant.token_hash])).status_code == 404


def test_the_invite_command_prints_each_link_once_and_it_works(study):
    out = io.StringIO()
    call_command("invite", "--study", study.slug, "--count", "2", stdout=out)
    links = [line.split("\t")[1] for line in out.getvalue().splitlines()]
    assert len(links) == 2
    for link in links:
        token = link.rstrip("/").rsplit("/", 1)[1]
        assert access_participant(token).token == token
        assert not Participant.objects.filter(token_hash=token).exists()


def test_a_link_expires_after_the_studys_lifetime(participant, study):
    token = participant.token
    study.link_valid_days = 30
    study.save()
    now = timezone.now()
    Participant.objects.filter(pk=participant.pk).update(link_issued_at=now - timedelta(days=29, hours=23))
    assert access_participant(token).pk == participant.pk
    Participant.objects.filter(pk=participant.pk).update(link_issued_at=now - timedelta(days=30, minutes=1))
    response = Client().get(reverse("collection:resume", args=[token]))
    assert response.status_code == 404
    study.link_valid_days = 0  # never expires
    study.save()
    assert access_participant(token).pk == participant.pk


def test_the_admin_revokes_and_reissues_links_and_never_shows_them(participant, site_admin):
    token = participant.token
    client = Client()
    client.force_login(site_admin)
    change = client.get(reverse("admin:collection_participant_change", args=[participant.pk])).content.decode()
    assert token not in change and participant.token_hash not in change
    changelist = reverse("admin:collection_participant_changelist")
    client.post(changelist, {"action": "revoke_links", "_selected_action": [participant.pk]})
    refused = Client().get(reverse("collection:consent", args=[token]))
    assert refused.status_code == 404
    response = client.post(changelist, {"action": "issue_links", "_selected_action": [participant.pk]}, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    link = next(m for m in shown if m.startswith(participant.pseudonym))
    new_token = link.rstrip("/").rsplit("/", 1)[1]
    assert new_token != token
    assert Client().get(reverse("collection:resume", args=[new_token])).status_code == 302
    assert Client().get(reverse("collection:resume", args=[token])).status_code == 404
    # Shown once: the admin pages show neither afterwards.
    change = client.get(reverse("admin:collection_participant_change", args=[participant.pk])).content.decode()
    assert new_token not in change


def test_the_link_gone_message_names_what_happened(participant):
    Participant.objects.filter(pk=participant.pk).update(link_revoked_at=timezone.now())
    with pytest.raises(Exception, match="expired or was withdrawn"):
        access_participant(participant.token)
    assert "ask them for a new one" in LINK_GONE


def test_reissuing_a_link_is_what_the_demo_prints(participant):
    old = participant.token
    new = do_issue_link(participant)
    assert new != old and access_participant(new).pk == participant.pk


def test_the_migration_hashes_existing_plaintext_tokens(participant):
    """The data step of collection 0005: a plaintext token stored before it works afterwards, as a hash."""
    import importlib

    migration = importlib.import_module("collection.migrations.0005_study_link_tokens_hashed")
    created = participant.created_at - timedelta(days=3)
    Participant.objects.filter(pk=participant.pk).update(token_hash="plain-old-token-abc", created_at=created)
    migration.hash_existing_tokens(apps, None)
    row = Participant.objects.get(pk=participant.pk)
    assert row.token_hash == hash_token("plain-old-token-abc")
    assert row.link_issued_at == created
    assert access_participant("plain-old-token-abc").pk == participant.pk
