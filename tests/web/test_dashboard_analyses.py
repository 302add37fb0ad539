"""The paper's analyses on the dashboard and the API (SPEC 6): pooled breakdowns that count conversations,
every capability compared across groups and topics, p-values, the early/late test, the pooled human row."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client

from attunebench.metrics.composite import CAPABILITIES
from collection.models import Conversation
from research.results.evaluation import evaluation_data
from tests.web.test_comparable_leaderboard import scored_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_(researcher) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


@pytest.fixture
def attested_sample(db):
    """The synthetic sample data imported as the demo does: consent attested, so diagnoses form groups."""
    call_command(
        "import", str(Path(settings.ATTUNE_SAMPLE_DATA_DIR)), "--attest-sensitive-consent", stdout=io.StringIO()
    )


def test_breakdowns_count_conversations_and_leave_baselines_apart(client_, attested_sample):
    for i in range(3):
        scored_run(f"synth:m{i}", skill=0.3 + 0.2 * i)
    scored_run("baseline:prior", skill=0.1)
    analysis = evaluation_data().analysis
    assert analysis is not None
    brk = analysis.breakdowns
    assert brk.pooled_rows == ["synth:m0 [default]", "synth:m1 [default]", "synth:m2 [default]"]
    per_category = Counter(
        Conversation.objects.filter(status=Conversation.Status.COMPLETE).values_list("topic__category", flat=True)
    )
    # 3 pooled rows over each category's conversations: n is the number of conversations, not 3 x that.
    assert {c.category: c.n_conversations for c in brk.by_category.overall} == dict(per_category)
    for cell in brk.by_category.overall:
        assert (cell.composite_ci_low is None) == (cell.n_conversations < 10)
    pooled = brk.by_participant_group.pooled
    assert pooled.n_anxiety_depression + pooled.n_none <= sum(per_category.values())
    assert [m.metric for m in pooled.metrics] == ["composite_score", *CAPABILITIES]
    assert [t.metric for t in brk.by_category.tests] == ["composite_score", *CAPABILITIES]
    assert "avg_response_preference_alignment" in analysis.discrimination.metrics

    page = client_.get("/research/").content.decode()
    for part in ('id="pool-form"', 'id="topic-tests"', 'id="group-capabilities"', 'id="turn-halves"'):
        assert part in page
    assert 'id="discrimination-pairs"' in page and "avg_response_preference_alignment" in page
    assert "baselines left out of the pooled lines: baseline:prior [default]" in page


def test_the_researcher_chooses_the_rows_to_pool(client_, attested_sample):
    scored_run("synth:a", skill=0.8)
    scored_run("baseline:prior", skill=0.1)
    page = client_.get("/research/", {"pool": ["synth:a [default]", "baseline:prior"]}).content.decode()
    assert 'value="baseline:prior [default]" checked' in page
    api = client_.get("/api/analyses/", {"pool": "baseline:prior"}).json()
    assert api["analysis"]["breakdowns"]["pooled_rows"] == ["baseline:prior [default]"]
    refused = client_.get("/api/analyses/", {"pool": "nobody"})
    assert refused.status_code == 400 and "cannot pool 'nobody'" in refused.json()["pool"][0]
    shown = client_.get("/research/", {"pool": "nobody"}, follow=True).content.decode()
    assert "cannot pool" in shown  # said in a message, and the default comparison shown


def test_emotion_va_and_capabilities_are_selectable(client_, attested_sample):
    scored_run("synth:a", skill=0.8)
    page = client_.get("/research/", {"metric": "emotion_va_score", "topic_metric": "preference_prediction"})
    text = page.content.decode()
    assert "Emotion VA (valence-arousal match) by turn position" in text
    assert "Emotion VA (valence-arousal match): early vs late half" in text
    assert "Preference prediction (0–1) by topic category" in text
    csv = client_.get("/research/figures/turn_halves.csv", {"metric": "emotion_va_score"}).content.decode()
    assert csv.splitlines()[0] == "row,early,late,late_minus_early,n_paired_conversations,p,note"
    assert csv.splitlines()[1].startswith("synth:a [default],")
    groups = client_.get("/research/figures/group_capabilities.csv").content.decode().splitlines()
    assert groups[1].startswith("pooled (one value per conversation),Composite,")


def test_human_raters_get_a_pooled_row_beside_their_own(client_, sample_conversations):
    scored_run("synth:a", skill=0.8)
    scored_run("human:ravi", skill=0.7, limit=4)
    scored_run("human:ann", skill=0.5, limit=6)
    board = client_.get("/api/leaderboard/").json()
    humans = [p["human"] for p in board["human_pairings"]]
    assert humans == ["human:ann [default]", "human:ravi [default]", "all human raters (pooled)"]
    pooled = board["human_pairings"][-1]
    # both raters start from the same ordered conversations: the pooled set is the larger one, 6 conversations
    assert pooled["n_shared"] == 6
    analysis = client_.get("/api/analyses/").json()["analysis"]
    assert analysis["human_baseline"]["pooled"]["n_raters"] == 2
    assert analysis["human_baseline"]["pooled"]["n_conversations"] == 6
    page = client_.get("/research/").content.decode()
    assert 'id="pooled-human"' in page and "all human raters (pooled)" in page
