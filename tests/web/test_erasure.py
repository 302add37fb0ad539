"""Erasure of a participant who took the study through the web: every table, from every entry point.

The participant walks the whole study through the pages (consent to the
post-conversation survey: page times, attention checks and annotations are
written as the pages write them), a researcher records a quality decision on the
quality page, the data is exported and assigned to a rater; then erasure must
leave no row that leads to them, whichever way it was asked for.
"""

from __future__ import annotations

import io
import re

import pytest
from django.apps import apps
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import models
from django.test import Client

from collection.models import AttentionCheck, Conversation, Participant
from datasets.pseudonyms import export_pseudonym
from datasets.tasks import do_request_export
from datasets.versions import do_freeze_dataset_version
from research.models import ErasureRecord
from research.privacy import erasure
from research.raters.human_baseline import do_assign
from tests.web.test_participant_flow import Walker, every_answer

pytestmark = [pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _quick_and_clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()


class StampingWalker(Walker):
    """Sends each annotation page back with the stamp the page carried, as a browser does (page times)."""

    def annotate(self, turn_number: int, moods: dict | None = None, questions: tuple[str, ...] = ("general",)) -> None:
        url = self.url(f"turn/{turn_number}/")
        html = self.body(self.get(url))
        ids = re.findall(r'name="observed_(B\d+)"', html)
        shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
        data = {"step": "answers", "shown": shown, "page_stamp": stamp_of(html), "no_change": "on"}
        data.update(every_answer(list(dict.fromkeys(ids)), "yes", "no"))
        assert self.post(url, data).status_code == 302
        html = self.body(self.get(url))
        data = {"step": "rewrite", "human_edited": f"My ideal reply {turn_number}", "questions": list(questions)}
        assert self.post(url, {**data, "page_stamp": stamp_of(html)}).status_code == 302
        html = self.body(self.get(url))
        names = set(re.findall(r'name="(winner_\d+)"', html))
        data = {"step": "compare", "page_stamp": stamp_of(html), **dict.fromkeys(names, "B")}
        assert self.post(url, data).status_code == 302


def stamp_of(html: str) -> str:
    return re.search(r'name="page_stamp" value="([^"]+)"', html).group(1)


@pytest.fixture
def web_participant(client, participant, researcher, rater, export_dir, django_capture_on_commit_callbacks):
    """A participant with everything the web flow and the research side write about them."""
    walker = StampingWalker(client, participant)
    walker.to_chat()
    for number in range(1, participant.study.min_turns + 1):
        walker.turn(number)
    walker.finish()
    conversation = Conversation.objects.get(participant=participant)
    assert conversation.status == Conversation.Status.COMPLETE
    # An attention check is written when its page is answered; make sure the flow wrote at least one row
    # of every table that points at a participant, so erasure is tried against all of them.
    research = Client()
    research.force_login(researcher)
    shown = export_pseudonym(participant.pseudonym)
    decided = research.post(
        f"/research/quality/{participant.study.slug}/{shown}/",
        {"decision": "exclude", "reason": "other", "note": "checking erasure"},
    )
    assert decided.status_code == 302, decided.content.decode()[:500]
    research.post(f"/research/quality/{participant.study.slug}/{shown}/", {"decision": "include"})
    version = do_freeze_dataset_version("erasure-v1", user=researcher)
    with django_capture_on_commit_callbacks(execute=True):
        do_request_export(version, "jsonl", researcher)
    do_assign(conversation, rater, researcher)
    return participant


def rows_leading_to(participant_pk: int, conversation_pks: list[int]) -> dict[str, int]:
    """Counts, table by table, of rows that still lead to the participant (for an assertion message)."""
    leads, order = erasure.personal_models()
    found: dict[type[models.Model], set] = {Participant: {participant_pk}}
    for model in order:
        if model is Participant:
            continue
        pks: set = set()
        for name, parent in leads[model].items():
            if found.get(parent):
                pks.update(model._default_manager.filter(**{f"{name}__in": found[parent]}).values_list("pk", flat=True))
        found[model] = pks
    found[Participant] = set(Participant.objects.filter(pk=participant_pk).values_list("pk", flat=True))
    return {model._meta.label: len(pks) for model, pks in found.items() if pks}


def test_every_relation_that_leads_to_a_participant_is_erased_or_declared_kept():
    """Walks Django's model graph: a new table pointing at a participant, a conversation, a turn or an
    annotation (directly or through another) is erased unless KEPT says why, and a kept row never blocks
    the erasure of what it points at."""
    leads, order = erasure.personal_models()
    labels = {model._meta.label for model in order}
    for label in (
        "collection.Consent",
        "collection.Turn",
        "collection.AttentionCheck",
        "collection.QualityDecision",
        "annotation.PageTime",
        "annotation.MoodTag",
        "scoring.CallTranscript",
        "research.HumanAssignment",
        "datasets.DatasetVersion_conversations",
    ):
        assert label in labels, f"{label} leads to a participant but the schema walk missed it"
    assert set(erasure.KEPT) <= labels, "KEPT names a model that does not lead to a participant"
    erased = set(erasure.erased_models())
    for model in order:
        if model._meta.label in erasure.KEPT:
            for name in leads[model]:
                field = model._meta.get_field(name)
                assert field.null and field.remote_field.on_delete is models.SET_NULL, (
                    f"{model._meta.label}.{name}: a kept row must let go of the erased row (null, SET_NULL)"
                )
        else:
            assert model in erased
    # Every model of the project's apps is either outside the walk or in it; nothing is left undecided.
    for model in apps.get_models(include_auto_created=True):
        if model in leads:
            assert model._meta.label in erasure.KEPT or model in erased


def test_a_web_participant_is_erased_from_the_command_and_leaves_no_row(
    web_participant, django_capture_on_commit_callbacks
):
    participant = web_participant
    conversation_pks = list(Conversation.objects.filter(participant=participant).values_list("pk", flat=True))
    before = rows_leading_to(participant.pk, conversation_pks)
    for label in ("annotation.PageTime", "collection.QualityDecision", "datasets.DatasetVersion_conversations"):
        assert before.get(label), f"the web flow wrote no {label} row: the test would not try it"
    exported_id = export_pseudonym(participant.pseudonym)
    out = io.StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("erase", exported_id, "--yes", stdout=out)
    assert "Audit record #" in out.getvalue()
    assert rows_leading_to(participant.pk, conversation_pks) == {}
    record = ErasureRecord.objects.get()
    for label, count in before.items():
        assert record.rows_deleted[label] == count, label
    assert "collection.LiveCall" not in record.rows_deleted  # kept: costs without text
    assert participant.pseudonym not in str(record.rows_deleted) and exported_id not in str(record.rows_deleted)
    # Asked again, nothing changes and the answer says why.
    with pytest.raises(CommandError, match="No participant is known"):
        call_command("erase", exported_id, "--yes", stdout=out)
    assert ErasureRecord.objects.count() == 1


def test_a_web_participant_is_erased_from_the_admin_action(
    web_participant, researcher, django_capture_on_commit_callbacks
):
    participant = web_participant
    conversation_pks = list(Conversation.objects.filter(participant=participant).values_list("pk", flat=True))
    client = Client()
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/admin/collection/participant/", {"action": "erase_participants", "_selected_action": [participant.pk]}
        )
    assert response.status_code == 302
    assert rows_leading_to(participant.pk, conversation_pks) == {}
    assert ErasureRecord.objects.get().via == "admin"


def test_a_failed_erasure_leaves_the_participant_withdrawn(web_participant, monkeypatch):
    participant = web_participant

    def refuse(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(erasure, "_delete_rows_leading_to", refuse)
    with pytest.raises(RuntimeError):
        erasure.do_erase_participant(participant)
    participant.refresh_from_db()
    assert participant.withdrawn_at is not None
    assert set(Conversation.objects.filter(participant=participant).values_list("status", flat=True)) == {
        Conversation.Status.WITHDRAWN
    }
    assert not ErasureRecord.objects.exists()
    monkeypatch.undo()
    erasure.do_erase_participant(participant)  # a retry completes the erasure
    assert not Participant.objects.filter(pk=participant.pk).exists()
    assert not AttentionCheck.objects.filter(participant_id=participant.pk).exists()


def test_a_web_participant_is_erased_through_the_api_and_a_repeat_changes_nothing(
    web_participant, researcher, django_capture_on_commit_callbacks
):
    participant = web_participant
    conversation_pks = list(Conversation.objects.filter(participant=participant).values_list("pk", flat=True))
    before = rows_leading_to(participant.pk, conversation_pks)
    shown = export_pseudonym(participant.pseudonym)
    api = Client()
    api.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete(f"/api/participants/{shown}/")
    assert response.status_code == 200, response.content.decode()[:500]
    body = response.json()
    assert body["erased"] is True and body["participant"] == shown
    assert rows_leading_to(participant.pk, conversation_pks) == {}
    record = ErasureRecord.objects.get()
    assert (record.via, record.erased_by, body["audit_record"]) == ("api", researcher, record.pk)
    assert {label: body["rows_deleted"][label] for label in before} == before
    # Asked again (a script that retries): nothing stored, nothing changed, and the answer says so.
    again = api.delete(f"/api/participants/{shown}/")
    assert again.status_code == 200
    assert again.json()["erased"] is False and "nothing is stored" in again.json()["detail"]
    assert ErasureRecord.objects.count() == 1


def test_the_api_names_an_unknown_participant_in_a_json_404(researcher):
    api = Client()
    api.force_login(researcher)
    response = api.delete("/api/participants/someone-else/")
    assert response.status_code == 404
    assert "No participant is known as 'someone-else'" in response.json()["detail"]


def test_only_accounts_with_the_erasure_right_may_erase_through_the_api(participant, rater, django_user_model):
    """Anonymous: 401; a rater, a staff account outside the research group, a research-group member whose
    erasure right was taken away: 403. The participant is untouched by every one of them."""
    shown = export_pseudonym(participant.pseudonym)
    assert Client().delete(f"/api/participants/{shown}/").status_code == 401
    staff = django_user_model.objects.create_user("stan", password="staff-pass-123", is_staff=True)
    from django.contrib.auth.models import Permission

    from research.access.roles import do_make_researcher

    limited = django_user_model.objects.create_user("lim", password="limited-pass-123")
    do_make_researcher(limited)
    limited.groups.get().permissions.remove(Permission.objects.get(codename="add_erasurerecord"))
    for user in (rater, staff, django_user_model.objects.get(pk=limited.pk)):
        client = Client()
        client.force_login(user)
        response = client.delete(f"/api/participants/{shown}/")
        assert response.status_code == 403, user.username
        assert response.json()["detail"], user.username
    assert Participant.objects.filter(pk=participant.pk).exists()
    assert not ErasureRecord.objects.exists()


def test_the_erasure_endpoint_is_in_the_openapi_schema(researcher):
    api = Client()
    api.force_login(researcher)
    schema = api.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/participants/{pseudonym}/"]["delete"]
    assert operation["operationId"] == "participant_erase"
    assert set(operation["responses"]) >= {"200", "401", "403", "404"}
    assert schema["components"]["schemas"]["ErasureOutcome"]["properties"]["erased"]["type"] == "boolean"
