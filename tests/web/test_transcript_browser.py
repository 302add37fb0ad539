"""The call transcript of a run-conversation and a frozen snapshot page in a real headless Chromium.

Screenshots go to artifacts/screenshots/research/ (git-ignored), and the test asserts on what they show.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import expect

from tests.web.test_research_browser import DESKTOP, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    page = context.new_page()
    yield page
    context.close()


def replayed(name: str, judge: str | None = None):
    """A finished run of an offline baseline over the sample conversations, through the replay service."""
    from scoring import replay_service, run_control
    from scoring.models import EvaluationRun

    run = replay_service.do_create_run(name, "default", judge_name=judge)
    run_control.start_run(run.pk)
    run.refresh_from_db()
    assert run.status == EvaluationRun.Status.DONE
    return run


def test_transcript_view_and_snapshot_page(page, researcher, sample_conversations):
    from research.results.evaluation import evaluation_data
    from research.results.snapshots import do_freeze_snapshot
    from scoring.models import CallTranscript, RunConversation

    lexicon = replayed("baseline:lexicon", judge="baseline:random")
    replayed("baseline:prior")
    snapshot = do_freeze_snapshot(
        "transcript-paper-table", "Table 1 of the draft.", evaluation_data(), "spec", researcher
    )

    log_in(page, "rita", "researcher-pass-123")
    page.goto(f"/research/runs/{lexicon.pk}/")
    page.locator("a", has_text="calls").first.click()
    expect(page.locator("h1")).to_contain_text("Calls of baseline:lexicon")
    conversation_id = page.url.rstrip("/").split("/")[-2]
    item = RunConversation.objects.get(run=lexicon, conversation__conversation_id=conversation_id)
    calls = list(CallTranscript.objects.filter(run_conversation=item).order_by("sequence"))
    assert calls

    # Totals and one index row per call, the judge's marked.
    expect(page.locator("#transcript-totals")).to_contain_text(str(len(calls)))
    expect(page.locator("#transcript-totals")).to_contain_text("$0")
    index = page.locator("#transcript-index tbody tr")
    expect(index).to_have_count(len(calls))
    expect(page.locator("#transcript-index")).to_contain_text("judge")
    expect(page.locator(".disclaimer")).to_contain_text("Research use only")
    # The first call is open: its exact prompt and raw reply, and the parsed answer.
    first = page.locator("#call-0")
    expect(first).to_have_attribute("open", "")
    texts = first.locator("pre.call-text").all_inner_texts()
    assert calls[0].messages[-1]["content"].strip() in [t.strip() for t in texts]
    expect(first.locator("pre.raw-reply")).to_have_text(calls[0].raw_reply)
    expect(first.locator("pre.parsed")).to_be_visible()
    # A closed call opens from the index.
    last = calls[-1]
    page.locator(f'#transcript-index a[href="#call-{last.sequence}"]').click()
    page.locator(f"#call-{last.sequence} > summary").click()
    expect(page.locator(f"#call-{last.sequence} pre.raw-reply")).to_have_text(last.raw_reply)
    shot(page, "run-call-transcript")

    # The frozen snapshot: its name, hash, the ranked rows and the downloads, with the disclaimer.
    page.goto(f"/research/snapshots/{snapshot.pk}/")
    expect(page.locator("h1")).to_contain_text("transcript-paper-table")
    expect(page.locator("#snapshot-hash")).to_have_text(snapshot.content_sha256)
    ranked = page.locator("#snapshot-leaderboard tbody tr").evaluate_all("rows => rows.map(r => r.dataset.model)")
    assert sorted(ranked) == ["baseline:lexicon", "baseline:prior"]
    expect(page.locator(".compared-set")).to_contain_text("Compared on 15 conversations")
    expect(page.locator("#snapshot-runs")).to_contain_text(str(lexicon.pk))
    expect(page.locator("#snapshot-json")).to_have_attribute("href", f"/research/snapshots/{snapshot.pk}.json")
    expect(page.locator(".disclaimer")).to_contain_text("Research use only")
    shot(page, "snapshot-page")
