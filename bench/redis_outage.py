"""Redis outage fault run: participants keep chatting while Redis is stopped mid-run and restarted.

Setup, all on this machine:
- a fresh Postgres database beside DATABASE_URL's (created here, dropped at the end);
- a private redis-server on a free port (never the shared one): the cache, the sessions (``cached_db``), the
  rate limits and the Celery broker, as in production;
- the site served as in production (``manage.py serve``: gunicorn) and one Celery worker (``manage.py worker``)
  that prepares the suggested rewrites and sends the tasks kept while the broker was away (its sweeper runs
  every second here);
- the demo study's offline original model (no provider: the fault is Redis, not a model).

Then N simulated participants (default 4), each an HTTP client with its own cookies (a session, as a browser
holds), join, consent and fill in the pages to the chat, then send messages, stream the replies and answer
every annotation page, turn after turn, pausing ``--think-seconds`` between actions. After ``--before`` seconds
Redis is stopped for ``--outage`` seconds, then started again, and the run goes on for ``--after`` seconds.
A request that fails (a status of 500 or more, or no answer) is counted and the participant reloads their page,
as a person would; a 4xx is the study's own answer (e.g. a refused form) and fails the run only in ``--smoke``.

Reported: failed requests before, during (and per second of) and after the outage; chat messages the site
acknowledged (the send answered with its redirect) and how many of them are stored (a message's text is
unique, so duplicates and losses are both counted); tasks kept in the database during the outage and how many
still wait at the end; tracebacks and errors in the server log.

Usage: DATABASE_URL=postgresql://... python bench/redis_outage.py
       [--participants 4 --before 10 --outage 30 --after 20 --think-seconds 1] [--smoke]

``--smoke`` (2 participants, a 3 s outage) exits non-zero on any failed request, lost or duplicated message,
task left unsent, server traceback or unexpected answer; never on a timing.
The last line is machine-readable:
``redis_outage: participants=N outage_s=S failed_during=F failed_per_outage_s=R acknowledged=A stored=T lost=L
duplicates=D kept_tasks=K unsent_tasks=U``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

import httpx
import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_db import migrated_copy  # noqa: E402
from participant_load import fill as fill_form  # noqa: E402
from participant_load import free_port, main_form, with_database  # noqa: E402

from devtools.redis_server import PrivateRedis  # noqa: E402

SLUG = "attune-demo"
SETUP = """
from collection.models import Study
from collection.setup import ensure_defaults
ensure_defaults()
Study.objects.filter(slug=SLUG).update(min_turns=1, max_turns=12)
"""


@dataclass
class Tally:
    """Requests and their failures, by when they were answered: before, during or after the outage."""

    phase: str = "before"
    requests: dict[str, int] = field(default_factory=lambda: {"before": 0, "during": 0, "after": 0})
    failed: dict[str, int] = field(default_factory=lambda: {"before": 0, "during": 0, "after": 0})
    unexpected: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)
    stop: bool = False


class Failed(Exception):
    """A request the site could not answer (5xx or no answer): counted; the participant reloads."""


class Person:
    def __init__(self, base: str, tally: Tally, number: int, think: float) -> None:
        self.http = httpx.AsyncClient(
            base_url=base,
            timeout=60,
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"X-Forwarded-For": f"10.9.0.{number + 1}"},
        )
        self.tally, self.number, self.think_s = tally, number, think
        self.rng = random.Random(number)
        self.link = ""  # the study link, learnt on joining
        self.sent = 0
        self.done = False

    async def think(self) -> None:
        await asyncio.sleep(self.think_s * self.rng.uniform(0.5, 1.5))

    async def request(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        phase = self.tally.phase
        self.tally.requests[phase] += 1
        try:
            response = await self.http.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx.TransportError as exc:
            self.tally.failed[phase] += 1
            self.tally.failures.append(f"{method} {path}: {type(exc).__name__}")
            raise Failed from exc
        if response.status_code >= 500:
            self.tally.failed[phase] += 1
            self.tally.failures.append(f"{method} {path}: {response.status_code}")
            raise Failed
        if response.status_code >= 400:
            self.tally.unexpected.append(f"{method} {path}: {response.status_code}")
        return response

    async def get(self, path: str) -> tuple[str, str]:
        for _ in range(10):
            response = await self.request("GET", path)
            if response.status_code in (301, 302, 303):
                path = urljoin(path, response.headers["location"])
                continue
            return path, response.text
        raise RuntimeError(f"GET {path}: too many redirects")

    async def post(self, path: str, data: dict) -> httpx.Response:
        data = {**data, "csrfmiddlewaretoken": self.http.cookies.get("csrftoken", "")}
        return await self.request("POST", path, data=data, headers={"Referer": str(self.http.base_url)})

    async def submit(self, path: str, html: str) -> tuple[str, str]:
        form, clicked = main_form(html)  # pressed as a browser does: its name=value sent, its formaction followed
        data = fill_form(form)
        if clicked is not None and clicked.name:
            data[clicked.name] = clicked.value
        action = (clicked.formaction if clicked is not None and clicked.formaction else "") or form.action
        target = urljoin(path, action) if action else path
        response = await self.post(target, data)
        if response.status_code not in (301, 302, 303):
            return target, response.text  # shown again: the loop reloads and tries the page once more
        return await self.get(urljoin(target, response.headers["location"]))

    async def reply(self, url: str) -> None:
        headers = {"Accept": "application/x-ndjson", "Referer": str(self.http.base_url)}
        data = {"csrfmiddlewaretoken": self.http.cookies.get("csrftoken", "")}
        response = await self.request("POST", url, data=data, headers=headers)
        if response.status_code != 200 or '"done"' not in response.text:
            self.tally.unexpected.append(f"reply {url}: {response.status_code} {response.text[-80:]!r}")

    async def step(self, path: str, html: str) -> tuple[str, str]:
        """One action from wherever the participant is: a chat message, or the page in front of them."""
        if path.endswith("/chat/"):
            retry = re.search(r'<form method="post" action="([^"]+)" class="actions" data-retry-form', html)
            if retry:  # a reply that did not finish streaming: ask for it again, as the page offers
                await self.reply(retry.group(1))
                return await self.get(self.link)
            turn = re.search(r'name="turn_number" value="(\d+)"', html)
            if turn is None:  # the chat is full: finish it (the run ends for this participant at the thank-you)
                finish = await self.post(path + "finish/", {})
                return await self.get(urljoin(path, finish.headers.get("location", self.link)))
            self.sent += 1
            text = f"Participant {self.number} message {self.sent}: exams start soon and I feel anxious."
            send = await self.post(path + "send/", {"message": text, "turn_number": turn.group(1)})
            if send.status_code == 302:
                self.tally.acknowledged.add(text)
                await self.reply(f"{path}reply/{turn.group(1)}/")
            return await self.get(self.link)
        if "/thank-you/" in path:
            self.done = True
            return path, html
        if "data-rewrite-pending" in html:  # the rewrite is being prepared: look again, as the page does
            return await self.get(path)
        return await self.submit(path, html)

    async def run(self) -> None:
        path, html = await self.get(f"/join/{SLUG}/")
        path, html = await self.submit(path, html)
        self.link = "/".join(path.split("/")[:3]) + "/"  # /s/<token>/
        while not (self.tally.stop or self.done):
            await self.think()
            try:
                path, html = await self.step(path, html)
            except Failed:
                await self.think()
                try:
                    path, html = await self.get(self.link)  # reload, as a person would
                except Failed:
                    path, html = self.link, ""

    async def close(self) -> None:
        await self.http.aclose()


async def drive(base: str, redis: PrivateRedis, options: argparse.Namespace) -> Tally:
    tally = Tally()
    people = [Person(base, tally, i, options.think_seconds) for i in range(options.participants)]

    async def faults() -> None:
        await asyncio.sleep(options.before)
        tally.phase = "during"
        await asyncio.to_thread(redis.stop)
        print(f"redis stopped at {options.before:g} s", flush=True)
        await asyncio.sleep(options.outage)
        await asyncio.to_thread(redis.start)
        tally.phase = "after"
        print(f"redis started again after {options.outage:g} s", flush=True)
        await asyncio.sleep(options.after)
        tally.stop = True

    async def one(person: Person) -> None:
        try:
            await person.run()
        except Exception as exc:  # a participant who cannot go on is reported, the others go on
            tally.unexpected.append(f"participant {person.number}: {type(exc).__name__}: {exc}")
        finally:
            await person.close()

    await asyncio.gather(faults(), *(one(p) for p in people))
    return tally


def wait_until_up(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 300
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            sys.exit(f"the server did not start; its log: {log}")
        time.sleep(0.2)  # polling a process we started


def stored_messages(url: str, texts: set[str]) -> tuple[int, int]:
    """(acknowledged messages stored, duplicates) as the database holds them."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT user_message FROM collection_turn WHERE user_message LIKE 'Participant %%'"
        ).fetchall()
    stored = [row[0] for row in rows]
    return len(texts & set(stored)), len(stored) - len(set(stored))


def pending_tasks(url: str) -> int:
    """Tasks kept in the database and not sent yet (0 for a release that keeps none, to compare with it)."""
    with psycopg.connect(url) as conn:
        try:
            row = conn.execute("SELECT count(*) FROM collection_pendingtask").fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
    return int(row[0]) if row else 0


def wait_for_sent(url: str, seconds: float) -> int:
    """Tasks still kept after the worker's sweeper had ``seconds`` to send them."""
    deadline = time.monotonic() + seconds
    while (left := pending_tasks(url)) and time.monotonic() < deadline:
        time.sleep(0.5)  # polling the database the worker writes
    return left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=4)
    parser.add_argument("--before", type=float, default=10.0, help="seconds of normal running before the outage")
    parser.add_argument("--outage", type=float, default=30.0, help="seconds Redis stays stopped")
    parser.add_argument("--after", type=float, default=20.0, help="seconds of running after Redis is back")
    parser.add_argument("--think-seconds", type=float, default=1.0, help="pause between a participant's actions")
    parser.add_argument("--smoke", action="store_true", help="2 participants, a 3 s outage; fail on any error")
    options = parser.parse_args()
    if options.smoke:
        options.participants, options.before, options.outage, options.after = 2, 3.0, 3.0, 4.0
        options.think_seconds = 0.3
    admin_url = os.environ.get("DATABASE_URL", "")
    if not admin_url.startswith(("postgres://", "postgresql://")):
        sys.exit("redis_outage.py needs DATABASE_URL pointing at a Postgres server (a database beside it is used)")

    name = f"attune_redis_outage_{os.getpid()}"
    database = with_database(admin_url, name)
    data_dir = Path(tempfile.mkdtemp(prefix="attune-outage-"))
    redis = PrivateRedis(data_dir)
    redis.start()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": database,
        "REDIS_URL": redis.url,
        "ATTUNE_DATA_DIR": str(data_dir),
        "ATTUNE_OFFLINE_STREAM_DELAY": "0.01",
        "ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE": "1000",
        "ATTUNE_TRUSTED_PROXIES": "1",
        "ATTUNE_REPLAY_LEASE_SECONDS": "2",  # the worker's sweeper (which sends kept tasks) runs every second
    }
    server = worker = None
    try:
        migrated_copy(env["DATABASE_URL"], env)
        setup = SETUP.replace("SLUG", repr(SLUG))
        subprocess.run([sys.executable, "manage.py", "shell", "-c", setup], cwd=REPO, env=env, check=True)
        port = free_port()
        server_log = data_dir / "server.log"
        server = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--no-migrate", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=server_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--pool", "threads", "--concurrency", "2", "--loglevel", "WARNING"],
            cwd=REPO,
            env=env,
            stdout=(data_dir / "worker.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        wait_until_up(base, server, server_log)
        tally = asyncio.run(drive(base, redis, options))
        unsent = wait_for_sent(database, 30.0)
        stored, duplicates = stored_messages(database, tally.acknowledged)
        kept = len([line for line in server_log.read_text().splitlines() if "kept to be sent when it is back" in line])
    finally:
        for process in (server, worker):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)
        redis.stop()
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    log_errors = server_log.read_text().count("Traceback") + server_log.read_text().count(" ERROR ")
    acknowledged = len(tally.acknowledged)
    lost = acknowledged - stored
    per_s = tally.failed["during"] / options.outage
    print(
        f"participants {options.participants}; {options.before:g} s before, {options.outage:g} s without Redis, "
        f"{options.after:g} s after"
    )
    for phase in ("before", "during", "after"):
        print(f"  {phase:<6}  requests {tally.requests[phase]:>5}  failed {tally.failed[phase]:>4}")
    print(f"failed requests per second of outage: {per_s:.2f}")
    print(f"messages acknowledged {acknowledged}, stored {stored}, lost {lost}, duplicates {duplicates}")
    print(f"tasks kept in the database while the broker was away {kept}; still unsent at the end {unsent}")
    print(f"server log tracebacks and errors {log_errors}; unexpected answers {len(tally.unexpected)}")
    for message in sorted(set(tally.failures))[:10] + sorted(set(tally.unexpected))[:10]:
        print(f"  {message}")
    print(
        f"redis_outage: participants={options.participants} outage_s={options.outage:g} "
        f"failed_during={tally.failed['during']} failed_per_outage_s={per_s:.2f} acknowledged={acknowledged} "
        f"stored={stored} lost={lost} duplicates={duplicates} kept_tasks={kept} unsent_tasks={unsent}"
    )
    if options.smoke:
        failed = sum(tally.failed.values())
        problems = failed + lost + duplicates + unsent + log_errors + len(tally.unexpected)
        if problems or acknowledged == 0:
            sys.exit("smoke: the outage cost requests, messages or tasks (see above)")


if __name__ == "__main__":
    main()
