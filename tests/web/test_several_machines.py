"""Two hosts, one study: two data directories, two web processes and two workers sharing Postgres, Redis and an
S3-compatible server (SeaweedFS on loopback), as docs/several-machines.md describes.

An export requested through host A downloads through host B; both hosts show the same pseudonyms; a
withdrawal through A and an erasure through B remove every stored copy; a worker killed mid-export leaves
the job finished or failed with its reason; a host started with another pseudonym key refuses to start.

Every process is a real one started here (``attune serve``, the test Celery worker, ``attune erase``); the
test process only sets up data and reads the database. Runs only with Postgres and Redis (CI's first pass).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from attunebench import canonical as cf
from collection.models import Conversation, Participant
from collection.study_flow import do_issue_link
from datasets.exchange import exportable_conversations
from datasets.models import ExportJob
from datasets.pseudonyms import export_pseudonym
from datasets.versions import do_freeze_dataset_version
from devtools.s3_server import S3Server, free_ports
from research.access.api_tokens import do_issue_token
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
LEASE_SECONDS = 10  # a dead worker's export comes back within about 1.5 of these

pytestmark = [
    pytest.mark.celery,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not settings.REDIS_URL, reason="needs REDIS_URL (a real broker shared by both hosts)"),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs DATABASE_URL pointing at Postgres"),
]


@pytest.fixture(autouse=True)
def clean_broker():
    from attune_site.celery import app

    app.control.purge()
    yield
    app.control.purge()


class Deployment:
    """What every host shares (database, Redis, the bucket, both keys) and the hosts started on it."""

    def __init__(self, root: Path, s3: S3Server) -> None:
        self.root, self.s3 = root, s3
        self.secret_key = secrets.token_urlsafe(50)
        self.pseudonym_key = secrets.token_urlsafe(50)
        database = connection.settings_dict
        self.shared = {
            "DATABASE_URL": f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
            "REDIS_URL": settings.REDIS_URL,
            "ATTUNE_SECRET_KEY": self.secret_key,
            "ATTUNE_PSEUDONYM_KEY": self.pseudonym_key,
            "ATTUNE_REPLAY_LEASE_SECONDS": str(LEASE_SECONDS),
            "ATTUNE_VISIBILITY_TIMEOUT": "3600",  # only the leases and the sweeper bring a dead worker's job back
            "ATTUNE_WEB_WORKERS": "1",
            "ATTUNE_WEB_THREADS": "4",
            "ATTUNE_CALL_COURIER": "0",
            "PYTHONPATH": str(ROOT),
            **s3.environment(),
        }
        self.processes: list[subprocess.Popen[bytes]] = []

    def host_env(self, host: str, **changes: str) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ATTUNE_", "AWS_"))}
        clean.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        return {**clean, **self.shared, "ATTUNE_DATA_DIR": str(self.root / host), **changes}

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with self.log(name).open("ab") as log:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        self.processes.append(process)
        return process

    def web(self, host: str, **changes: str) -> tuple[subprocess.Popen[bytes], str]:
        (port,) = free_ports(1)
        command = [sys.executable, "-m", "attune_site.cli", "serve", "--no-migrate", "--port", str(port)]
        return self.start(f"web-{host}", command, self.host_env(host, **changes)), f"http://127.0.0.1:{port}"

    def worker(self, host: str, **changes: str) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "devtools.celery_worker", f"--hostname={host}@%h"]
        return self.start(f"worker-{host}", command, self.host_env(host, **changes))

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()


@pytest.fixture
def deployment(tmp_path, settings) -> Iterator[Deployment]:
    with S3Server(tmp_path / "s3") as s3:
        shared = Deployment(tmp_path, s3)
        # This test process sets data up as the hosts will read it: with the deployment's keys.
        settings.SECRET_KEY = shared.secret_key
        settings.ATTUNE_PSEUDONYM_KEY = shared.pseudonym_key
        try:
            yield shared
        finally:
            shared.stop_all()


def wait_until_serving(process: subprocess.Popen[bytes], base: str, log: Path) -> None:
    def answers() -> bool:
        assert process.poll() is None, f"the web process exited; its log:\n{log.read_text(errors='replace')}"
        try:
            return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(answers, 180, f"{base} to serve", every=0.3)


def api(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=60)


def job_state(pk: int) -> tuple[str, str, int]:
    job = ExportJob.objects.get(pk=pk)
    return job.status, job.error, job.attempts


def wait_for_job(pk: int, statuses: tuple[str, ...], timeout: float = 300) -> ExportJob:
    wait_for(
        lambda: job_state(pk)[0] in statuses,
        timeout,
        f"export {pk} to be {'/'.join(statuses)}",
        state=lambda: job_state(pk),
    )
    return ExportJob.objects.get(pk=pk)


def stored_keys_of(s3: S3Server, job_id: int) -> list[str]:
    return [key for key in s3.object_keys() if f"/exports/export-{job_id}/" in f"/{key}"]


def bundle_participants(content: bytes) -> set[str]:
    with zipfile.ZipFile(io.BytesIO(content)) as bundle:
        lines = bundle.read("conversations.jsonl").decode("utf-8").splitlines()
    parsed = [cf.parse_conversation(json.loads(line), f"line {n}") for n, line in enumerate(lines, 1)]
    return {c.participant_profile.participant_id for c in parsed if c.participant_profile is not None}


def ping_worker(deployment: Deployment, host: str) -> int:
    """The compose health check's command, aimed at one host's worker (node name ``<host>@<machine>``)."""
    node = f"{host}@{socket.gethostname()}"
    command = [sys.executable, "-m", "celery", "-A", "attune_site", "inspect", "ping", "--destination", node]
    return subprocess.run(
        [*command, "--timeout", "5"], cwd=ROOT, env=deployment.host_env(host), capture_output=True, timeout=120
    ).returncode


def withdraw_through(base: str, token: str) -> None:
    """What the participant does: open the withdrawal page of their link and confirm."""
    with httpx.Client(base_url=base, timeout=60, follow_redirects=True) as browser:
        page = browser.get(f"/s/{token}/withdraw/")
        assert page.status_code == 200, page.text[:500]
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf, "the withdrawal page has no CSRF token"
        done = browser.post(
            f"/s/{token}/withdraw/",
            data={"csrfmiddlewaretoken": csrf.group(1), "confirm": "yes"},
            headers={"Referer": f"{base}/s/{token}/withdraw/"},
        )
        assert done.status_code == 200, done.text[:500]


def test_two_hosts_share_exports_pseudonyms_withdrawals_and_refuse_another_key(
    deployment, sample_conversations, study, researcher
):
    s3 = deployment.s3
    participants = list(
        Participant.objects.filter(
            conversations__in=exportable_conversations().filter(status=Conversation.Status.COMPLETE)
        )
        .distinct()
        .order_by("pk")
    )
    assert len(participants) >= 3, "the sample data must hold three participants with complete conversations"
    leaving, erased = participants[0], participants[1]
    leaving.study = study
    leaving.save(update_fields=["study"])
    link = do_issue_link(leaving)
    version = do_freeze_dataset_version("two-hosts-v1", user=researcher)
    token = do_issue_token(researcher).key

    # --- Both hosts up: a web process and a worker each, on data directories of their own.
    web_a, base_a = deployment.web("a")
    web_b, base_b = deployment.web("b")
    worker_a = deployment.worker("a")
    worker_b = deployment.worker("b")
    wait_until_serving(web_a, base_a, deployment.log("web-a"))
    wait_until_serving(web_b, base_b, deployment.log("web-b"))

    # --- An export requested through A downloads through B, byte for byte what the worker recorded.
    with api(base_a, token) as host_a, api(base_b, token) as host_b:
        requested = host_a.post(f"/api/dataset-versions/{version.pk}/exports/", json={"fmt": "jsonl"})
        assert requested.status_code == 202, requested.text
        first = wait_for_job(requested.json()["id"], ("done", "failed"))
        assert first.status == "done", first.error
        downloaded = host_b.get(f"/api/exports/{first.pk}/download/")
        assert downloaded.status_code == 200, downloaded.text[:300]
        assert hashlib.sha256(downloaded.content).hexdigest() == first.file_sha256
        assert host_a.get(f"/api/exports/{first.pk}/download/").content == downloaded.content
        assert stored_keys_of(s3, first.pk) == [f"study/exports/{first.file_path}"]
        for data_dir in (deployment.root / "a", deployment.root / "b"):
            assert not (data_dir / "exports").exists() or not any((data_dir / "exports").rglob("*.zip"))

        # --- Both hosts show the same pseudonyms, and they are the ones the export wrote.
        def pseudonyms(client: httpx.Client) -> set[str]:
            listed = client.get("/api/conversations/", params={"limit": 500})
            assert listed.status_code == 200, listed.text[:300]
            return {row["participant"] for row in listed.json()["results"] if row["participant"]}

        shown_a, shown_b = pseudonyms(host_a), pseudonyms(host_b)
        assert shown_a == shown_b and shown_a
        assert bundle_participants(downloaded.content) <= shown_a
        assert export_pseudonym(leaving.pseudonym) in bundle_participants(downloaded.content)

        # --- A withdrawal through A deletes every stored copy of the export, whichever host wrote it.
        withdraw_through(base_a, link)
        first.refresh_from_db()
        assert first.status == ExportJob.Status.WITHDRAWN and first.replaced_by_id
        assert stored_keys_of(s3, first.pk) == []
        assert host_b.get(f"/api/exports/{first.pk}/download/").status_code == 404
        second = wait_for_job(first.replaced_by_id, ("done", "failed"))
        assert second.status == "done", second.error
        second_content = host_b.get(f"/api/exports/{second.pk}/download/").content
        assert export_pseudonym(leaving.pseudonym) not in bundle_participants(second_content)
        assert export_pseudonym(erased.pseudonym) in bundle_participants(second_content)

        # --- An erasure through B (its command, on B's data directory) deletes the replacement's copies too.
        erase = subprocess.run(
            [sys.executable, "-m", "attune_site.cli", "erase", export_pseudonym(erased.pseudonym), "--yes"],
            cwd=ROOT,
            env=deployment.host_env("b"),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert erase.returncode == 0, erase.stdout + erase.stderr
        second.refresh_from_db()
        assert second.status == ExportJob.Status.WITHDRAWN and second.replaced_by_id
        assert stored_keys_of(s3, second.pk) == []
        third = wait_for_job(second.replaced_by_id, ("done", "failed"))
        assert third.status == "done", third.error
        assert export_pseudonym(erased.pseudonym) not in bundle_participants(
            host_a.get(f"/api/exports/{third.pk}/download/").content
        )

        # --- A worker killed mid-export: the store stops answering, so the export cannot finish before the kill.
        s3.pause()
        try:
            started = host_b.post(f"/api/dataset-versions/{version.pk}/exports/", json={"fmt": "parquet"})
            assert started.status_code == 202, started.text
            killed_job = started.json()["id"]
            wait_for(
                lambda: ExportJob.objects.filter(pk=killed_job, status="running").exclude(lease_owner="").exists(),
                120,
                "a worker to claim the export",
                state=lambda: job_state(killed_job),
            )
            owner = ExportJob.objects.get(pk=killed_job).lease_owner
            holder = next(w for w in (worker_a, worker_b) if f":{w.pid}:" in owner)
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        finally:
            s3.resume()
        # Each host's health check pings its own worker by name: the dead one fails it though the other answers.
        dead, alive = ("a", "b") if holder is worker_a else ("b", "a")
        assert ping_worker(deployment, dead) != 0
        assert ping_worker(deployment, alive) == 0
        last = wait_for_job(killed_job, ("done", "failed"), timeout=300)
        assert last.status == "done" or last.error, "a failed export must say why"
        assert last.attempts == 2 and last.lease_owner == ""  # the survivor's sweeper queued it again
        assert hashlib.sha256(host_a.get(f"/api/exports/{last.pk}/download/").content).hexdigest() == (last.file_sha256)

    # --- The store and the database agree: every copy left is referenced, every finished export has its file.
    check = subprocess.run(
        [sys.executable, "-m", "attune_site.cli", "storage", "check"],
        cwd=ROOT,
        env=deployment.host_env("a"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "every stored file is referenced" in check.stdout

    # --- A third host started with another pseudonym key refuses to start, and says which variable.
    other_key = secrets.token_urlsafe(50)
    refused_web, _ = deployment.web("c", ATTUNE_PSEUDONYM_KEY=other_key)
    assert refused_web.wait(timeout=180) != 0
    refused_worker = deployment.worker("c", ATTUNE_PSEUDONYM_KEY=other_key)
    assert refused_worker.wait(timeout=180) != 0
    for name in ("web-c", "worker-c"):
        said = deployment.log(name).read_text(errors="replace")
        assert "ATTUNE_PSEUDONYM_KEY is not this deployment's" in said, said[-2000:]
        assert "ATTUNE_SECRET_KEY is not" not in said  # the secret key is the same: only the culprit is named
