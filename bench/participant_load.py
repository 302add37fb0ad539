"""Participant load benchmark: many participants chatting and annotating at once.

Setup, all on this machine:
- a fresh Postgres database beside DATABASE_URL's (created here, dropped at the end);
- the fake OpenAI-compatible provider (devtools/fake_llm_server.py) in its own process, streaming each chat
  reply word by word over ``--reply-seconds`` (default 5 s);
- the site served as in production: ``manage.py serve``, i.e. gunicorn with attune_site/gunicorn_conf.py
  (threaded workers, a pool of database connections per worker), Redis as the shared cache when REDIS_URL is
  set (as in docker-compose), the study's original model live and pointed at the fake provider, so every
  reply goes through litellm as a real one would.

Then N simulated participants (default 100), each an HTTP client with its own cookies that fills in and posts
the pages' forms with their CSRF token as a browser does: join, consent, profile, PANAS, topic, then
``--turns`` chat turns (send, streamed reply, every annotation page of that turn), finish, PANAS, survey.
Between actions a participant pauses for a think time (``--think-seconds`` ± 50 %, default 5 s). A person
takes tens of seconds to read and answer a page of up to 36 questions, so 5 s is already several times a real
study's pace. At 1 s, a hundred participants make about 100 requests a second; at about 11 ms of server CPU
each, plus the simulated browsers' own CPU, that takes two thirds of a 2-core machine on average and all of
it whenever the participants move together, and the figures then measure the queue for the CPU rather than
the site. Everyone asks for the first reply together, so that all N
replies stream at once; later turns drift apart, and annotation submits then run beside other participants'
streams.

Reported: p50/p95/p99 of annotation submits (POST /s/<token>/turn/<n>/), page loads (every GET) and other
form posts; errors (a status of 400 or more, a form shown again as invalid, a failed reply, a transport
error); the most replies streaming at once and how many streamed while annotation submits were made; the
most database connections the server held; the load average (the machine is shared).
The same percentiles are printed as the server measured them (gunicorn's access log, switched on for the
bench only): the driver shares the two cores, and its own lag is in its timings but not in a real participant's.
The last line is machine-readable:
``participants=N streams=S p95_ms=X p99_ms=Y errors=E server_p95_ms=X' server_p99_ms=Y'`` (S: most replies in
flight at once; X, Y: annotation submits as the driver timed them; X', Y': as the server did).

Usage: DATABASE_URL=postgresql://... [REDIS_URL=redis://...] python bench/participant_load.py
       [--participants 100 --turns 3 --reply-seconds 5 --think-seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_db import migrated_copy  # noqa: E402
from proc_cpu import tree_cpu_s  # noqa: E402

from devtools.fake_llm_server import start_subprocess  # noqa: E402

SLUG = "attune-demo"
SETUP = """
from collection.models import OriginalModel, Study
from collection.setup import ensure_defaults
ensure_defaults()
Study.objects.filter(slug=SLUG).update(min_turns=TURNS, max_turns=max(TURNS, 12))
OriginalModel.objects.update(active=False)
OriginalModel.objects.create(name="bench-model", provider="fake", litellm_model="openai/bench-model", api_base=API_BASE)
"""


# ---------------------------------------------------------------------------
# Forms, filled in as a participant would
# ---------------------------------------------------------------------------


@dataclass
class Button:
    """A submit button: its label, and what clicking it adds to the form (name=value) and where it sends it."""

    label: str
    name: str = ""
    value: str = ""
    formaction: str = ""


@dataclass
class Form:
    action: str
    fields: list[tuple[str, str, str, bool]] = field(default_factory=list)  # (kind, name, value, checked)
    buttons: list[Button] = field(default_factory=list)


#: The tags a form is made of, with their attributes (a quoted value may hold ">"). Comments, scripts and
#: styles are taken out first: a browser reads no form from them.
_FORM_TAG = re.compile(
    r"""<(/?)(form|input|button|select|option|textarea)\b((?:[^>"']|"[^"]*"|'[^']*')*)>""", re.IGNORECASE
)
_ATTRIBUTE = re.compile(r"""([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?""")
_NOT_MARKUP = re.compile(r"<!--.*?-->|<script\b.*?</script\s*>|<style\b.*?</style\s*>", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"<[^>]*>")


def _attributes(text: str) -> dict[str, str]:
    """A tag's attributes, names lowercased and values unescaped (a bare attribute is "")."""
    found: dict[str, str] = {}
    for name, double, single, bare in _ATTRIBUTE.findall(text):
        found.setdefault(name.lower(), html.unescape(double or single or bare))
    return found


def _words(markup: str) -> str:
    """The words between two tags as a person reads them (tags as spaces, entities decoded, spaces collapsed)."""
    return " ".join(html.unescape(_ANY_TAG.sub(" ", markup)).split())


def _until(page: str, start: int, closing: str) -> str:
    end = page.find(closing, start)
    return page[start : end if end >= 0 else len(page)]


def page_forms(page: str) -> list[Form]:
    """The page's POST forms with their inputs, selects, textareas and submit buttons, less the withdraw
    link's (a participant who takes part never presses it).

    Only the forms' own tags are read, which is all a browser builds a form's submission from: a general HTML
    parser in Python also walks every character of the page's text, which cost this driver about a third of
    its CPU (a page of 36 questions took 15 ms), CPU taken from the server it shares the cores with.
    """
    page = _NOT_MARKUP.sub("", page)
    forms: list[Form] = []
    form: Form | None = None
    select: list[str | None] | None = None  # [name, first option's value, selected option's value]
    for tag in _FORM_TAG.finditer(page):
        closing, name, a = tag[1], tag[2].lower(), _attributes(tag[3])
        if name == "form":
            form = Form(a.get("action", "")) if not closing and a.get("method", "").lower() == "post" else None
            if form is not None:
                forms.append(form)
        elif form is None:
            continue
        elif closing:
            if name == "select" and select is not None:
                value = select[2] if select[2] is not None else select[1] or ""
                form.fields.append(("select", select[0] or "", value, True))
                select = None
        elif name == "button" and a.get("type", "submit").lower() == "submit":
            label = _words(_until(page, tag.end(), "</button"))
            form.buttons.append(Button(label, a.get("name", ""), a.get("value", ""), a.get("formaction", "")))
        elif name == "input" and a.get("type", "").lower() == "submit":
            form.buttons.append(Button(a.get("value", ""), a.get("name", ""), a.get("value", "")))
        elif name == "input" and a.get("name"):
            kind = a.get("type", "text").lower()
            form.fields.append((kind, a["name"], a.get("value", "on" if kind == "checkbox" else ""), "checked" in a))
        elif name == "select":
            select = [a["name"], None, None] if a.get("name") else None
        elif name == "option" and select is not None:
            if select[1] is None:
                select[1] = a.get("value", "")
            if "selected" in a:
                select[2] = a.get("value", "")
        elif name == "textarea" and a.get("name"):
            text = html.unescape(_until(page, tag.end(), "</textarea")).strip()
            form.fields.append(("textarea", a["name"], text, True))
    return [f for f in forms if "withdraw" not in f.action]


def main_form(html: str) -> tuple[Form, Button | None]:
    """The page's own form and the button a browser submits it with on Enter (its first submit button)."""
    forms = page_forms(html)
    if not forms:
        raise LookupError("no form on the page")
    return forms[0], (forms[0].buttons[0] if forms[0].buttons else None)


def button(html: str, label: str) -> tuple[Form, Button]:
    """The form holding the button labelled ``label``, as a participant finds it on the page by its words."""
    for form in page_forms(html):
        for candidate in form.buttons:
            if candidate.label == label:
                return form, candidate
    labels = [b.label for f in page_forms(html) for b in f.buttons]
    raise LookupError(f"no button {label!r} on the page (its buttons: {labels})")


def fill(form: Form) -> dict[str, str | list[str]]:
    """Answers: radios and selects as shown or their first choice, option groups as shown or their first
    box, single boxes as shown, text as shown; the consent box ticked and one mood picked."""
    data: dict[str, str | list[str]] = {}
    groups: dict[str, list[tuple[str, bool]]] = {}
    for kind, name, value, checked in form.fields:
        if kind in ("submit", "button"):
            continue
        if kind in ("checkbox", "radio"):
            groups.setdefault(name, []).append((value, checked))
        else:
            data[name] = value
    for name, options in groups.items():
        kinds = {k for k, n, _, _ in form.fields if n == name}
        chosen = [value for value, checked in options if checked]
        if "radio" in kinds:
            data[name] = chosen[0] if chosen else options[0][0]
        elif chosen:
            data[name] = chosen
        elif len(options) > 1:  # a multiple choice: tick the first
            data[name] = [options[0][0]]
    if "agree" in groups:
        data["agree"] = "on"
    if "mood_Nervous" in groups:  # the mood step and the answers page: one feeling, as a participant ticks it
        data["mood_Nervous"], data["intensity_Nervous"] = "on", "3"
    for kind, name, value, _ in form.fields:  # a text box left empty is written in, as a participant would
        if kind == "textarea" and not value:
            data[name] = "I hear how anxious the exams make you. Would it help to plan one small step for tomorrow?"
    return data


# ---------------------------------------------------------------------------
# Participants
# ---------------------------------------------------------------------------


@dataclass
class Results:
    annotation: list[float] = field(default_factory=list)
    pages: list[float] = field(default_factory=list)
    submits: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    streaming: int = 0
    peak_streams: int = 0
    streams_at_annotation: list[int] = field(default_factory=list)
    replies: int = 0
    finished: int = 0
    reply_total: list[float] = field(default_factory=list)
    reply_first: list[float] = field(default_factory=list)
    #: told "start" when every first reply is asked for at once, "end" when the last of them has ended
    on_window: Callable[[str], None] = lambda _: None
    window_marks: set[str] = field(default_factory=set)
    window_replies: int = 0

    def mark(self, moment: str) -> None:
        if moment not in self.window_marks:
            self.window_marks.add(moment)
            self.window_replies = self.replies  # at "end": every first reply that streamed whole
            self.on_window(moment)


class Participant:
    def __init__(self, base: str, results: Results, think: float, rng: random.Random, address: str) -> None:
        # A connection per request, as a TLS proxy in front of gunicorn sends them (nginx's default): a kept-alive
        # connection that the server closes as a request goes out fails that request, which a browser would
        # retry and httpx does not.
        # Each participant comes from their own address, as the TLS proxy reports it in X-Forwarded-For (the server
        # trusts one proxy hop): from one shared address the per-address enrolment limit would throttle them.
        self.http = httpx.AsyncClient(
            base_url=base,
            timeout=120,
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"X-Forwarded-For": address},
        )
        self.results = results
        self.think_s = think
        self.rng = rng
        self.waited = False  # has passed the first-reply barrier
        self.done_first = False  # has passed the first-reply-done barrier

    async def think(self) -> None:
        if self.think_s:
            await asyncio.sleep(self.think_s * self.rng.uniform(0.5, 1.5))

    async def get(self, path: str) -> tuple[str, str]:
        """Load a page, following redirects one timed GET at a time; returns (path, html)."""
        for _ in range(10):
            start = time.perf_counter()
            response = await self.http.get(path)
            self.results.pages.append(time.perf_counter() - start)
            if response.status_code in (301, 302, 303):
                path = urljoin(path, response.headers["location"])
                continue
            if response.status_code >= 400:
                raise RuntimeError(f"GET {path} answered {response.status_code}")
            return path, response.text
        raise RuntimeError(f"GET {path}: too many redirects")

    async def post(self, path: str, data: dict, kind: str) -> httpx.Response:
        data = {**data, "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", "")}
        if kind == "annotation":
            self.results.streams_at_annotation.append(self.results.streaming)
        start = time.perf_counter()
        response = await self.http.post(path, data=data, headers={"Referer": str(self.http.base_url)})
        (self.results.annotation if kind == "annotation" else self.results.submits).append(time.perf_counter() - start)
        if response.status_code >= 400:
            raise RuntimeError(f"POST {path} answered {response.status_code}")
        return response

    async def submit(
        self, path: str, form: Form, clicked: Button | None, data: dict, kind: str = "step"
    ) -> tuple[str, str]:
        """Post ``form`` as a browser does when ``clicked`` is pressed (its name=value sent, its formaction
        followed); the next page, as the redirect after the post leads."""
        if clicked is not None and clicked.name:
            data = {**data, clicked.name: clicked.value}
        action = (clicked.formaction if clicked is not None and clicked.formaction else "") or form.action
        target = urljoin(path, action) if action else path
        response = await self.post(target, data, kind)
        if response.status_code not in (301, 302, 303):
            errors = re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.text, re.S)
            raise RuntimeError(f"POST {target} showed the form again: {errors[:1]}")
        return await self.get(urljoin(target, response.headers["location"]))

    async def submit_page(self, path: str, html: str, kind: str = "step") -> tuple[str, str]:
        """Fill in the page's form and press its first button."""
        form, clicked = main_form(html)
        return await self.submit(path, form, clicked, fill(form), kind)

    async def press(self, path: str, html: str, label: str, data: dict | None = None) -> tuple[str, str]:
        """Press the button labelled ``label`` with the form's fields as shown, plus ``data`` typed in."""
        form, clicked = button(html, label)
        shown = {
            name: value for kind, name, value, checked in form.fields if kind not in ("checkbox", "radio") or checked
        }
        return await self.submit(path, form, clicked, {**shown, **(data or {})})

    async def until(self, path: str, html: str, stop: str, kind: str = "step") -> tuple[str, str]:
        """Answer page after page until the path holds ``stop``; a page that keeps coming back is a failure."""
        seen: dict[str, int] = {}
        while stop not in path:
            seen[path] = seen.get(path, 0) + 1
            if seen[path] > 5:
                raise RuntimeError(f"stuck on {path}: answering it 5 times did not lead on towards {stop}")
            await self.think()
            if "data-rewrite-pending" in html:  # the suggested rewrite is being prepared: wait as the page does
                path, html = await self.wait_for_rewrite(path)
                continue
            path, html = await self.submit_page(path, html, kind)
        return path, html

    async def wait_for_rewrite(self, path: str) -> tuple[str, str]:
        """Poll as the waiting page's htmx does (every 2 s) until the server says the page is ready."""
        for _ in range(90):
            await asyncio.sleep(2)
            start = time.perf_counter()
            response = await self.http.get(path, headers={"HX-Request": "true"})
            self.results.pages.append(time.perf_counter() - start)
            if response.status_code >= 400:
                raise RuntimeError(f"GET {path} (polling) answered {response.status_code}")
            if response.status_code == 200:
                return await self.get(response.headers.get("HX-Redirect", path))
        raise RuntimeError(f"GET {path}: the suggested rewrite was not ready after 3 minutes")

    async def reply(self, url: str) -> str:
        """Stream the reply as the chat page's script does; returns where its ``done`` event leads."""
        headers = {"Accept": "application/x-ndjson", "Referer": str(self.http.base_url)}
        data = {"csrfmiddlewaretoken": self.http.cookies.get("csrftoken", "")}
        results = self.results
        results.streaming += 1
        results.peak_streams = max(results.peak_streams, results.streaming)
        started = time.perf_counter()
        first_text: float | None = None
        try:
            last = {}
            async with self.http.stream("POST", url, data=data, headers=headers) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"reply {url} answered {response.status_code}")
                async for line in response.aiter_lines():
                    if line.strip():
                        last = json.loads(line)
                        if first_text is None and last.get("type") == "delta":
                            first_text = time.perf_counter() - started
        finally:
            results.streaming -= 1
        if last.get("type") != "done":
            raise RuntimeError(f"reply {url} ended with {last}")
        results.replies += 1
        results.reply_total.append(time.perf_counter() - started)
        results.reply_first.append(first_text or 0.0)
        return urljoin(url, last["next"])

    async def run(self, turns: int, first_reply: asyncio.Barrier, first_done: asyncio.Barrier) -> None:
        await self.think()  # arrivals spread out a little
        path, html = await self.get(f"/join/{SLUG}/")
        await self.think()
        path, html = await self.submit_page(path, html)  # enrol: to the consent page
        path, html = await self.until(path, html, "/chat/")
        for turn in range(1, turns + 1):
            await self.think()
            message = f"Turn {turn}: exams start soon and I feel anxious all day."
            path, html = await self.press(path, html, "Send", {"message": message})
            reply_form, _ = button(html, "Get the reply")  # the page's script streams from this form's address
            if turn == 1:
                self.waited = True
                await first_reply.wait()  # every participant's first reply streams at the same time
                self.results.mark("start")
            next_page = await self.reply(urljoin(path, reply_form.action))
            if turn == 1:
                self.done_first = True
                await first_done.wait()  # and nobody moves on until all have streamed: the window is streams only
                self.results.mark("end")
            path, html = await self.get(next_page)  # where the reply's done event leads: its annotation
            path, html = await self.until(path, html, "/chat/", kind="annotation")
        await self.think()
        path, html = await self.press(path, html, "Finish the chat")
        path, html = await self.until(path, html, "/thank-you/")  # the confirmation, the last questions
        self.results.finished += 1

    async def close(self) -> None:
        await self.http.aclose()


async def drive(
    base: str, participants: int, turns: int, think: float, seed: int, on_window: Callable[[str], None]
) -> Results:
    """Every participant through the study at once; ``on_window("start"|"end")`` marks the first-reply window."""
    results = Results()
    barrier = asyncio.Barrier(participants)
    done = asyncio.Barrier(participants)
    people = [
        Participant(
            base, results, think, random.Random(seed + i), f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256 + 1}"
        )
        for i in range(participants)
    ]

    async def one(person: Participant) -> None:
        try:
            await person.run(turns, barrier, done)
        except Exception as exc:  # reported; one who fails early still counts at the barriers, so the rest go on
            results.errors.append(f"{type(exc).__name__}: {exc}")
            if not person.waited:
                await barrier.wait()
            if not person.done_first:
                await done.wait()
        finally:
            await person.close()

    results.on_window = on_window
    await asyncio.gather(*(one(p) for p in people))
    return results


# ---------------------------------------------------------------------------
# Services
# ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


class ConnectionWatch(threading.Thread):
    """Polls how many connections the server holds to the bench database; keeps the peak."""

    def __init__(self, url: str, name: str) -> None:
        super().__init__(daemon=True)
        self.url, self.name, self.peak = url, name, 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(0.25):
                count = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (self.name,)
                ).fetchone()
                self.peak = max(self.peak, count[0] if count else 0)


ACCESS_FORMAT = "%(m)s %(U)s %(s)s %(D)s"
ACCESS_LINE = re.compile(r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d{3}) (?P<micros>\d+)")
ANNOTATION_PATH = re.compile(r"/turn/\d+/$")


def server_times(access_log: Path) -> dict[str, list[float]]:
    """Seconds each request spent in the server, by the driver's kinds (streamed replies apart).

    The driver is one Python process on the same two cores: while it parses one participant's page, the
    responses of others wait in its socket buffers, so its own timings include its lag. The server's times
    are what a participant's browser, on its own machine, would wait beyond the network.
    """
    kinds: dict[str, list[float]] = {"annotation": [], "pages": [], "submits": [], "replies": []}
    text = access_log.read_text() if access_log.exists() else ""
    for number, line in enumerate(text.splitlines(), 1):
        entry = ACCESS_LINE.fullmatch(line)
        if entry is None:
            raise ValueError(
                f"{access_log}:{number}: not a line in the bench's access format {ACCESS_FORMAT!r}: {line!r}"
            )
        method, path, micros = entry["method"], entry["path"], entry["micros"]
        seconds = int(micros) / 1e6
        if method == "GET":
            kinds["pages"].append(seconds)
        elif "/chat/reply/" in path:
            kinds["replies"].append(seconds)
        elif ANNOTATION_PATH.search(path):
            kinds["annotation"].append(seconds)
        else:
            kinds["submits"].append(seconds)
    return kinds


def percentiles(values: list[float]) -> str:
    if len(values) < 2:
        return f"n={len(values)}"
    q = statistics.quantiles([v * 1000 for v in values], n=100, method="inclusive")
    return f"n={len(values)} p50={q[49]:.0f} ms p95={q[94]:.0f} ms p99={q[98]:.0f} ms max={max(values) * 1000:.0f} ms"


def quantile_ms(values: list[float], index: int) -> float:
    if len(values) < 2:
        return values[0] * 1000 if values else 0.0
    return statistics.quantiles([v * 1000 for v in values], n=100, method="inclusive")[index]


def quantile(values: list[float], index: int) -> float:
    """The ``index``-th percentile (0-based, of 99 cut points), in the values' own unit."""
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=100)
    parser.add_argument(
        "--turns", type=int, default=3, help="chat turns per participant (the study asks for exactly these, 1-12)"
    )
    parser.add_argument(
        "--reply-tokens", type=int, default=250, help="chunks (one a token, as a real provider sends) of each reply"
    )
    parser.add_argument(
        "--tokens-per-second", type=float, default=40.0, help="how fast the provider streams them (real: 30-50)"
    )
    parser.add_argument("--think-seconds", type=float, default=5.0, help="pause between a participant's actions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--smoke", action="store_true", help="4 participants, 1 turn, short replies: the whole path in seconds"
    )
    options = parser.parse_args()
    if options.smoke:
        options.participants, options.turns, options.think_seconds = 4, 1, 0.2
        options.reply_tokens, options.tokens_per_second = 40, 40.0
    if options.reply_tokens < 1 or options.tokens_per_second <= 0:
        parser.error("--reply-tokens must be at least 1 and --tokens-per-second above 0")
    options.reply_seconds = options.reply_tokens / options.tokens_per_second
    if not 1 <= options.turns <= 12:
        parser.error(f"--turns {options.turns}: a participant chats for 1 to 12 turns")
    admin_url = os.environ.get("DATABASE_URL", "")
    if not admin_url.startswith(("postgres://", "postgresql://")):
        sys.exit("participant_load.py needs DATABASE_URL pointing at a Postgres server (a database beside it is used)")

    name = f"attune_participant_load_{os.getpid()}"
    data_dir = Path(tempfile.mkdtemp(prefix="attune-load-"))
    fake, api_base = start_subprocess(
        "--stream-ms", str(options.reply_seconds * 1000), "--stream-words", str(options.reply_tokens)
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": with_database(admin_url, name),
        "ATTUNE_DATA_DIR": str(data_dir),
        "ATTUNE_ALLOW_LIVE_MODELS": "1",
        "OPENAI_API_KEY": "sk-fake-bench-key",
        "ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE": "1000",
        # The per-study enrolment throttle counts in Redis across runs: one bench after another must not hit it.
        "ATTUNE_ENROL_PER_STUDY_PER_HOUR": "100000",
        "ATTUNE_TRUSTED_PROXIES": "1",  # the participants' X-Forwarded-For, as behind the TLS proxy
        # gunicorn's access log (off in production), for each request's time inside the server: method, path
        # (the study link redacted by Attune's logger), status and microseconds from request read to response end
        "GUNICORN_CMD_ARGS": f"--access-logfile {data_dir / 'access.log'} --access-logformat '{ACCESS_FORMAT}'",
    }
    server = None
    worker = None
    watch = ConnectionWatch(admin_url, name)
    try:
        migrated_copy(env["DATABASE_URL"], env)
        setup = SETUP.replace("API_BASE", repr(api_base)).replace("SLUG", repr(SLUG))
        setup = setup.replace("TURNS", str(options.turns))
        subprocess.run([sys.executable, "manage.py", "shell", "-c", setup], cwd=REPO, env=env, check=True)
        port = free_port()
        log = (data_dir / "server.log").open("w")
        server = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--no-migrate", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        if os.environ.get("REDIS_URL"):  # as docker-compose: a Celery worker prepares the suggested rewrites
            worker = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "worker",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "4",
                    "--loglevel",
                    "WARNING",
                ],
                cwd=REPO,
                env=env,
                stdout=(data_dir / "worker.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 600  # a worker imports litellm before it answers: slow on a busy machine
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit(f"the server did not start; its log: {data_dir / 'server.log'}")
            time.sleep(0.2)  # polling a process we started
        print((data_dir / "server.log").read_text().splitlines()[0])
        watch.start()
        load_before = os.getloadavg()
        tracked = {"server (gunicorn)": server.pid, "fake provider": fake.pid}
        if worker is not None:
            tracked["Celery worker"] = worker.pid
        cpu_before = {name: tree_cpu_s(pid) for name, pid in tracked.items()}
        driver_before = time.process_time()
        window: dict[str, tuple[float, float]] = {}

        def on_window(moment: str) -> None:
            window[moment] = (time.perf_counter(), tree_cpu_s(server.pid))

        started = time.perf_counter()
        results = asyncio.run(
            drive(base, options.participants, options.turns, options.think_seconds, options.seed, on_window)
        )
        wall = time.perf_counter() - started
        cpu = {name: tree_cpu_s(pid) - cpu_before[name] for name, pid in tracked.items()}
        cpu["this driver (the simulated browsers)"] = time.process_time() - driver_before
        load_after = os.getloadavg()
    finally:
        watch.stop.set()
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        fake.terminate()
        fake.wait(timeout=30)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    server_log = (data_dir / "server.log").read_text()
    log_errors = server_log.count("Traceback") + server_log.count("[ERROR]")
    refused = server_log.count("no free reply slot")
    timed_out = server_log.count("did not finish turn")
    stretch = [total / options.reply_seconds for total in results.reply_total]
    if "start" in window and "end" in window:
        window_s = window["end"][0] - window["start"][0]
        window_cpu = window["end"][1] - window["start"][1]
        chunk_ms = 1000 * window_cpu / max(1, results.window_replies * options.reply_tokens)
    else:
        window_s = window_cpu = chunk_ms = float("nan")

    errors = len(results.errors)
    during = results.streams_at_annotation
    inside = server_times(data_dir / "access.log")
    # The server-side figures are the target's: a run whose access log yielded none has not measured them.
    missing = [kind for kind in ("annotation", "pages", "submits") if not inside[kind]]
    print(
        f"participants {options.participants}, {options.turns} turns each, replies {options.reply_seconds:g} s, "
        f"think {options.think_seconds:g} s; wall {wall:.1f} s"
    )
    print(f"finished {results.finished}/{options.participants}, replies streamed {results.replies}")
    print(
        f"replies: {options.reply_tokens} chunks at {options.tokens_per_second:g}/s ({options.reply_seconds:g} s at "
        f"the provider); first text {percentiles(results.reply_first)}"
    )
    print(f"  reply total       {percentiles(results.reply_total)}")
    print(
        f"  reply stretch (reply total / provider stream time) p50 {quantile(stretch, 49):.2f} "
        f"p95 {quantile(stretch, 94):.2f} max {max(stretch, default=0):.2f}"
    )
    print(f"  refused (no free reply slot) {refused}; past the time limit {timed_out}")
    print(
        f"  the first replies, all streaming at once: {window_s:.1f} s, server CPU {window_cpu:.1f} s, "
        f"{chunk_ms:.3f} ms per streamed chunk"
    )
    print(f"annotation submits  {percentiles(results.annotation)}")
    print(f"page loads          {percentiles(results.pages)}")
    print(f"other form posts    {percentiles(results.submits)}")
    print("inside the server (gunicorn's request time, without the driver's own lag):")
    print(f"  annotation submits  {percentiles(inside['annotation'])}")
    print(f"  page loads          {percentiles(inside['pages'])}")
    print(f"  other form posts    {percentiles(inside['submits'])}")
    print(f"  streamed replies    {percentiles(inside['replies'])}")
    if during:
        print(
            f"replies streaming while annotation submits were made: median {statistics.median(during):g}, "
            f"max {max(during)}"
        )
    print(f"most replies streaming at once {results.peak_streams}; most server database connections {watch.peak}")
    print(f"errors {errors}; server log errors {log_errors}")
    for message in sorted(set(results.errors))[:10]:
        print(f"  {message}")
    requests = len(results.annotation) + len(results.pages) + len(results.submits)
    print(
        f"CPU during the drive ({os.cpu_count()} cores x {wall:.1f} s = {(os.cpu_count() or 1) * wall:.0f} core-s): "
        + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items())
        + f"; server CPU {1000 * cpu['server (gunicorn)'] / max(1, requests):.1f} ms per timed request "
        f"({requests}, streams apart)"
    )
    server_p95 = quantile_ms(inside["annotation"], 94)
    print(
        "targets (at 200 participants; 300: no refusal, no timeout): server-side annotation submit p95 "
        f"{server_p95:.0f} ms (< 150: {'met' if server_p95 < 150 else 'missed'}), reply stretch p95 "
        f"{quantile(stretch, 94):.2f} (<= 1.2: {'met' if quantile(stretch, 94) <= 1.2 else 'missed'}), errors "
        f"{errors + log_errors} (0: {'met' if errors + log_errors == 0 else 'missed'})"
    )
    print(
        "load average 1/5/15 min: before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f} (2 cores, shared)".format(
            *load_before, *load_after
        )
    )
    print(
        "participant_load: "
        f"participants={options.participants} streams={results.peak_streams} "
        f"p95_ms={quantile_ms(results.annotation, 94):.0f} p99_ms={quantile_ms(results.annotation, 98):.0f} "
        f"errors={errors + log_errors} server_p95_ms={quantile_ms(inside['annotation'], 94):.0f} "
        f"server_p99_ms={quantile_ms(inside['annotation'], 98):.0f} "
        f"server_page_p95_ms={quantile_ms(inside['pages'], 94):.0f} "
        f"first_text_p95_s={quantile(results.reply_first, 94):.1f} reply_p50_s={quantile(results.reply_total, 49):.1f} "
        f"reply_p95_s={quantile(results.reply_total, 94):.1f} stretch_p95={quantile(stretch, 94):.2f} "
        f"cpu_ms_per_chunk={chunk_ms:.3f} refused={refused} timeouts={timed_out} finished={results.finished}"
    )
    if missing:
        print(
            f"FAILED: the server's access log ({data_dir / 'access.log'}) held no request times for "
            f"{', '.join(missing)}: the server-side percentiles above are not measured",
            file=sys.stderr,
        )
        sys.exit(1)
    failed = errors + log_errors + refused + timed_out
    if failed or results.finished != options.participants:
        print(
            f"FAILED: {results.finished}/{options.participants} participants finished; {failed} errors",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
