"""A benchmark's own PostgreSQL database: dropped and created afresh as a copy of a migrated template, then
Django set up on it.

The benchmarks that need a database server never touch the one a developer works in: each names its own
(``--database``) and starts it empty, so figures from two runs are taken on the same rows. Migrating an empty
database costs about 15 s of CPU, paid by every benchmark run; so the schema is migrated once per state of the
migrations, into a template database on the same server (``attune_bench_template_<digest>``), and each
benchmark's database is a copy of it, made in under a second. The digest covers every migration file and
Django's version, so a changed migration makes a new template (and the stale ones are dropped).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PREFIX = "attune_bench_template_"
#: The advisory lock that lets one process at a time make or copy the template (two benchmarks run at once in CI).
_LOCK_KEY = 0x4174_756E_6554  # an arbitrary constant of our own


def fresh_database(url: str, env: Mapping[str, str]) -> None:
    """Drop and recreate the database at ``url`` as a migrated copy (``migrated_copy``), then set Django up in
    this process with ``env`` (which must name that database in DATABASE_URL)."""
    migrated_copy(url, env)
    os.environ.update({k: v for k, v in env.items() if k != "PYTHONPATH"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")
    import django

    django.setup()


def migrated_copy(url: str, env: Mapping[str, str]) -> None:
    """Drop the database at ``url`` and create it again with this checkout's schema, empty: a copy of the
    server's migrated template, which is made first (``manage.py migrate`` with ``env``) when there is none."""
    import psycopg

    server, name = url.rsplit("/", 1)
    template = TEMPLATE_PREFIX + migrations_digest()
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (template,)).fetchone():
                _make_template(conn, server, template, env)
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))


def migrations_digest() -> str:
    """12 hex digits naming the schema: every migration file's path and bytes, and Django's version."""
    import django

    digest = hashlib.sha256(django.get_version().encode())
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def _make_template(conn: psycopg.Connection[Any], server: str, template: str, env: Mapping[str, str]) -> None:
    """Migrate a new database and only then give it the template's name, so a run killed midway leaves no
    half-migrated template behind; templates of other migration states are dropped."""
    building = template + "_building"
    execute = conn.execute
    stale = execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (TEMPLATE_PREFIX + "%",)).fetchall()
    for (old,) in stale:
        execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
    execute(f'CREATE DATABASE "{building}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env={**env, "DATABASE_URL": f"{server}/{building}"},
        check=True,
    )
    execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')
