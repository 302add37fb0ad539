"""Researcher pages in a real headless Chromium (Playwright, sync API, Debian's chromium).

Screenshots go to artifacts/screenshots/research/ (git-ignored). Run alone with
``pytest -m browser tests/web/test_research_browser.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("export_dir")]

SHOT_DIR = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots" / "research"
DESKTOP = {"width": 1360, "height": 900}


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    page = context.new_page()
    yield page
    context.close()


def shot(page: Page, name: str) -> None:
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT_DIR / f"{name}.png"), full_page=True)


def log_in(page: Page, username: str, password: str) -> None:
    page.goto("/research/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-button")


def baseline_runs_or_synthetic() -> str:
    """Real offline baselines through the replay service."""
    from datasets.selection import complete_conversations
    from research.runs import launcher
    from scoring.models import EvaluatedModel

    names = ["baseline:random", "baseline:prior", "baseline:lexicon"]
    models = [
        EvaluatedModel.objects.get_or_create(name=n, defaults={"kind": EvaluatedModel.Kind.OFFLINE})[0] for n in names
    ]
    request = launcher.LaunchRequest(
        models=models, modes=["default", "verbose"], panas_strategy="absolute", judge=None, dataset_version=None
    )
    assert complete_conversations().exists()
    launcher.do_launch_runs(request)
    return "baselines"


def finish_rating(assignment, lean_yes: bool) -> None:
    """A rater's whole conversation through the services, answers varying with ``lean_yes``."""
    from attunebench import catalogue as cat
    from research.raters.human_baseline import current_step, do_record_analysis, do_record_draft, do_record_post

    for turn in assignment.conversation.turns.order_by("turn_number"):
        do_record_draft(assignment, turn.turn_number, "That sounds hard. What would help most right now?")
        assignment.refresh_from_db()
        step = current_step(assignment)
        answers = {q.id: (cat.YES if (lean_yes or i % 3 == 0) else cat.NO) for i, q in enumerate(step.questions)}
        do_record_analysis(
            assignment,
            turn.turn_number,
            emotion_tags=[{"emotion": "Upset" if lean_yes else "Nervous", "intensity": 4}],
            om_answers=answers,
            participant_answers=answers,
            pairwise={str(c["index"]): "A" if lean_yes else "B" for c in step.comparisons},
        )
        assignment.refresh_from_db()
    do_record_post(
        assignment,
        panas_items=dict.fromkeys(cat.PANAS_ITEMS, 3),
        looking_for=[cat.Q1_OPTIONS[0]],
        emotion_clarity=cat.Q2_OPTIONS[0],
        model_fit=cat.Q3_OPTIONS[1],
        what_felt_off=[],
        four_branch=dict.fromkeys(cat.FOUR_BRANCHES, 5),
    )


def test_dashboards_with_sample_data_and_baseline_runs(
    page, live_server, researcher, rater, sample_conversations, django_user_model
):
    """Screenshots of every researcher page populated with the sample data and several scored runs."""
    from collection.models import Conversation
    from datasets.versions import do_freeze_dataset_version
    from research.raters.human_baseline import do_assign
    from scoring.models import EvaluationRun

    baseline_runs_or_synthetic()
    version = do_freeze_dataset_version("sample-v1", "The 15 synthetic sample conversations.", user=researcher)
    conversation = Conversation.objects.order_by("conversation_id").first()
    second_rater = django_user_model.objects.create_user("sam", password="rater-pass-456")
    for person, lean_yes in ((rater, True), (second_rater, False)):
        for other in Conversation.objects.filter(conversation_id__in=["conv-grief-02", "conv-money-02"]):
            finish_rating(do_assign(other, person, researcher), lean_yes)
    do_assign(conversation, rater, researcher)

    log_in(page, "rita", "researcher-pass-123")
    expect(page.locator("table.leaderboard tbody tr").first).to_be_visible()
    expect(page.locator(".disclaimer")).to_contain_text("not a certificate")
    shot(page, "evaluation-dashboard")
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    for part in ("#leaderboard", "#fig-capability_profile", "#fig-independence", "#fig-by_topic", "#fig-turn_position"):
        page.locator(part).screenshot(path=str(SHOT_DIR / f"part-{part.strip('#')}.png"))
    page.click("#equal-weight-toggle")
    expect(page.locator("#equal-weight-toggle")).to_have_class(re.compile("on"))
    shot(page, "evaluation-dashboard-equal-weight")

    page.goto("/research/collection/")
    shot(page, "collection-dashboard")
    page.goto(f"/research/conversations/{conversation.conversation_id}/")
    shot(page, "conversation-viewer")

    run = EvaluationRun.objects.filter(status=EvaluationRun.Status.DONE).order_by("pk").first()
    page.goto(f"/research/runs/{run.pk}/conversations/{conversation.conversation_id}/")
    shot(page, "drilldown")
    page.goto("/research/runs/")
    page.check("input[name=models] >> nth=0")
    page.click("#estimate-button")
    expect(page.locator("#estimate-result")).to_be_visible()
    shot(page, "run-launcher")

    page.goto(f"/research/datasets/{version.pk}/")
    page.select_option("#id_fmt", "jsonl")
    page.click("#export-form button")
    expect(page.locator(".export-job a.download")).to_be_visible(timeout=20_000)
    shot(page, "dataset-version")
    page.goto("/research/human/")
    shot(page, "human-baseline")
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui")).to_be_visible(timeout=15_000)
    page.wait_for_timeout(800)
    shot(page, "api-docs")


def test_launching_baseline_lexicon_shows_progress_to_100_and_a_leaderboard_row(
    page, live_server, researcher, sample_conversations
):
    from scoring.models import EvaluationRun

    log_in(page, "rita", "researcher-pass-123")
    page.goto("/research/runs/")
    page.get_by_label("baseline:lexicon").check()
    page.click("#estimate-button")
    expect(page.locator("#estimate-result")).to_contain_text("baseline:lexicon")
    assert int(page.inner_text("#estimate-calls")) > 0
    expect(page.locator("#estimate-cost")).to_have_text("$0.0000")
    page.click("#start-button")
    run = EvaluationRun.objects.get(evaluated_model__name="baseline:lexicon")
    progress = page.locator(f"#progress-{run.pk}")
    expect(progress).to_have_attribute("data-percent", "100", timeout=60_000)
    expect(progress).to_have_attribute("data-status", "done", timeout=60_000)
    expect(progress).to_contain_text("15/15 conversations")
    shot(page, "run-launcher-lexicon-done")
    page.goto("/research/")
    row = page.locator('table.leaderboard tr[data-model="baseline:lexicon"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text("default")


def test_a_rater_completes_two_human_baseline_turns(page, live_server, researcher, rater, sample_conversations):
    from collection.models import Conversation
    from research.models import HumanAssignment

    log_in(page, "rita", "researcher-pass-123")
    page.goto("/research/human/")
    page.select_option("#id_rater", label="ravi")
    page.select_option("#id_conversation", "conv-work-01")
    page.click("#assign-form button")
    expect(page.locator("#assignments")).to_contain_text("conv-work-01")
    page.click("form[action='/research/logout/'] button")

    log_in(page, "ravi", "rater-pass-123")
    page.goto("/research/rate/")
    page.click("text=Start")
    conversation = Conversation.objects.get(conversation_id="conv-work-01")
    turns = list(conversation.turns.order_by("turn_number"))
    for turn in turns[:2]:
        expect(page.locator("#stage-draft")).to_contain_text(turn.user_message[:40])
        expect(page.locator("body")).not_to_contain_text(turn.llm_response[:40])  # not before the draft
        page.fill("#id_draft", f"I hear you. Reply {turn.turn_number}.")
        page.click("#submit-draft")
        expect(page.locator("#stage-analysis")).to_contain_text(turn.llm_response[:40])
        if turn.turn_number == 1:
            shot(page, "human-baseline-turn")
        page.check("input[name=emotion_Nervous]")
        page.select_option("select[name=intensity_Nervous]", "4")
        for group in page.locator("#analysis-form .q").all():
            radios = group.locator("input[type=radio]")
            names = {radios.nth(i).get_attribute("name") for i in range(radios.count())}
            for name in names:
                group.locator(f"input[name='{name}']").first.check()
        page.click("#submit-analysis")
    expect(page.locator("#stage-draft")).to_contain_text(turns[2].user_message[:40])
    assignment = HumanAssignment.objects.get()
    assert assignment.turns_done == 2
    output = assignment.run_conversation.output
    assert [t["turnNumber"] for t in output["turns"]] == [1, 2]
    assert output["turns"][1]["em_drafted_response"] == "I hear you. Reply 2."
    assert output["turns"][0]["em_emotion_tags"] == [{"emotion": "Nervous", "intensity": 4}]
