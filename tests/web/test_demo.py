"""The demo command leaves a populated platform and is safe to run twice."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from collection.models import Conversation, Participant
from scoring.models import EvaluationRun, RunScore

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_sets_everything_up_and_is_idempotent(capsys):
    call_command("demo", "--no-serve")
    out = capsys.readouterr().out
    assert Conversation.objects.filter(source="imported").count() >= 12
    runs = EvaluationRun.objects.all()
    assert sorted((r.evaluated_model.name, r.mode) for r in runs) == sorted(
        (m, mode)
        for m in ("baseline:random", "baseline:prior", "baseline:lexicon")
        for mode in ("default", "omniscient")
    )
    assert all(r.status == "done" and r.conversations_done == r.conversations_total > 0 for r in runs)
    assert RunScore.objects.count() == 6
    assert all(0 <= s.composite_score <= 100 for s in RunScore.objects.all())
    user = get_user_model().objects.get(username="researcher")
    assert user.is_staff and user.groups.filter(name="research").exists()
    password = out.split("password: ")[1].split()[0]
    assert user.check_password(password)
    assert "/s/" in out and "not a certificate" in out

    link = out.split("Participant study link: ")[1].split()[0]
    participants = Participant.objects.count()
    call_command("demo", "--no-serve")
    out = capsys.readouterr().out
    # A second start prints the same login and the same link, and both still work.
    again = out.split("Participant study link: ")[1].split()[0]
    assert again == link and Participant.objects.count() == participants
    assert out.split("password: ")[1].split()[0] == password
    user.refresh_from_db()
    assert user.check_password(password)
    client = Client()
    assert client.get(link.removeprefix("http://localhost:8000")).status_code == 302
    assert EvaluationRun.objects.count() == 6
    assert "0 imported" in out and "already scored" in out


def test_demo_prints_new_logins_when_the_old_ones_stopped_working(capsys):
    call_command("demo", "--no-serve")
    out = capsys.readouterr().out
    password = out.split("password: ")[1].split()[0]
    link = out.split("Participant study link: ")[1].split()[0]
    user = get_user_model().objects.get(username="researcher")
    user.set_password("changed-by-the-researcher-1")
    user.save()
    Participant.objects.update(link_revoked_at=timezone.now())

    call_command("demo", "--no-serve")
    out = capsys.readouterr().out
    new_password = out.split("password: ")[1].split()[0]
    new_link = out.split("Participant study link: ")[1].split()[0]
    assert new_password != password and new_link != link
    user.refresh_from_db()
    assert user.check_password(new_password)
    assert Client().get(new_link.removeprefix("http://localhost:8000")).status_code == 302
