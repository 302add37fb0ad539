"""The model registry's "test connection" in a real headless Chromium: the htmx button shows the answer.

Screenshot in artifacts/screenshots/research/model-registry.png (git-ignored).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import expect

from tests.web.test_research_browser import DESKTOP, log_in, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_tests_a_connection_from_the_registry(browser, live_server, researcher, fake_openai_server):
    from scoring.models import EvaluatedModel

    model = EvaluatedModel.objects.create(
        name="local-em", litellm_model="openai/fake-em", api_base=fake_openai_server.api_base
    )
    fake_openai_server.rewrite = '{"response": "ok"}'  # a draft answer in AttuneBench's format: the probe's call
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    page = context.new_page()
    try:
        log_in(page, "rita", "researcher-pass-123")
        page.goto("/research/models/")
        row = page.locator(f"#model-{model.pk}")
        expect(row).to_contain_text("local-em")
        row.get_by_role("button", name="Test connection").click()
        result = page.locator(f"#connection-{model.pk} .connection-result")
        expect(result).to_have_attribute("data-ok", "true", timeout=30_000)
        expect(result).to_contain_text("Connected")
        expect(result.locator(".reply")).to_have_text('{"response": "ok"}')
        expect(page.locator("#model-add")).to_be_visible()
        shot(page, "model-registry")
    finally:
        context.close()
    assert len(fake_openai_server.requests) == 1
