"""Study monitoring: every figure against numbers derived by hand from a fixed study.

The study (all times UTC, 2026-03-01 = D1):

- P1 joins D1 09:00, consents 09:02, starts on topic A 09:10, annotates turn 1 09:12:00-09:13:00
  ("I feel stuck at work lately") and turn 2 09:15:00-09:15:03 ("ok": short and fast), post-chat mood
  09:20:00, finishes 09:25:00.
- P2 joins D1 10:00, consents 10:01, starts on topic A 10:05, annotates turn 1 10:06:00-10:06:40, still chatting.
- P3 joins D2 08:00, consents 08:03, gives a profile, stops before the pre-chat mood.
- P4 joins D2 12:00 and never consents.
- P5 joins D3 07:00, consents 07:04, starts on topic B 07:10, annotates turn 1 07:11-07:12, post-chat
  mood 07:20, finishes 07:30.
- P6 joins D1 and withdraws (a short, fast turn that must not count); a preview participant finishes
  on topic A with a short message (never counted).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from attunebench import catalogue as cat
from collection.models import (
    Consent,
    Conversation,
    LiveCall,
    OriginalModel,
    PanasSurvey,
    Participant,
    ParticipantProfile,
    Study,
    StudyQuota,
    Topic,
    Turn,
)
from research.studies.monitoring import study_monitoring

pytestmark = pytest.mark.django_db


def at(day: int, hh: int, mm: int, ss: int = 0) -> datetime:
    return datetime(2026, 3, day, hh, mm, ss, tzinfo=UTC)


def person(
    study: Study, joined: datetime, consented: datetime | None = None, profile: bool = True, **extra
) -> Participant:
    p = Participant.objects.create(study=study, created_at=joined, **extra)
    if consented is not None:
        Consent.objects.create(participant=p, version=study.consent_version, consented_at=consented)
        if profile:
            ParticipantProfile.objects.create(participant=p)
    return p


def chat(
    p: Participant,
    topic: Topic,
    model: OriginalModel,
    started: datetime,
    turns,
    status="in_progress",
    post=None,
    done=None,
) -> Conversation:
    c = Conversation.objects.create(
        conversation_id=f"conv-mon-{p.pk}",
        participant=p,
        original_model=model,
        topic=topic,
        status=status,
        started_at=started,
        completed_at=done,
    )
    for n, (text, a, b) in enumerate(turns, start=1):
        Turn.objects.create(
            conversation=c,
            turn_number=n,
            user_message=text,
            llm_response="reply",
            completeness=cat.TURN_COMPLETE,
            mood_answered=True,
            annotation_started_at=a,
            annotation_completed_at=b,
        )
    if post is not None:
        PanasSurvey.objects.create(conversation=c, kind=PanasSurvey.Kind.POST, completed_at=post)
    return c


@pytest.fixture
def monitored(db) -> Study:
    study = Study.objects.create(
        slug="mon", title="Monitored", information="i", crisis_resources="c", live_call_budget=120, live_calls_used=30
    )
    a = Topic.objects.create(category="Work", subtopic="A")
    b = Topic.objects.create(category="Work", subtopic="B")
    model = OriginalModel.objects.create(name="om", alias="om-mon", provider="offline")
    StudyQuota.objects.create(study=study, kind="topic", topic=a, cap=5)
    StudyQuota.objects.create(study=study, kind="topic", topic=b, cap=1)

    p1 = person(study, at(1, 9, 0), at(1, 9, 2))
    chat(
        p1,
        a,
        model,
        at(1, 9, 10),
        [("I feel stuck at work lately", at(1, 9, 12), at(1, 9, 13)), ("ok", at(1, 9, 15), at(1, 9, 15, 3))],
        status="complete",
        post=at(1, 9, 20),
        done=at(1, 9, 25),
    )
    p2 = person(study, at(1, 10, 0), at(1, 10, 1))
    chat(p2, a, model, at(1, 10, 5), [("Work has been hard", at(1, 10, 6), at(1, 10, 6, 40))])
    person(study, at(2, 8, 0), at(2, 8, 3))
    person(study, at(2, 12, 0))
    p5 = person(study, at(3, 7, 0), at(3, 7, 4))
    chat(
        p5,
        b,
        model,
        at(3, 7, 10),
        [("Long enough message here", at(3, 7, 11), at(3, 7, 12))],
        status="complete",
        post=at(3, 7, 20),
        done=at(3, 7, 30),
    )
    p6 = person(study, at(1, 11, 0), at(1, 11, 1), withdrawn_at=at(1, 12, 0))
    chat(p6, a, model, at(1, 11, 5), [("no", at(1, 11, 6), at(1, 11, 6, 1))], status="withdrawn")
    preview = person(study, at(1, 13, 0), at(1, 13, 1), is_test=True)
    chat(
        preview,
        a,
        model,
        at(1, 13, 5),
        [("hi", at(1, 13, 6), at(1, 13, 6, 1))],
        status="complete",
        post=at(1, 13, 10),
        done=at(1, 13, 12),
    )
    return study


def test_headline_figures_and_spend(monitored) -> None:
    m = study_monitoring(monitored)
    assert (m.participants, m.withdrawn, m.completed, m.completion_rate) == (6, 1, 2, 0.4)
    assert (m.spend.live_calls_used, m.spend.live_call_budget, m.spend.remaining, m.spend.percent_used) == (
        30,
        120,
        90,
        25.0,
    )


def test_progress_per_day(monitored) -> None:
    rows = [(d.day, d.joined, d.started, d.completed, d.completed_total) for d in study_monitoring(monitored).by_day]
    assert rows == [("2026-03-01", 2, 2, 1, 1), ("2026-03-02", 2, 0, 0, 1), ("2026-03-03", 1, 1, 1, 2)]


def test_completion_and_drop_off_by_step(monitored) -> None:
    rows = [(s.step, s.finished, s.stopped_here, s.rate) for s in study_monitoring(monitored).funnel]
    assert rows == [
        ("consent", 4, 1, 0.8),  # P4 never consented
        ("profile", 4, 0, 0.8),
        ("pre_panas", 3, 1, 0.6),  # P3 stopped before the pre-chat mood
        ("topic", 3, 0, 0.6),
        ("chat", 2, 1, 0.4),  # P2 is still chatting
        ("post_panas", 2, 0, 0.4),
        ("survey", 2, 0, 0.4),
    ]


def test_median_time_per_step(monitored) -> None:
    times = {t.step: (t.median_seconds, t.n) for t in study_monitoring(monitored).step_times}
    assert times == {
        "consent": (150.0, 4),  # 120, 60, 180, 240
        "before_chat": (360.0, 3),  # 480, 240, 360
        "chat": (211.5, 2),  # P1 09:10:00-09:15:03 = 303, P5 07:10-07:12 = 120
        "turn_annotation": (50.0, 4),  # 60, 3, 40, 60
        "post_panas": (388.5, 2),  # 09:15:03-09:20:00 = 297, 07:12-07:20 = 480
        "survey": (450.0, 2),  # 300, 600
    }


def test_quotas_filled_and_quality_flags(monitored) -> None:
    m = study_monitoring(monitored)
    assert [(q.target, q.filled, q.cap, q.full) for q in m.quotas] == [
        ("Work: A", 2, 5, False),
        ("Work: B", 1, 1, True),
    ]
    q = m.quality
    # Five participants not withdrawn (P6 is, the preview never counts). With the study's default minimum of
    # 15 characters only P1 sent short messages (1 of 2: "ok"), at least half of theirs; no page times,
    # attention checks, behaviour answers or ideal replies were stored, so no other check flags anyone.
    assert (q.participants_reviewed, q.participants_flagged, q.excluded) == (5, 1, 0)
    assert {f.kind: f.participants for f in q.by_kind} == {
        "attention_check": 0,
        "too_fast": 0,
        "straight_lining": 0,
        "unedited_reply": 0,
        "short_messages": 1,
    }


def test_an_empty_study_has_no_rates(db) -> None:
    study = Study.objects.create(slug="empty", title="Empty", information="i", crisis_resources="c")
    m = study_monitoring(study)
    assert (m.participants, m.completion_rate, m.by_day, m.spend.live_call_budget) == (0, None, [], None)
    assert all(s.finished == 0 and s.rate is None for s in m.funnel)
    assert all(t.median_seconds is None and t.n == 0 for t in m.step_times)


def test_the_api_returns_the_same_numbers(monitored, researcher, rater) -> None:
    client = Client()
    client.force_login(researcher)
    body = client.get("/api/studies/mon/monitoring/").json()
    m = study_monitoring(monitored)
    assert (body["participants"], body["completed"], body["completion_rate"]) == (6, 2, 0.4)
    assert body["funnel"][0] == {
        "step": "consent",
        "label": m.funnel[0].label,
        "finished": 4,
        "stopped_here": 1,
        "rate": 0.8,
    }
    assert body["by_day"][2] == {"day": "2026-03-03", "joined": 1, "started": 1, "completed": 1, "completed_total": 2}
    assert body["spend"] == {
        "live_calls_used": 30,
        "live_call_budget": 120,
        "remaining": 90,
        "percent_used": 25.0,
        "cost_usd": 0.0,
        "cost_budget_usd": None,
        "calls_unpriced": 0,
    }
    assert body["quality"]["participants_flagged"] == 1
    assert body["quotas"][1] == {"kind": "topic", "target": "Work: B", "cap": 1, "filled": 1, "full": True}
    missing = client.get("/api/studies/no-such-study/monitoring/")
    assert missing.status_code == 404 and "detail" in missing.json()
    assert Client().get("/api/studies/mon/monitoring/").status_code == 401
    as_rater = Client()
    as_rater.force_login(rater)
    assert as_rater.get("/api/studies/mon/monitoring/").status_code == 403
    schema = client.get("/api/schema/?format=json").json()
    assert "/api/studies/{slug}/monitoring/" in schema["paths"]


def test_the_collection_dashboard_shows_the_chosen_study(monitored, researcher) -> None:
    client = Client()
    client.force_login(researcher)
    page = client.get(reverse("research:collection") + "?study=mon").content.decode()
    assert 'id="monitoring-mon"' in page
    assert '<div class="v" data-figure="participants">6</div>' in page
    assert '<div class="v" data-figure="completed">2</div>' in page
    assert '<div class="v" data-figure="flagged">1</div>' in page


def test_dollar_spend_of_priced_live_calls_on_the_panel_and_the_api(monitored, researcher) -> None:
    Study.objects.filter(pk=monitored.pk).update(live_spend_budget_usd=Decimal("5.00"))
    other = Study.objects.create(slug="other", title="Other", information="i", crisis_resources="c")
    for study, model, succeeded, cost in [
        (monitored, "openai/gpt-4o-mini", True, Decimal("0.12345678")),
        (monitored, "openai/gpt-4o", True, Decimal("1.50000000")),
        (monitored, "local/unknown", True, None),  # litellm has no price: counted apart
        (monitored, "openai/gpt-4o", False, None),  # failed: not billed, and not "unpriced" either
        (other, "openai/gpt-4o", True, Decimal("9.00000000")),  # another study's spend
    ]:
        LiveCall.objects.create(study=study, litellm_model=model, succeeded=succeeded, cost_usd=cost)
    # By hand: 0.12345678 + 1.5 = 1.62345678 USD of a 5.00 budget; 1 unpriced call; the call counts
    # (30 of 120, 90 left, 25%) are the study's own counter and do not change.
    expected = {
        "live_calls_used": 30,
        "live_call_budget": 120,
        "remaining": 90,
        "percent_used": 25.0,
        "cost_usd": 1.62345678,
        "cost_budget_usd": 5.0,
        "calls_unpriced": 1,
    }
    assert asdict(study_monitoring(Study.objects.get(pk=monitored.pk)).spend) == expected
    client = Client()
    client.force_login(researcher)
    assert client.get("/api/studies/mon/monitoring/").json()["spend"] == expected
    page = client.get(reverse("research:collection") + "?study=mon").content.decode()
    # the panel rounds to cents: $1.62 of $5.00
    assert "90 left; $1.62 of $5.00, 1 unpriced call</div>" in page
