"""Nothing lost, comparisons that mean something, pages for the public.

Through Django's test client against the real views, services and export:
stale tabs are told so and keep their text, a double click stays quiet,
identical replies are never compared (and the export says so), and the error
pages are the calm, styled ones with the study's crisis resources.
"""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils.html import escape

from annotation import turn_flow as tf
from annotation.models import AlternateResponses, PairwiseComparison
from attunebench import canonical as cf
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Conversation, Turn
from datasets.exchange import SKIPPED_IDENTICAL_KEY, conversation_to_dict
from tests.web.test_participant_flow import Walker, answered_turn, save_answers


@pytest.fixture(autouse=True)
def _quick_and_clean(settings):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()


@pytest.fixture
def walker(client, participant) -> Walker:
    return Walker(client, participant)


def nonce(html: str) -> str:
    return re.search(r'name="form_nonce" value="([^"]+)"', html).group(1)


# ---------------------------------------------------------------------------
# Nothing lost: two tabs, double clicks
# ---------------------------------------------------------------------------


def test_a_second_tab_is_told_it_is_stale_and_a_double_click_is_not(walker):
    tab_one = nonce(walker.body(walker.get(walker.url("consent/"))))
    tab_two = nonce(walker.body(walker.get(walker.url("consent/"))))
    assert tab_one != tab_two
    assert walker.post(walker.url("consent/"), {"agree": "on", "form_nonce": tab_one}).status_code == 302
    # the same page posted again (a double click): quietly shown the current step
    repeat = walker.post(walker.url("consent/"), {"agree": "on", "form_nonce": tab_one})
    assert repeat.status_code == 302 and repeat.url.endswith("/about-you/")
    # the other tab, which never sent: told, calmly, that nothing from it was saved
    stale = walker.post(walker.url("consent/"), {"agree": "on", "form_nonce": tab_two})
    assert stale.status_code == 409
    html = walker.body(stale)
    assert "This page was out of date" in html and "not saved" in html
    assert f'href="{walker.url()}"' in html  # the way to where they are now


def test_a_stale_chat_message_is_kept_for_copying_not_dropped(walker):
    walker.to_chat()
    page = walker.body(walker.get(walker.url("chat/")))
    tab_one, tab_two = nonce(page), nonce(walker.body(walker.get(walker.url("chat/"))))
    sent = walker.post(
        walker.url("chat/send/"),
        {"message": "First tab's message", "turn_number": 1, "form_nonce": tab_one},
        HTTP_ACCEPT="application/json",
    )
    assert sent.status_code == 200
    # a double click of the same message is the same turn, quietly
    again = walker.post(
        walker.url("chat/send/"),
        {"message": "First tab's message", "turn_number": 1, "form_nonce": tab_one},
        HTTP_ACCEPT="application/json",
    )
    assert again.status_code == 200 and again.json()["turn_number"] == 1
    # the second tab's different message for the same turn: refused in words, with the text kept
    other = walker.post(
        walker.url("chat/send/"),
        {"message": "Second tab's words", "turn_number": 1, "form_nonce": tab_two},
        HTTP_ACCEPT="application/json",
    )
    assert other.status_code == 409
    body = other.json()
    assert body["stale"] is True and "was not sent" in body["error"] and body["redirect"] == walker.url()
    # without the script: the calm page, with the text in a box to copy
    page = walker.post(
        walker.url("chat/send/"), {"message": "Second tab's words\nline two", "turn_number": 1, "form_nonce": "x" * 20}
    )
    assert page.status_code == 409
    html = walker.body(page)
    assert "This page was out of date" in html
    assert re.search(r"<textarea[^>]*readonly[^>]*>Second tab&#x27;s words\nline two</textarea>", html)
    assert [t.user_message for t in Turn.objects.all()] == ["First tab's message"]


def test_a_stale_annotation_tab_is_told_and_keeps_the_ideal_reply(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    url = walker.url("turn/1/")
    mood_page = walker.body(walker.get(url))
    stale_nonce = nonce(mood_page)
    walker.post(url, {"step": "mood:0", "no_change": "on", "form_nonce": nonce(walker.body(walker.get(url)))})
    stale = walker.post(url, {"step": "mood:0", "mood_Upset": "on", "form_nonce": stale_nonce})
    assert stale.status_code == 409 and "This page was out of date" in walker.body(stale)
    assert not turn.mood_tags.exists()
    # a stale rewrite page keeps the participant's reply for copying
    post = walker.post(url, {"step": "rewrite:0", "human_edited": "My careful reply", "form_nonce": "n" * 22})
    assert post.status_code == 409
    assert "My careful reply" in walker.body(post)
    assert not AlternateResponses.objects.filter(turn=turn, human_edited="My careful reply").exists()


def test_refused_forms_redirect_so_back_never_resubmits(walker):
    refused = walker.post(walker.url("consent/"), {"sensitive": "on"})
    assert refused.status_code == 302 and refused.url == walker.url("consent/")
    shown = walker.body(walker.get(refused.url))
    assert "To take part, please tick this box" in shown
    # the kept answers are shown once: a reload is a fresh page
    assert "To take part, please tick this box" not in walker.body(walker.get(refused.url))


# ---------------------------------------------------------------------------
# Comparisons that mean something: identical replies are never compared
# ---------------------------------------------------------------------------


def to_rewrite_step(walker: Walker, start: str = "") -> tuple[Turn, str]:
    """Walk one turn to the rewrite page; the turn and the ideal-reply box as the start choice left it."""
    conversation = walker.to_chat()
    walker.send("I feel lost since moving cities.", 1)
    walker.reply(1)
    turn = conversation.turns.get()
    url = walker.url("turn/1/")
    save_answers(walker, url, value="no")
    html = walker.body(walker.get(url + (f"?start={start}" if start else "")))
    box = re.search(r'<textarea name="human_edited"[^>]*>(.*?)</textarea>', html, re.S)
    return turn, unescape(box.group(1))


def test_keeping_the_suggested_rewrite_skips_that_comparison_and_records_it(walker):
    turn, text = to_rewrite_step(walker, start="rewrite")  # the participant starts from the rewrite and keeps it
    url = walker.url("turn/1/")
    saved = walker.post(url, {"step": "rewrite", "human_edited": text, "questions": ["general", "PW4"]})
    assert saved.status_code == 302
    alternates = AlternateResponses.objects.get(turn=turn)
    assert alternates.human_edited == alternates.llm_improved
    turn.refresh_from_db()
    rows = list(PairwiseComparison.objects.filter(turn=turn).order_by("position"))
    assert len(rows) == 4  # two pairs per question, never alternate vs human
    assert all({r.response_a, r.response_b} != {cat.RESPONSE_ALTERNATE, cat.RESPONSE_HUMAN} for r in rows)
    assert turn.skipped_comparisons == [
        {"questionId": q, "responseA": "alternate", "responseB": "human", "reason": "identical"}
        for q in ("general", "PW4")
    ]
    html = walker.body(walker.get(url))
    assert "Not asked: the suggested rewrite and your ideal reply are the same text" in html
    assert html.count('<fieldset class="pair') == 4  # every comparison on the one compare page
    names = set(re.findall(r'name="(winner_\d+)"', html))
    walker.post(url, {"step": "compare", **dict.fromkeys(names, "A")})
    assert Turn.objects.get(pk=turn.pk).annotation_completed_at is not None
    # the canonical object stays valid: skipped pairs are not comparisons (no null winner), and metadata lists them
    data = json.loads(json.dumps(conversation_to_dict(Conversation.objects.get())))
    doc = cf.parse_conversation(data, source="export")
    (exported,) = doc.turns
    assert len(exported.annotations.pairwiseComparisons) == 4
    assert all(c.winner == "A" for c in exported.annotations.pairwiseComparisons)
    expected = [
        {"turnNumber": 1, "questionId": q, "responseA": "alternate", "responseB": "human", "reason": "identical"}
        for q in ("general", "PW4")
    ]
    assert data["metadata"][SKIPPED_IDENTICAL_KEY] == expected
    # the canonical writer keeps it (metadata is open, SPEC 3.1)
    again = cf.to_canonical_dict(doc)
    assert again["metadata"][SKIPPED_IDENTICAL_KEY] == expected


def test_when_every_pair_is_identical_nothing_is_asked_and_the_turn_completes(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation)
    save_answers(walker, walker.url("turn/1/"))
    AlternateResponses.objects.update_or_create(turn=turn, defaults={"llm_improved": turn.llm_response})
    tf.do_save_rewrite(turn, turn.llm_response + "\n", ["general"])
    turn.refresh_from_db()
    assert not PairwiseComparison.objects.filter(turn=turn).exists()
    assert len(turn.skipped_comparisons) == 3 and turn.annotation_completed_at is not None
    assert turn.completeness == cat.TURN_COMPLETE
    assert tf.locate_annotation(turn).step == tf.FINISHED
    assert walker.current().endswith("/chat/")


def test_starting_from_the_original_and_keeping_it_skips_original_vs_human(walker):
    turn, text = to_rewrite_step(walker, start="original")
    walker.post(walker.url("turn/1/"), {"step": "rewrite", "human_edited": text, "questions": ["general"]})
    turn.refresh_from_db()
    assert [(s["responseA"], s["responseB"]) for s in turn.skipped_comparisons] == [("original", "human")]
    assert PairwiseComparison.objects.filter(turn=turn).count() == 2


# ---------------------------------------------------------------------------
# Words and pages for the public
# ---------------------------------------------------------------------------


def test_error_pages_are_calm_styled_and_carry_the_crisis_resources(client, study, participant):
    missing = client.get("/s/not-a-real-link/")
    assert missing.status_code == 404
    html = missing.content.decode()
    assert "We could not find this page" in html and "Your answers are safe" in html
    assert 'name="viewport" content="width=device-width, initial-scale=1"' in html
    assert "participant/participant.css" in html
    assert escape(study.crisis_resources[:60]) in html
    # under a real study link, the study's own header and a way back
    inside = client.get(f"/s/{participant.token}/no-such-page/")
    assert inside.status_code == 404
    assert escape(study.title) in inside.content.decode()
    assert f'href="/s/{participant.token}/"' in inside.content.decode()
    # the API keeps answering JSON
    api = client.get("/api/no-such-thing/")
    assert api.status_code == 404 and api["Content-Type"].startswith("application/json")


def test_a_refused_form_gets_the_calm_csrf_page(participant, study):
    strict = Client(enforce_csrf_checks=True)
    refused = strict.post(f"/s/{participant.token}/consent/", {"agree": "on"})
    assert refused.status_code == 403
    html = refused.content.decode()
    assert "This page had expired, so it was not sent" in html and "Everything you saved before is safe" in html
    assert escape(study.crisis_resources[:60]) in html


def test_a_server_error_page_says_what_is_safe(participant, study, monkeypatch):
    def broken(_token):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(flow, "enter", broken)  # how every participant page starts
    client = Client(raise_request_exception=False)
    failed = client.get(f"/s/{participant.token}/")
    assert failed.status_code == 500
    html = failed.content.decode()
    assert "Sorry, something went wrong on our side" in html and "Everything you saved before this page is safe" in html
    assert escape(study.crisis_resources[:60]) in html


def test_bad_request_and_forbidden_pages_are_styled(rf, study):
    from attune_site import errors

    request = rf.get("/research/")
    request.resolver_match = None
    assert "Something in that request was not right" in errors.bad_request(request).content.decode()
    denied = errors.permission_denied(request)
    assert denied.status_code == 403 and "not available to you" in denied.content.decode()


def test_favicon_is_served(client):
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/x-icon"
    assert b"".join(icon.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an ICO header


def test_chat_bubbles_and_text_boxes_follow_the_writing_direction(walker):
    conversation = walker.to_chat()
    turn = answered_turn(conversation, "مرحبا، أشعر بالقلق\nسطر ثان")
    Turn.objects.filter(pk=turn.pk).update(
        annotation_completed_at=turn.created_at, completeness=cat.TURN_COMPLETE, mood_answered=True
    )
    html = walker.body(walker.get(walker.url("chat/")))
    assert '<div class="bubble-text" dir="auto">مرحبا، أشعر بالقلق<br>سطر ثان</div>' in html
    assert re.search(r'<textarea name="message"[^>]*dir="auto"', html)


def test_warm_up_builds_urls_templates_and_the_risk_screen(settings):
    from attune_site.warmup import warm_up
    from attunebench.safety import _RULES, _Pattern

    timings = warm_up(live_models=False)
    assert set(timings) == {"urls", "templates", "safety"}
    assert all("_compiled" in vars(rule.pattern) for rule in _RULES)  # the first message compiles nothing
    assert all("_compiled" in vars(pattern) for pattern in _Pattern.made)  # nor does any later one
