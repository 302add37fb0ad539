"""Every page passes the Content-Security-Policy, in a real headless Chromium.

The policy (attune_site/settings.py) allows scripts and style sheets from the
site only, inline ones only with the response's nonce. Chromium reports a
refused script, style, image, font or fetch as a ``securitypolicyviolation``
event and a console error; both are collected on every page of a participant's
whole study (the chat's streaming script included), every research dashboard,
the API docs, the browsable API and the admin, and must stay empty. A control
at the end shows the collector does see a violation when there is one.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from django.core.cache import cache
from django.test import Client
from playwright.sync_api import Page

from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import Conversation, Study, Topic
from collection.setup import ensure_defaults

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("export_dir")]

DESKTOP = {"width": 1280, "height": 900}

# Runs before any page script: records what the browser refused, with the directive and the source.
COLLECT_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.effectiveDirective} refused ${e.blockedURI || 'inline'} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


class Watch:
    """A page whose CSP violations (events and console errors) and CSP headers are recorded."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.problems: list[str] = []
        self.headers: dict[str, str] = {}
        page.on("console", self._console)
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.problems.append(f"console on {self.page.url}: {message.text}")

    def _response(self, response: Any) -> None:
        if response.request.resource_type == "document":
            self.headers[response.url] = response.headers.get("content-security-policy", "")

    def visit(self, url: str, idle: bool = True) -> None:
        """Open ``url``, let its scripts (and with ``idle`` its requests) finish, then collect what was refused."""
        self.page.goto(url)
        self.page.wait_for_load_state("networkidle" if idle else "load")
        self.collect()

    def collect(self) -> None:
        for entry in self.page.evaluate("() => window.__csp || []"):
            self.problems.append(f"{self.page.url}: {entry}")
        self.page.evaluate("() => { window.__csp = []; }")


@pytest.fixture
def watch(browser, live_server):
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    context.set_default_timeout(15_000)
    context.add_init_script(COLLECT_VIOLATIONS)
    page = context.new_page()
    yield Watch(page)
    context.close()


def assert_policy_everywhere(watch: Watch) -> None:
    assert watch.headers, "no page was loaded"
    for url, header in watch.headers.items():
        assert "script-src 'self'" in header, f"{url} has no script policy: {header!r}"
        script = re.search(r"script-src ([^;]*)", header)
        assert script is not None and "unsafe-inline" not in script.group(1) and "unsafe-eval" not in script.group(1)
    assert not watch.problems, "\n".join(watch.problems)


def test_a_whole_participant_study_passes_the_policy(watch, settings, live_server):
    settings.ATTUNE_OFFLINE_STREAM_DELAY = 0
    cache.clear()
    study = ensure_defaults().study
    page = watch.page
    watch.visit(f"/join/{study.slug}/")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/s/[^/]+/consent/$"))
    watch.collect()
    token = page.url.split("/s/", 1)[1].split("/", 1)[0]
    client = Client()
    base = f"/s/{token}/"

    def at_current_step() -> str:
        target = client.get(base)["Location"]
        watch.visit(target)
        return target

    at_current_step()  # consent
    client.post(base + "consent/", {"agree": "on", "sensitive": "on"})
    at_current_step()  # about you
    client.post(base + "about-you/", {"age_band": "35-44"})
    at_current_step()  # feelings before
    client.post(base + "feelings-before/", dict.fromkeys(cat.PANAS_ITEMS, "3"))
    at_current_step()  # topic
    topic = Topic.objects.get(subtopic="Exam pressure")
    client.post(base + "topic/", {"topic": topic.pk, "attitude": cat.TOPIC_ATTITUDE_OPTIONS[0]})

    # the chat through its script: send, stream the reply over fetch, continue to the questions
    assert at_current_step().endswith("/chat/")
    page.fill("textarea[name=message]", "I have an exam on Monday and I feel anxious.")
    page.click("[data-chat-form] button[type=submit]")
    page.wait_for_selector("[data-chat-continue]:not([hidden])")
    watch.collect()
    page.click("[data-chat-continue-link]")
    page.wait_for_load_state("networkidle")
    watch.collect()

    # every annotation sub-step of the turn, each page opened in the browser before it is answered
    url = base + "turn/1/"
    watch.visit(url)  # the answers page: mood and the behaviour questions
    html = client.get(url).content.decode()
    ids = sorted(set(re.findall(r'name="observed_(B\d+)"', html)))
    shown = re.search(r'name="shown" value="([^"]+)"', html).group(1)
    answers = {f"observed_{q}": "yes" for q in ids} | {f"preferred_{q}": "no" for q in ids}
    client.post(url, {"step": "answers", "shown": shown, "no_change": "on", **answers})
    watch.visit(url)  # the ideal reply and the choice of questions
    client.post(url, {"step": "rewrite", "human_edited": "My own better reply.", "questions": ["general"]})
    watch.visit(url)  # every comparison on one page
    names = set(re.findall(r'name="(winner_\d+)"', client.get(url).content.decode()))
    client.post(url, {"step": "compare", **dict.fromkeys(names, "B")})

    Study.objects.filter(pk=study.pk).update(min_turns=1)  # one turn is enough to see the finish button
    assert at_current_step().endswith("/chat/")  # the chat with its finish button
    watch.visit(base + "chat/finish/")  # "Finish the chat?"
    client.post(base + "chat/finish/", {"confirm": "yes"})
    at_current_step()  # feelings after
    client.post(base + "feelings-after/", dict.fromkeys(cat.PANAS_ITEMS, "5"))
    at_current_step()  # your view
    client.post(
        base + "your-view/",
        {
            "looking_for": [cat.Q1_OPTIONS[1]],
            "emotion_clarity": cat.Q2_OPTIONS[0],
            "model_fit": cat.Q3_OPTIONS[0],
            **{f"branch_{b}": "6" for b in cat.FOUR_BRANCHES},
        },
    )
    assert at_current_step().endswith("/thank-you/")
    watch.visit(base + "withdraw/")
    page.click("button[value=yes]")
    page.wait_for_load_state("networkidle")
    watch.collect()
    assert flow.access_participant(token).is_withdrawn  # the walk really reached the end
    assert_policy_everywhere(watch)


def test_research_dashboards_api_docs_and_admin_pass_the_policy(watch, scored_runs, researcher, site_admin):
    run = scored_runs[0]
    conversation = Conversation.objects.filter(status=Conversation.Status.COMPLETE).order_by("pk").first()
    page = watch.page
    watch.visit("/research/login/")
    page.fill("#id_username", researcher.username)
    page.fill("#id_password", "researcher-pass-123")
    page.click("#login-button")
    page.wait_for_url(re.compile(r"/research/$"))
    page.wait_for_load_state("networkidle")
    watch.collect()
    for url in (
        "/research/",
        "/research/collection/",
        f"/research/conversations/{conversation.conversation_id}/",
        "/research/runs/",
        f"/research/runs/{run.pk}/",
        f"/research/runs/{run.pk}/conversations/{conversation.conversation_id}/",
        "/research/datasets/",
        "/research/human/",
        "/research/rate/",
        "/api/",  # the browsable API
        "/api/conversations/",
    ):
        watch.visit(url)
    # the dashboard's conversation-set filter submits itself from the site's script file, not an inline handler
    watch.visit("/research/")
    page.select_option("select[data-autosubmit]", index=0)
    page.wait_for_url(re.compile(r"/research/\?.*set="))
    watch.collect()
    watch.visit("/api/docs/")
    page.wait_for_selector(".swagger-ui .info")  # the docs' start-up script ran, from a file
    watch.collect()

    page.context.clear_cookies()
    watch.visit("/admin/login/")
    page.fill("#id_username", site_admin.username)
    page.fill("#id_password", "admin-pass-123")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))
    watch.collect()
    for url in ("/admin/", "/admin/collection/study/", "/admin/collection/study/add/", "/admin/axes/accessattempt/"):
        watch.visit(url, idle=False)
    assert_policy_everywhere(watch)


def test_the_collector_sees_a_refused_inline_script(watch, live_server):
    """Control: an inline script without the nonce is refused and reported, so an empty list means something."""
    study = ensure_defaults().study
    watch.visit(f"/join/{study.slug}/")
    ran = watch.page.evaluate(
        """() => { const s = document.createElement('script'); s.textContent = 'window.__ran = true';
                   document.body.appendChild(s); return window.__ran === true; }"""
    )
    watch.page.wait_for_function("() => window.__csp.length > 0")
    watch.collect()
    assert ran is False
    assert any("script-src" in problem for problem in watch.problems)
