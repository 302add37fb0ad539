"""The human-baseline page shows the core's rater agreement."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_page_shows_emotion_alpha_over_all_items_with_its_interval(researcher, sample_conversations, django_user_model):
    """Two raters tag Nervous on turns 1-11 and Upset vs Afraid on turn 12.

    Over all 20 items per turn (240 units): alpha = 1 - 479 * 4 / (2 * 456 * 24) = 0.912
    (arithmetic in tests/core/test_agreement.py); the old per-tagged-word units gave -0.042.
    """
    from collection.models import Conversation
    from research.raters.human_baseline import human_run
    from scoring.models import RunConversation

    conversation = Conversation.objects.get(conversation_id="conv-grief-02")
    for name, last in (("a", "Upset"), ("b", "Afraid")):
        tags = [["Nervous"]] * 11 + [[last]]
        output = {
            "conversationId": conversation.conversation_id,
            "turns": [
                {"turnNumber": n, "em_emotion_tags": [{"emotion": w, "intensity": 3} for w in words]}
                for n, words in enumerate(tags, start=1)
            ],
        }
        user = django_user_model.objects.create_user(name)
        RunConversation.objects.create(run=human_run(user), conversation=conversation, status="done", output=output)
    client = Client()
    client.force_login(researcher)
    page = client.get("/research/human/")
    assert page.status_code == 200
    agreement = page.context["agreement"]
    assert round(agreement.emotion.alpha, 3) == 0.912 and agreement.emotion.units == 240
    assert agreement.emotion.ci_low is not None and agreement.emotion.ci_low <= agreement.emotion.alpha
    html = page.content.decode()
    row = html[html.index('id="agreement-emotion"') :]
    assert "<strong>0.912</strong>" in row[: row.index("</tr>")]
    assert "Nervous" in html[html.index('id="agreement-items"') :]
    # the API reports the same figures, in its documented shape
    from tests.web.test_research_api import assert_conforms

    response = client.get("/api/agreement/")
    body = response.json()
    assert body["emotion"]["alpha"] == agreement.emotion.alpha and body["emotion"]["units"] == 240
    assert body["per_item"]["Nervous"]["alpha"] == 1.0 and body["raters"] == ["human:a", "human:b"]
    assert_conforms("GET", "/api/agreement/", response)
