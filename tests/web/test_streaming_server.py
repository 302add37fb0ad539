"""A hung provider blocks no one else, against the real server.

Starts ``manage.py serve`` (gunicorn's threaded workers: the configuration the
Docker image and compose run) with one worker of five threads, so three reply
slots and two threads kept for pages. The fake provider then hangs after the
first word of every reply. While three replies hang:

- two more replies are refused at once with the calm retry message (no slot),
  instead of taking the threads that pages need;
- another participant's chat page and the health probe load;
- on Postgres, with a pool of two connections, the hung replies hold none of
  them: the page loads would otherwise wait for the pool.

Then the provider finishes: the three replies are saved (a connection is taken
again for the write), and a refused reply, retried, completes too.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from collection.models import hash_token
from tests.web.test_concurrent_participants import free_port, manage, server_env, wait_until_serving

# Two server processes boot here (migrate, then gunicorn): minutes on a busy machine, past the suite default.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
HELD, REFUSED = 3, 2

SETUP = """
import json
from attunebench import catalogue as cat
from collection import study_flow as flow
from collection.models import OriginalModel, Topic
from collection.setup import ensure_defaults

study = ensure_defaults().study
OriginalModel.objects.update(active=False)
OriginalModel.objects.create(name="hung-model", provider="acme", litellm_model="openai/hung-model", api_base=API_BASE)
tokens = []
for _ in range(COUNT):
    participant = flow.do_enrol(study)
    flow.do_record_consent(participant, sensitive_data_consent=False)
    flow.do_save_profile(participant, "35-44", [], [], None)
    flow.do_save_pre_panas(participant, dict.fromkeys(cat.PANAS_ITEMS, 3))
    conversation = flow.do_start_conversation(participant, Topic.objects.first(), cat.TOPIC_ATTITUDE_OPTIONS[0])
    flow.do_add_message(conversation, 1, "Exams start soon and I feel anxious all day.")
    tokens.append(participant.token)
print(json.dumps(tokens))
"""

REPLIES = """
import json
from collection.models import Turn
print(json.dumps({t.conversation.participant.token_hash: t.llm_response for t in Turn.objects.select_related("conversation__participant")}))
"""


@pytest.fixture
def hung_server(transactional_db, tmp_path, fake_openai_server) -> Iterator[tuple[str, dict[str, str], list[str]]]:
    env = server_env(tmp_path / "data")
    env.update(
        ATTUNE_ALLOW_LIVE_MODELS="1",
        ATTUNE_WEB_WORKERS="1",
        ATTUNE_WEB_THREADS="5",  # three reply slots, two threads kept for pages (attune_site/serving.py)
        ATTUNE_DB_POOL_SIZE="2",
        ATTUNE_CHAT_TIMEOUT_SECONDS="300",
    )
    if "DATABASE_URL" in env:  # name the server's connections, so only they are counted (server_connections)
        parts = urlsplit(env["DATABASE_URL"])
        query = "&".join(filter(None, [parts.query, f"application_name={SERVER_NAME}"]))
        env["DATABASE_URL"] = urlunsplit(parts._replace(query=query))
    manage(env, "migrate", "--noinput", "-v", "0")
    setup = SETUP.replace("API_BASE", repr(fake_openai_server.api_base)).replace("COUNT", str(HELD + REFUSED + 1))
    tokens = json.loads(manage(env, "shell", "-c", setup).strip().splitlines()[-1])
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
    fake_openai_server.gate = threading.Event()
    try:
        wait_until_serving(process, url + "/healthz")
        yield url, env, tokens
    finally:
        fake_openai_server.gate.set()
        process.terminate()
        process.wait(timeout=60)


@contextlib.contextmanager
def browser(base: str, token: str) -> Iterator[httpx.Client]:
    """A participant's browser on their chat page (which sets the CSRF cookie)."""
    with httpx.Client(base_url=base, timeout=60) as client:
        assert client.get(f"/s/{token}/chat/").status_code == 200
        yield client


def reply_request(client: httpx.Client, token: str) -> dict:
    return {
        "method": "POST",
        "url": f"/s/{token}/chat/reply/1/",
        "data": {"csrfmiddlewaretoken": client.cookies["csrftoken"]},
        "headers": {"Accept": "application/x-ndjson", "Referer": str(client.base_url)},
    }


#: The application name the server under test connects with; threads of this test process that kept a
#: connection from an earlier test (persistent for CONN_MAX_AGE) are not the server's and are not counted.
SERVER_NAME = "attune-hung-server"


def server_connections() -> int:
    """The server's connections to this test's database."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            [SERVER_NAME],
        )
        return cursor.fetchone()[0]


def test_hung_replies_leave_page_loads_and_database_connections_free(hung_server, fake_openai_server):
    base, env, tokens = hung_server
    held, refused, visitor = tokens[:HELD], tokens[HELD : HELD + REFUSED], tokens[-1]
    with contextlib.ExitStack() as stack:
        streams = []
        for token in held:
            client = stack.enter_context(browser(base, token))
            response = stack.enter_context(client.stream(**reply_request(client, token)))
            assert response.status_code == 200
            streams.append(response.iter_lines())
        for _ in held:  # every held reply has reached the provider, which now hangs
            assert fake_openai_server.holding.acquire(timeout=120)
        # (the first word itself is held back by the identity screen until it cannot start a model's name)

        # No slot left: refused at once, with the message that tells the participant to try again.
        for token in refused:
            with browser(base, token) as client:
                response = client.request(**reply_request(client, token))
                events = [json.loads(line) for line in response.text.splitlines()]
                assert events == [
                    {
                        "type": "error",
                        "message": "The reply could not be fetched just now. Your message is saved. Please try again in a moment.",
                    }
                ]

        # Pages load while the provider hangs.
        with browser(base, visitor) as client:
            page = client.get(f"/s/{visitor}/chat/")
            assert page.status_code == 200 and "Exams start soon and I feel anxious all day." in page.text
            assert client.get("/healthz").status_code == 200
        if os.environ.get("DATABASE_URL"):
            assert 1 <= server_connections() <= 2  # the pool's size, with three replies in flight

        fake_openai_server.gate.set()
        for lines in streams:
            events = [json.loads(line) for line in lines]
            assert events[-1]["type"] == "done"
            assert "".join(e["text"] for e in events if e["type"] == "delta") == fake_openai_server.reply

    # A refused reply, asked again once a slot is free, completes.
    with browser(base, refused[0]) as client:
        events = [json.loads(line) for line in client.request(**reply_request(client, refused[0])).text.splitlines()]
        assert events[-1]["type"] == "done"

    by_hash = json.loads(manage(env, "shell", "-c", REPLIES).strip().splitlines()[-1])
    replies = {token: by_hash[hash_token(token)] for token in tokens}  # only a link's hash is stored
    assert {token: replies[token] for token in [*held, refused[0]]} == dict.fromkeys(
        [*held, refused[0]], fake_openai_server.reply
    )
    assert replies[refused[1]] == "" and replies[visitor] == ""
