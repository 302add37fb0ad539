"""Server CPU of each kind of participant request: page loads, form posts and annotation submits.

Under load the site's latency is a queue for the CPU (bench/participant_load.py): every participant request
that is not a streamed reply costs the server some milliseconds, and at a few hundred participants those
milliseconds add up to the two cores. This measures them one by one, in this process, with nothing else
running: participants walk the study through its pages as a browser would (Django's test client with CSRF
checks on, the forms found in each page's HTML and filled in as ``bench/participant_load.py`` fills them),
and the CPU time (user + system) of each request is recorded by kind:

- ``page``        every GET of a study page (the study steps, the chat page, the annotation pages);
- ``form``        the study steps' posts (enrolment, consent, profile, PANAS, topic, send, finish, survey);
- ``annotation``  the annotation pages' posts (POST /s/<token>/turn/<n>/: answers of up to 36 questions,
                  the ideal reply, the comparisons).

The streamed reply is not measured here (``bench/reply_stream_cpu.py`` does); the suggested rewrite is made
between the reply and the answers page, as the Celery worker has made it by then in production.
Settings as ``attune serve`` runs them: a pool of Postgres connections (ATTUNE_DB_POOL_SIZE 20), Redis as the
cache and session store when REDIS_URL is set. The first participant warms the process and is not counted.
Printed per kind: requests, mean and median CPU ms, and queries per request.

Setup: a database of its own (``--database``, default beside DATABASE_URL's), a fresh copy of the migrated template.
Usage: DATABASE_URL=postgresql://... [REDIS_URL=redis://...] python bench/participant_request_cpu.py
       [--participants 12 --turns 3]
The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlencode, urljoin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_db import fresh_database  # noqa: E402
from figures import figures_line  # noqa: E402
from participant_load import SLUG, button, fill, main_form  # noqa: E402

FORM_TYPE = "application/x-www-form-urlencoded"
HANDLER: dict[str, object] = {}
BY_PAGE: dict[str, list[float]] = defaultdict(list)  # CPU ms by method and page, for --by-page


class Browser:
    """One participant's browser: cookies, CSRF token, redirects followed one GET at a time, each request timed."""

    def __init__(self, cpu: dict[str, list[float]], queries: dict[str, list[int]], address: str) -> None:
        from django.test import Client

        self.client = Client(enforce_csrf_checks=True, HTTP_X_FORWARDED_FOR=address)
        # One handler for every browser, as one server process has: its middleware is loaded once.
        self.client.handler = HANDLER.setdefault("handler", self.client.handler)
        self.cpu, self.queries = cpu, queries
        self.profile: cProfile.Profile | None = None
        self.profile_kind = ""
        self.show_queries = False

    def _timed(self, kind: str, call):
        from django.db import connection

        count = [0]

        def counted(execute, sql, params, many, context):
            count[0] += 1
            if self.show_queries:
                print(f"    {sql[:160]}")
            return execute(sql, params, many, context)

        if self.show_queries:
            print(f"  {kind}: {getattr(call, 'label', '')}")
        with connection.execute_wrapper(counted):
            profiler = self.profile if kind == self.profile_kind else None
            started = time.process_time()
            if profiler is not None:
                profiler.enable()
            response = call()
            if profiler is not None:
                profiler.disable()
            spent = time.process_time() - started
        self.cpu[kind].append(1000 * spent)
        label = re.sub(r"/s/[^/]+/", "/s/<token>/", getattr(call, "label", kind))
        BY_PAGE[re.sub(r"/turn/\d+/", "/turn/<n>/", label)].append(1000 * spent)
        self.queries[kind].append(count[0])
        return response

    def get(self, path: str) -> tuple[str, str]:
        for _ in range(10):
            call = lambda p=path: self.client.get(p)  # noqa: E731
            call.label = f"GET {path}"  # type: ignore[attr-defined]
            response = self._timed("page", call)
            if response.status_code in (301, 302, 303):
                path = urljoin(path, response["Location"])
                continue
            if response.status_code != 200:
                raise RuntimeError(f"GET {path} answered {response.status_code}")
            return path, response.content.decode()
        raise RuntimeError(f"GET {path}: too many redirects")

    def submit(self, path: str, form, clicked, data: dict, kind: str) -> tuple[str, str]:
        if clicked is not None and clicked.name:
            data = {**data, clicked.name: clicked.value}
        action = (clicked.formaction if clicked is not None and clicked.formaction else "") or form.action
        target = urljoin(path, action) if action else path
        data = {**data, "csrfmiddlewaretoken": self.client.cookies["csrftoken"].value}
        body = urlencode(data, doseq=True)  # as a browser posts a form (not the test client's multipart)
        call = lambda: self.client.post(target, body, content_type=FORM_TYPE)  # noqa: E731
        call.label = f"POST {target}"  # type: ignore[attr-defined]
        response = self._timed(kind, call)
        if response.status_code not in (301, 302, 303):
            raise RuntimeError(f"POST {target} answered {response.status_code}")
        return self.get(urljoin(target, response["Location"]))

    def submit_page(self, path: str, html: str, kind: str = "form") -> tuple[str, str]:
        form, clicked = main_form(html)
        return self.submit(path, form, clicked, fill(form), kind)

    def press(self, path: str, html: str, label: str, data: dict | None = None) -> tuple[str, str]:
        form, clicked = button(html, label)
        shown = {
            name: value for kind, name, value, checked in form.fields if kind not in ("checkbox", "radio") or checked
        }
        return self.submit(path, form, clicked, {**shown, **(data or {})}, "form")

    def until(self, path: str, html: str, stop: str, kind: str = "form") -> tuple[str, str]:
        seen: dict[str, int] = defaultdict(int)
        while stop not in path:
            seen[path] += 1
            if seen[path] > 5:
                raise RuntimeError(f"stuck on {path}")
            path, html = self.submit_page(path, html, kind)
        return path, html

    def reply(self, path: str, html: str) -> str:
        """The streamed reply, untimed (not this benchmark's), then the rewrite the worker would have made."""
        from annotation import turn_flow
        from collection.models import Turn, hash_token

        form, _ = button(html, "Get the reply")
        url = urljoin(path, form.action)
        token = self.client.cookies["csrftoken"].value
        body = urlencode({"csrfmiddlewaretoken": token})
        response = self.client.post(url, body, content_type=FORM_TYPE, HTTP_ACCEPT="application/x-ndjson")
        lines = b"".join(response.streaming_content).decode().splitlines()
        import json

        last = json.loads(lines[-1])
        if last.get("type") != "done":
            raise RuntimeError(f"reply {url} ended with {last}")
        participant_token = path.split("/")[2]
        turn = Turn.objects.filter(conversation__participant__token_hash=hash_token(participant_token)).order_by(
            "-turn_number"
        )[0]
        turn_flow.prepare_rewrite(turn.pk)
        return urljoin(url, last["next"])


def walk(browser: Browser, turns: int) -> None:
    path, html = browser.get(f"/join/{SLUG}/")
    path, html = browser.submit_page(path, html)
    path, html = browser.until(path, html, "/chat/")
    for turn in range(1, turns + 1):
        path, html = browser.press(path, html, "Send", {"message": f"Turn {turn}: exams start soon, I feel anxious."})
        path, html = browser.get(browser.reply(path, html))
        path, html = browser.until(path, html, "/chat/", kind="annotation")
    path, html = browser.press(path, html, "Finish the chat")
    browser.until(path, html, "/thank-you/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=12, help="participants measured (one more warms up)")
    parser.add_argument("--turns", type=int, default=3, help="chat turns each (1-12)")
    parser.add_argument("--database", default="", help="default: attune_request_cpu_bench beside DATABASE_URL's")
    parser.add_argument("--profile", choices=("page", "form", "annotation"), help="print where that kind's CPU goes")
    parser.add_argument("--by-page", action="store_true", help="print the mean CPU of each page's GET and POST")
    parser.add_argument("--show-queries", action="store_true", help="print each measured request's SQL")
    parser.add_argument("--smoke", action="store_true", help="one participant, one turn: the path, not the timing")
    options = parser.parse_args()
    if options.smoke:
        options.participants, options.turns = 1, 1
    admin_url = os.environ.get("DATABASE_URL", "")
    if not options.database:
        if not admin_url.startswith(("postgres://", "postgresql://")):
            sys.exit("participant_request_cpu.py needs DATABASE_URL (a Postgres server) or --database")
        options.database = admin_url.rsplit("/", 1)[0] + "/attune_request_cpu_bench"
    env = {
        **os.environ,
        "DATABASE_URL": options.database,
        "ATTUNE_DB_POOL_SIZE": "20",  # as attune serve (attune_site/gunicorn_conf.py)
        "ATTUNE_OFFLINE_STREAM_DELAY": "0",  # the reply is not measured here: no need to wait for it
        "ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE": "100000",
        "ATTUNE_ENROL_PER_STUDY_PER_HOUR": "100000",
        "ATTUNE_TRUSTED_PROXIES": "1",
    }
    fresh_database(options.database, env)

    from django.core.cache import cache

    from collection.models import Study
    from collection.setup import ensure_defaults

    ensure_defaults()
    Study.objects.filter(slug=SLUG).update(min_turns=options.turns, max_turns=max(options.turns, 12))
    cache.clear()  # the enrolment limits and cached sessions of an earlier run

    cpu: dict[str, list[float]] = defaultdict(list)
    queries: dict[str, list[int]] = defaultdict(list)
    walk(Browser(defaultdict(list), defaultdict(list), "10.9.9.9"), options.turns)  # warms the process up
    BY_PAGE.clear()  # the warm-up's
    profile = cProfile.Profile(time.process_time) if options.profile else None
    started = time.process_time()
    for i in range(options.participants):
        browser = Browser(cpu, queries, f"10.0.{i // 250}.{i % 250 + 1}")
        browser.profile, browser.profile_kind = profile, options.profile or ""
        browser.show_queries = options.show_queries
        walk(browser, options.turns)
    total = time.process_time() - started
    if profile is not None:
        stats = pstats.Stats(profile)
        stats.sort_stats("tottime").print_stats(45)
        stats.sort_stats("cumulative").print_stats(70)
    if options.by_page:
        for label, values in sorted(BY_PAGE.items()):
            print(f"  {label:48s} n={len(values):4d}  cpu mean {statistics.fmean(values):5.2f} ms")
    figures: dict[str, float] = {}
    print(f"{options.participants} participants, {options.turns} turns each; {total:.1f} s CPU in all")
    for kind in ("page", "form", "annotation"):
        values = cpu[kind]
        mean, median = statistics.fmean(values), statistics.median(values)
        per_request = statistics.fmean(queries[kind])
        print(
            f"  {kind:10s} n={len(values):4d}  cpu mean {mean:5.2f} ms  median {median:5.2f} ms  "
            f"queries {per_request:4.1f}/request"
        )
        figures.update({f"{kind}_cpu_ms": mean, f"{kind}_queries": per_request})
    print("load average 1/5/15 min: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(figures_line("participant_request_cpu", **figures))


if __name__ == "__main__":
    main()
