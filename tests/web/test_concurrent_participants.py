"""Many participants on the same page at the same instant, against a real server process.

The embedded default is a SQLite file; a real study has several participants
pressing "Next" together, and some press it twice. This starts ``manage.py
serve`` (the threaded server ``attune serve`` runs) in a subprocess on a fresh
data directory and walks eight participants through every write step in lock
step: a barrier releases all requests of a step together, and from consent on
every participant double-submits each step (two identical posts at the same
instant, as a double click sends). Nobody may get an error and every answer
must be stored exactly once.

With DATABASE_URL set the server process uses the test run's own Postgres
database (``transactional_db`` empties it afterwards), so the same test covers
both backends.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from attunebench import catalogue as cat

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PARTICIPANTS = 8
SLUG = "attune-demo"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(data_dir: Path) -> dict[str, str]:
    """The server's environment: its own data dir; on Postgres the test run's database."""
    from django.db import connection

    env = {**os.environ, "ATTUNE_DATA_DIR": str(data_dir), "ATTUNE_OFFLINE_STREAM_DELAY": "0"}
    env.pop("REDIS_URL", None)  # tasks in process, cache per process: the embedded default
    env["ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE"] = "1000"
    if os.environ.get("DATABASE_URL"):
        parts = urlsplit(os.environ["DATABASE_URL"])
        env["DATABASE_URL"] = urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def wait_until_serving(process: subprocess.Popen, url: str) -> None:
    """Poll the port until the server answers (it prints its address before binding)."""
    deadline = time.monotonic() + 300  # gunicorn boots a worker after its master: slow on a busy machine
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else "server exited"
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)  # polling a process we started, not waiting for an outcome
    raise AssertionError(f"server did not answer on {url}")


@pytest.fixture
def server(transactional_db, tmp_path) -> Iterator[tuple[str, dict[str, str]]]:
    env = server_env(tmp_path / "data")
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "shell", "-c", "from collection.setup import ensure_defaults; ensure_defaults()")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--no-migrate", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, url + "/")
        yield url, env
    finally:
        process.terminate()
        process.wait(timeout=30)
        log = process.stderr.read() if process.stderr else ""
        assert "database is locked" not in log


class Participant:
    """One browser: its own cookies, posting forms with the CSRF token like the pages do."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=60)
        self.token = ""
        self.statuses: list[tuple[str, int]] = []

    def post(self, path: str, data: dict | None = None, **headers: str) -> httpx.Response:
        csrf = self.http.cookies.get("csrftoken", "")
        response = self.http.post(
            path,
            data={"csrfmiddlewaretoken": csrf, **(data or {})},
            headers={"Referer": str(self.http.base_url), **headers},
        )
        self.statuses.append((path, response.status_code))
        return response

    def s(self, suffix: str) -> str:
        return f"/s/{self.token}/{suffix}"


def together(participants: list[Participant], action: Callable[[Participant], object], copies: int = 1) -> None:
    """Run ``action`` for every participant (``copies`` times each) with all requests released at once."""
    barrier = threading.Barrier(len(participants) * copies)

    def run(person: Participant) -> object:
        barrier.wait(timeout=60)
        return action(person)

    with ThreadPoolExecutor(max_workers=len(participants) * copies) as pool:
        for future in [pool.submit(run, person) for person in participants for _ in range(copies)]:
            future.result()
    failures = [(path, status) for person in participants for path, status in person.statuses if status >= 400]
    assert failures == []


COUNTS = """
import json
from annotation.models import BinaryJudgement, MoodTag
from attunebench import catalogue as cat
from collection.models import Consent, Conversation, PanasSurvey, Participant, ParticipantProfile, Turn
turns = list(Turn.objects.select_related("conversation"))
print(json.dumps({
    "participants": Participant.objects.count(),
    "consents": Consent.objects.count(),
    "profiles": ParticipantProfile.objects.count(),
    "panas": PanasSurvey.objects.count(),
    "conversations": Conversation.objects.count(),
    "turns": len(turns),
    "replied": sum(1 for t in turns if t.llm_response),
    "moods": sorted(list(MoodTag.objects.values_list("turn_id", "position", "emotion", "intensity"))),
    "turn_ids": sorted(t.pk for t in turns),
    "binary_ok": all(
        sorted(BinaryJudgement.objects.filter(turn=t, observed="yes", preferred="no").values_list("question_id", flat=True))
        == sorted(cat.BINARY_QUESTION_IDS)  # the default asks all 36, each stored once
        for t in turns
    ),
}))
"""


def test_eight_participants_submitting_together_get_no_errors_and_lose_nothing(server):
    base, env = server
    people = [Participant(base) for _ in range(PARTICIPANTS)]
    starts = {}
    for person in people:  # the start page sets the CSRF cookie and carries the signed start token
        page = person.http.get(f"/join/{SLUG}/")
        assert page.status_code == 200
        starts[id(person)] = re.search(r'name="start" value="([^"]+)"', page.text).group(1)

    def join(person: Participant) -> None:
        response = person.post(f"/join/{SLUG}/", {"start": starts[id(person)]})
        person.token = re.search(r"/s/([^/]+)/", response.headers["location"]).group(1)

    together(people, join)
    together(people, lambda p: p.post(p.s("consent/"), {"agree": "on", "sensitive": "on"}), copies=2)
    together(people, lambda p: p.post(p.s("about-you/"), {"age_band": "35-44"}), copies=2)
    together(people, lambda p: p.post(p.s("feelings-before/"), dict.fromkeys(cat.PANAS_ITEMS, "4")), copies=2)
    topic_html = people[0].http.get(people[0].s("topic/")).text
    topic_id = re.search(r'name="topic" value="(\d+)"', topic_html).group(1)
    choice = {"topic": topic_id, "attitude": cat.TOPIC_ATTITUDE_OPTIONS[0]}
    together(people, lambda p: p.post(p.s("topic/"), choice), copies=2)
    together(
        people,
        lambda p: p.post(
            p.s("chat/send/"), {"message": "I feel anxious today.", "turn_number": "1"}, Accept="application/json"
        ),
        copies=2,
    )
    together(people, lambda p: p.post(p.s("chat/reply/1/"), Accept="application/x-ndjson"), copies=2)
    mood = {"step": "answers", "mood_Nervous": "on", "intensity_Nervous": "3", "mood_Jittery": "on"}
    mood.update({f"observed_{q}": "yes" for q in cat.BINARY_QUESTION_IDS})
    mood.update({f"preferred_{q}": "no" for q in cat.BINARY_QUESTION_IDS})
    together(people, lambda p: p.post(p.s("turn/1/"), mood), copies=2)

    statuses = [status for person in people for _, status in person.statuses]
    assert (
        len(statuses) == PARTICIPANTS * 15
    )  # join once, then consent, profile, PANAS, topic, send, reply and answers twice each

    counts = json.loads(manage(env, "shell", "-c", COUNTS).strip().splitlines()[-1])
    assert {key: counts[key] for key in ("participants", "consents", "profiles", "panas", "conversations")} == {
        "participants": 8,
        "consents": 8,
        "profiles": 8,
        "panas": 8,
        "conversations": 8,
    }
    assert counts["turns"] == counts["replied"] == 8
    # Exactly one set of mood rows per turn, in the order given (the form lists PANAS items in catalogue order).
    order = [item for item in cat.PANAS_ITEMS if item in ("Nervous", "Jittery")]
    expected = sorted(
        (turn_id, position, emotion, 3 if emotion == "Nervous" else None)
        for turn_id in counts["turn_ids"]
        for position, emotion in enumerate(order)
    )
    assert [tuple(row) for row in counts["moods"]] == expected
    assert counts["binary_ok"]
