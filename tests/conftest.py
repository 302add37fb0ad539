"""Shared test configuration.

Tests under tests/core exercise the pure benchmark core and need no database;
tests under tests/web use Django's test database (SQLite by default, Postgres
when DATABASE_URL is set, as .ci/run does).
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
