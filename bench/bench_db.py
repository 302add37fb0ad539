"""A benchmark's own PostgreSQL database: dropped, created and migrated afresh, then Django set up on it.

The benchmarks that need a database server never touch the one a developer works in: each names its own
(``--database``) and starts it empty, so figures from two runs are taken on the same rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fresh_database(url: str, env: Mapping[str, str]) -> None:
    """Drop and recreate the database at ``url``, migrate it with ``env`` (which must name it in
    DATABASE_URL), then set Django up in this process with the same environment."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=dict(env), check=True
    )
    os.environ.update({k: v for k, v in env.items() if k != "PYTHONPATH"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "attune_site.settings")
    import django

    django.setup()
