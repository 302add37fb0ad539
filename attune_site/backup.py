"""One consistent archive of everything a study needs to be restored: database, keys and kept files.

A study's data is the one thing that cannot be collected again. ``attune backup`` writes a tar archive:

- ``database.dump`` (PostgreSQL: ``pg_dump`` in its custom format, a consistent snapshot while the site
  runs) or ``database.sqlite3`` (SQLite: the database's own online backup, consistent under writers);
- ``keys/secret_key`` and ``keys/pseudonym_key``: without the pseudonym key, restored participants would
  get new pseudonyms and an erasure request quoting an export's id would find no one;
- ``files/``: export bundles and run files of the data directory, copied before they are checksummed;
- ``manifest.json``: format, engine, time, the newest migration of each app, row counts per table and the
  SHA-256 of every other member.

``attune restore`` checks everything it needs before it changes anything (every member and checksum, the
database file and both keys, ``pg_restore``, a backup from a newer release), refuses a database or data
directory that already holds data unless ``--force``, and a backup of another engine (use export and import
to move between SQLite and PostgreSQL). Stop the web and worker processes before a restore: it replaces the
database under them. The checksums catch damage, not a forger: keep archives where only operators write.
A participant erased before a backup is not in it; older backups keep them until they are deleted.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from attune_site.datadir import PSEUDONYM_KEY_FILE, SECRET_KEY_FILE
from collection.models import Participant, Study

FORMAT = "attune-backup/1"
KEPT_FOLDERS = ("exports", "runs")  # the data directory's files that nothing else can rebuild
KEYS = (SECRET_KEY_FILE, PSEUDONYM_KEY_FILE)


class BackupError(Exception):
    """Backup or restore cannot go on; ``str()`` says what and where, and nothing was changed."""


@dataclass(frozen=True)
class RestoreReport:
    engine: str
    rows: dict[str, int]
    files: int
    warnings: list[str]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _engine() -> str:
    return "postgresql" if connection.vendor == "postgresql" else "sqlite"


def _pg_env() -> tuple[list[str], dict[str, str]]:
    """Connection arguments for pg_dump / pg_restore from Django's settings (the password via the env)."""
    db = settings.DATABASES["default"]
    args = ["--host", str(db.get("HOST") or "127.0.0.1"), "--port", str(db.get("PORT") or 5432)]
    if db.get("USER"):
        args += ["--username", str(db["USER"])]
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])
    return args, env


def _tables() -> list[str]:
    """Every model's table (auto-created many-to-many tables included)."""
    return sorted(
        {m._meta.db_table for m in apps.get_models(include_auto_created=True) if m._meta.managed and not m._meta.proxy}
    )


def row_counts() -> dict[str, int]:
    """Rows per table, by table name."""
    with connection.cursor() as cursor:
        counts = {}
        for table in _tables():
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = int(cursor.fetchone()[0])
    return counts


def _latest_migrations() -> dict[str, str]:
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        latest[app] = max(latest.get(app, ""), name)
    return dict(sorted(latest.items()))


def _run(command: list[str], env: dict[str, str], what: str) -> None:
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise BackupError(f"{what}: {command[0]} is not installed (PostgreSQL's client programs)") from exc
    if result.returncode != 0:
        raise BackupError(f"{what} failed ({command[0]} exit {result.returncode}): {result.stderr.strip()[-500:]}")


def _dump_database(target: Path) -> tuple[Path, dict[str, int]]:
    """The database's consistent copy, and its row counts taken from that same state."""
    if _engine() == "postgresql":
        path = target / "database.dump"
        args, env = _pg_env()
        name = str(settings.DATABASES["default"]["NAME"])
        # pg_dump reads the snapshot this transaction exported, so the counts describe exactly what it dumps.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute("SELECT pg_export_snapshot()")
                snapshot = str(cursor.fetchone()[0])
            counts = row_counts()
            command = ["pg_dump", "--format=custom", "--no-owner", "--no-privileges", f"--snapshot={snapshot}"]
            _run([*command, *args, "--file", str(path), name], env, "pg_dump")
        return path, counts
    path = target / "database.sqlite3"
    source = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]))
    copy = sqlite3.connect(str(path))
    try:
        source.backup(copy)  # SQLite's online backup: a consistent copy while the site writes
        counts = {t: int(copy.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]) for t in _tables()}
    finally:
        copy.close()
        source.close()
    return path, counts


def _key_values() -> dict[str, str]:
    """The keys this deployment uses, whether they come from the environment or the data directory."""
    return {SECRET_KEY_FILE: str(settings.SECRET_KEY), PSEUDONYM_KEY_FILE: str(settings.ATTUNE_PSEUDONYM_KEY)}


def do_backup(out: Path, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Write the archive to ``out`` (refusing to overwrite a file); returns its manifest."""
    if out.exists():
        raise BackupError(f"{out} exists already; give a new file name (backups are never overwritten)")
    if not out.parent.is_dir():
        raise BackupError(f"{out.parent} is not a folder")
    data_dir = Path(settings.DATA_DIR)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".attune-backup-") as work:
        stage = Path(work)
        progress("database")
        database, counts = _dump_database(stage)
        members: dict[str, Path] = {database.name: database}
        (stage / "keys").mkdir()
        for name, value in _key_values().items():
            path = stage / "keys" / name
            path.write_text(value, encoding="utf-8")
            members[f"keys/{name}"] = path
        progress("files")
        for folder in KEPT_FOLDERS:
            root = data_dir / folder
            if root.is_dir():  # copied first: the checksum and the archive then describe the same bytes
                for path in sorted(p for p in root.rglob("*") if p.is_file()):
                    name = f"files/{folder}/{path.relative_to(root).as_posix()}"
                    copy = stage / name
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, copy)
                    members[name] = copy
        manifest = {
            "format": FORMAT,
            "created_at": timezone.now().isoformat(),
            "engine": _engine(),
            "migrations": _latest_migrations(),
            "rows": counts,
            "sha256": {name: _sha256(path) for name, path in members.items()},
        }
        progress("archive")
        partial = stage / "archive.partial"  # inside the private staging folder until it is whole
        try:
            with tarfile.open(partial, "w:gz") as archive:
                data = json.dumps(manifest, indent=2, sort_keys=True).encode()
                info = tarfile.TarInfo("manifest.json")
                info.size, info.mode = len(data), 0o600
                archive.addfile(info, io.BytesIO(data))
                for name, path in members.items():
                    archive.add(str(path), arcname=name, recursive=False)
            os.chmod(partial, 0o600)
            partial.rename(out)  # a backup file either is whole or does not exist
        finally:
            partial.unlink(missing_ok=True)
    return manifest


def _read_archive(path: Path, into: Path) -> dict[str, Any]:
    """Unpack and check the archive: its manifest, and every member's checksum, before anything changes."""
    if not path.is_file():
        raise BackupError(f"{path}: no such file")
    try:
        with tarfile.open(path, "r:gz") as archive:
            archive.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BackupError(f"{path} is not a readable Attune backup ({exc})") from exc
    try:
        manifest = json.loads((into / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(f"{path} has no readable manifest.json: not an Attune backup") from exc
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{path} is in format {manifest.get('format')!r}; this version restores {FORMAT!r}")
    for name, expected in manifest.get("sha256", {}).items():
        member = into / name
        if not member.is_file():
            raise BackupError(f"{path}: {name} is listed in the manifest but missing")
        if _sha256(member) != expected:
            raise BackupError(f"{path}: {name} does not match its checksum; the archive is damaged or altered")
    return manifest


def _check_restorable(manifest: dict[str, Any], stage: Path, path: Path, engine: str) -> None:
    """Everything restore needs, checked before it changes anything: the members, the tools, the schema."""
    needed = ["database.dump" if engine == "postgresql" else "database.sqlite3", *(f"keys/{k}" for k in KEYS)]
    missing = [name for name in needed if name not in manifest.get("sha256", {}) or not (stage / name).is_file()]
    if missing:
        raise BackupError(f"{path} lacks {', '.join(missing)}: not a whole Attune backup")
    if engine == "postgresql" and shutil.which("pg_restore") is None:
        raise BackupError("pg_restore is not installed (PostgreSQL's client programs); nothing was changed")
    ours = _code_migrations()
    theirs = manifest.get("migrations", {})
    newer = {app: name for app, name in theirs.items() if app in ours and name > ours[app]}
    if newer:
        raise BackupError(
            f"{path} was made by a newer release (migrations {newer}); upgrade this deployment first. "
            "Nothing was changed."
        )


def _code_migrations() -> dict[str, str]:
    """The newest migration of each app this code knows."""
    from django.db.migrations.loader import MigrationLoader

    latest: dict[str, str] = {}
    for app, name in MigrationLoader(None, ignore_no_migrations=True).disk_migrations:
        latest[app] = max(latest.get(app, ""), name)
    return latest


def _holds_data() -> bool:
    tables = set(connection.introspection.table_names())
    return Study._meta.db_table in tables and (Participant.objects.exists() or Study.objects.exists())


def do_restore(path: Path, force: bool = False, progress: Callable[[str], None] = lambda _: None) -> RestoreReport:
    """Restore the archive into this deployment's database and data directory; see the module docstring."""
    data_dir = Path(settings.DATA_DIR)
    with tempfile.TemporaryDirectory(prefix=".attune-restore-", dir=data_dir) as work:
        stage = Path(work)
        progress("checking")
        manifest = _read_archive(path, stage)
        engine = _engine()
        if manifest["engine"] != engine:
            raise BackupError(
                f"{path} is a {manifest['engine']} backup and this deployment uses {engine}; restore it into a "
                f"{manifest['engine']} deployment, or move the data with attune export and attune import"
            )
        _check_restorable(manifest, stage, path, engine)
        kept_files = any((data_dir / folder).is_dir() and any((data_dir / folder).iterdir()) for folder in KEPT_FOLDERS)
        if not force and (_holds_data() or kept_files):
            raise BackupError(
                "this database or data directory already holds a study's data; restore into an empty one, or "
                "pass --force to replace what is there"
            )
        progress("database")
        if engine == "postgresql":
            args, env = _pg_env()
            name = str(settings.DATABASES["default"]["NAME"])
            with connection.cursor() as cursor:
                cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
            connection.close()
            _run(
                [
                    "pg_restore",
                    "--no-owner",
                    "--no-privileges",
                    "--exit-on-error",
                    *args,
                    "--dbname",
                    name,
                    str(stage / "database.dump"),
                ],
                env,
                "pg_restore",
            )
        else:
            target = Path(str(settings.DATABASES["default"]["NAME"]))
            connection.close()
            for suffix in ("-wal", "-shm"):
                Path(str(target) + suffix).unlink(missing_ok=True)
            shutil.copyfile(stage / "database.sqlite3", target)
        progress("keys and files")
        for name in KEYS:  # written beside, then moved over: a key is never missing, even for a moment
            fresh = data_dir / f".{name}.restoring"
            shutil.copyfile(stage / "keys" / name, fresh)
            os.chmod(fresh, 0o600)
            os.replace(fresh, data_dir / name)
        files = 0
        for folder in KEPT_FOLDERS:
            shutil.rmtree(data_dir / folder, ignore_errors=True)
            source = stage / "files" / folder
            if source.is_dir():
                shutil.copytree(source, data_dir / folder)
                files += sum(1 for p in source.rglob("*") if p.is_file())
        expected = dict(manifest["rows"])
        if any(name < _code_migrations().get(app, "") for app, name in manifest.get("migrations", {}).items()):
            # An older release's backup: brought up to this release's schema; its data migrations may add or
            # change rows, so only the study's own tables are compared.
            progress("migrating the restored database to this release")
            from django.core.management import call_command

            call_command("migrate", verbosity=0)
            study_tables = {
                m._meta.db_table
                for m in apps.get_models(include_auto_created=True)
                if m._meta.app_label in ("collection", "annotation", "datasets", "scoring", "research")
            }
            expected = {t: n for t, n in expected.items() if t in study_tables}
        rows = row_counts()
        differing = {t: (n, rows.get(t)) for t, n in expected.items() if rows.get(t) != n}
        if differing:
            raise BackupError(f"restored, but these tables differ from the backup (expected, found): {differing}")
        warnings = [
            f"{variable} is set in the environment and differs from the backup's key: set it to the backup's "
            f"value (keys/{name} in the archive), or {what}"
            for variable, name, what in (
                ("ATTUNE_SECRET_KEY", SECRET_KEY_FILE, "everyone signs in again"),
                ("ATTUNE_PSEUDONYM_KEY", PSEUDONYM_KEY_FILE, "pseudonyms and platform-id digests will not match"),
            )
            if os.environ.get(variable) and os.environ[variable] != (stage / "keys" / name).read_text(encoding="utf-8")
        ]
        return RestoreReport(engine=engine, rows=rows, files=files, warnings=warnings)
