"""Withdrawal reaches the Django admin and the rater screens, the last surfaces that still showed the data."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client

from annotation.models import MoodTag
from collection.admin_withdrawal import HidesWithdrawnRows, participant_lookup
from collection.models import Conversation, PanasSurvey, Participant, Turn
from collection.study_flow import do_withdraw
from datasets.exchange import exportable_conversations
from research.raters.human_baseline import do_assign
from scoring.models import RunConversation

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def withdrawn(sample_conversations, researcher, rater, django_capture_on_commit_callbacks):
    """Two sample participants assigned to a rater; the first then withdraws."""
    conversations = list(
        exportable_conversations()
        .filter(status=Conversation.Status.COMPLETE, participant__isnull=False)
        .order_by("conversation_id")[:2]
    )
    gone, kept = conversations
    do_assign(gone, rater, researcher)
    do_assign(kept, rater, researcher)
    with django_capture_on_commit_callbacks(execute=True):
        do_withdraw(gone.participant)
    return gone, kept


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_every_admin_of_data_that_leads_to_a_participant_hides_withdrawn_rows():
    """A new admin of such a model cannot forget withdrawal: the registry is walked, not a list kept by hand."""
    for model in apps.get_models():
        if not admin.site.is_registered(model) or model is Participant:
            continue
        if participant_lookup(model) is not None:
            assert isinstance(admin.site.get_model_admin(model), HidesWithdrawnRows), model._meta.label


def test_staff_see_no_withdrawn_data_in_admin_lists_searches_or_change_pages(withdrawn, researcher):
    gone, kept = withdrawn
    client = signed_in(researcher)
    turn = gone.turns.order_by("turn_number").first()
    pages = {
        "/admin/collection/conversation/": (gone.conversation_id, kept.conversation_id),
        f"/admin/collection/turn/?q={turn.user_message[:30]}": (turn.user_message[:30], None),
        "/admin/research/humanassignment/": (gone.conversation_id, kept.conversation_id),
    }
    for url, (absent, present) in pages.items():
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert absent not in body.replace(f"?q={turn.user_message[:30]}", ""), url
        if present:
            assert present in body, url
    # every list of rows that lead to the withdrawn participant counts only the others' rows
    for model, kept_rows in (
        (MoodTag, MoodTag.objects.exclude(turn__conversation=gone)),
        (Turn, Turn.objects.exclude(conversation=gone)),
        (PanasSurvey, PanasSurvey.objects.exclude(conversation=gone)),
        (RunConversation, RunConversation.objects.exclude(conversation=gone)),
    ):
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.context["cl"].result_count == kept_rows.count() < model.objects.count(), url
    for url in (f"/admin/collection/conversation/{gone.pk}/change/", f"/admin/collection/turn/{turn.pk}/change/"):
        response = client.get(url, follow=True)
        assert turn.user_message not in response.content.decode(), url
        assert "doesn’t exist" in response.content.decode() or response.status_code == 404, url
    # a kept participant's turn is still there
    kept_turn = Turn.objects.filter(conversation=kept).first()
    assert client.get(f"/admin/collection/turn/{kept_turn.pk}/change/").status_code == 200


def test_superusers_still_see_withdrawn_data_marked(withdrawn, site_admin):
    gone, _ = withdrawn
    body = signed_in(site_admin).get("/admin/collection/conversation/").content.decode()
    assert gone.conversation_id in body
    assert "column-participant_withdrawn" in body
    assert signed_in(site_admin).get(f"/admin/collection/conversation/{gone.pk}/change/").status_code == 200


def test_a_withdrawn_conversation_leaves_the_rater_list_and_the_human_baseline_page(withdrawn, researcher, rater):
    gone, kept = withdrawn
    rater_page = signed_in(rater).get("/research/rate/").content.decode()
    assert gone.conversation_id not in rater_page and kept.conversation_id in rater_page
    human_page = signed_in(researcher).get("/research/human/").content.decode()
    assert gone.conversation_id not in human_page and kept.conversation_id in human_page
