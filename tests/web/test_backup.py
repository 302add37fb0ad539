"""``attune backup`` and ``attune restore`` as an operator runs them, on SQLite and on PostgreSQL.

A study is set up by ``attune demo --no-serve`` (participants, scored runs) and exported, then backed up,
restored into a fresh data directory (and, on PostgreSQL, a fresh database), and compared: every table's
rows, the participants' pseudonyms in a new export (the pseudonym key came back) and the scores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCORES = (
    "import json; from scoring.models import RunScore; "
    "print(json.dumps(list(RunScore.objects.order_by('run__evaluated_model__name', 'run__mode', 'run__pk')"
    ".values_list('run__evaluated_model__name', 'run__mode', 'metrics'))))"
)


def attune(*args: str, env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "attune_site.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    if ok:
        assert result.returncode == 0, f"attune {args}\n{result.stdout}\n{result.stderr}"
    return result


def pseudonyms(export: Path) -> set[str]:
    lines = export.read_text(encoding="utf-8").splitlines()
    return {json.loads(line)["participant_profile"]["participant_id"] for line in lines if line.strip()}


@pytest.fixture(params=["sqlite", "postgresql"])
def places(request, tmp_path) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """Two deployments of one engine: the source and an empty target, each with its own data directory."""
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PYTHONPATH"}}
    base |= {"PYTHONPATH": str(REPO), "ATTUNE_OFFLINE_STREAM_DELAY": "0"}
    source = {**base, "ATTUNE_DATA_DIR": str(tmp_path / "source")}
    target = {**base, "ATTUNE_DATA_DIR": str(tmp_path / "target")}
    if request.param == "sqlite":
        yield source, target
        return
    server = os.environ.get("DATABASE_URL", "")
    if not server.startswith("postgres"):
        pytest.skip("needs a PostgreSQL server (DATABASE_URL)")
    import psycopg

    root = server.rsplit("/", 1)[0]
    names = [f"attune_backup_{uuid.uuid4().hex[:10]}_{side}" for side in ("source", "target")]
    with psycopg.connect(f"{root}/postgres", autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {**source, "DATABASE_URL": f"{root}/{names[0]}"}, {**target, "DATABASE_URL": f"{root}/{names[1]}"}
    finally:
        with psycopg.connect(f"{root}/postgres", autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_study_restored_from_a_backup_is_the_same_study(places, tmp_path):
    source, target = places
    attune("demo", "--no-serve", env=source)
    before_export = tmp_path / "before.jsonl"
    attune("export", "--format", "jsonl", "--out", str(before_export), env=source)
    scores_before = attune("shell", "-c", SCORES, env=source).stdout
    archive = tmp_path / "study.tar.gz"
    made = attune("backup", "--out", str(archive), env=source)
    assert "Wrote" in made.stdout and oct(archive.stat().st_mode & 0o777) == "0o600"
    assert attune("backup", "--out", str(archive), env=source, ok=False).returncode != 0  # never overwritten

    attune("migrate", "--verbosity", "0", env=target)  # an operator's fresh deployment, schema and all
    restored = attune("restore", str(archive), env=target)
    assert "every table as in the backup" in restored.stdout
    after_export = tmp_path / "after.jsonl"
    attune("export", "--format", "jsonl", "--out", str(after_export), env=target)
    assert pseudonyms(after_export) == pseudonyms(before_export) != set()  # the pseudonym key came back
    assert attune("shell", "-c", SCORES, env=target).stdout == scores_before
    keys = Path(target["ATTUNE_DATA_DIR"]) / "pseudonym_key"
    assert keys.read_text() == (Path(source["ATTUNE_DATA_DIR"]) / "pseudonym_key").read_text()

    again = attune("restore", str(archive), env=target, ok=False)  # a study is there now: refused
    assert again.returncode != 0 and "already holds a study's data" in again.stderr
    assert attune("restore", str(archive), "--force", env=target).returncode == 0


def test_a_damaged_or_foreign_archive_is_refused_before_anything_changes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PYTHONPATH"}}
    env |= {"PYTHONPATH": str(REPO), "ATTUNE_DATA_DIR": str(tmp_path / "data")}
    attune("migrate", "--verbosity", "0", env=env)
    archive = tmp_path / "backup.tar.gz"
    attune("backup", "--out", str(archive), env=env)
    tampered = tmp_path / "tampered.tar.gz"
    with tarfile.open(archive, "r:gz") as original, tarfile.open(tampered, "w:gz") as copy:
        for member in original.getmembers():
            data = original.extractfile(member).read()
            if member.name == "keys/pseudonym_key":
                data = b"someone else's key"
                member.size = len(data)
            import io

            copy.addfile(member, io.BytesIO(data))
    refused = attune("restore", str(tampered), "--force", env=env, ok=False)
    assert refused.returncode != 0 and "keys/pseudonym_key does not match its checksum" in refused.stderr
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive")
    junk = attune("restore", str(tmp_path / "junk.tar.gz"), env=env, ok=False)
    assert junk.returncode != 0 and "not a readable Attune backup" in junk.stderr
