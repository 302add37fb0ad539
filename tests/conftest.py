"""Shared test configuration.

Tests under tests/core exercise the pure benchmark core and need no database;
tests under tests/web use Django's test database (SQLite by default, Postgres
when DATABASE_URL is set, as .ci/run does).
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest
from hypothesis import settings as hypothesis_settings

from attune_site.datadir import PSEUDONYM_KEY_FILE, prepare_data_dir, stored_secret_key

# Property tests draw the same examples on every run (and keep no example database between runs): a suite
# that passes once passes again, and a failure found while writing a test is kept as an explicit example.
hypothesis_settings.register_profile("attune", derandomize=True, database=None)
hypothesis_settings.load_profile("attune")

# The test run is an entry point like ``attune``: it prepares the data directory (settings never write).
prepare_data_dir()
# pytest-django loads the settings before this file, so on a fresh data directory they fell back to a
# pseudonym key derived from the secret key; read the generated file now, as every later process will.
if not os.environ.get("ATTUNE_PSEUDONYM_KEY"):
    from django.conf import settings as _settings

    _settings.ATTUNE_PSEUDONYM_KEY = stored_secret_key(_settings.DATA_DIR, PSEUDONYM_KEY_FILE)


def _hash_passwords_quickly() -> None:
    """Accounts made here are hashed by production's algorithm at few iterations (``tests.passwords``); a hash
    made at production's count (by a child process) still checks, by the hasher listed after it."""
    from django.conf import settings
    from django.contrib.auth.hashers import get_hashers, get_hashers_by_algorithm

    settings.PASSWORD_HASHERS = ["tests.passwords.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    get_hashers.cache_clear()
    get_hashers_by_algorithm.cache_clear()


_hash_passwords_quickly()


@pytest.fixture(autouse=True)
def _tasks_in_process_unless_marked_celery(request):
    """Only tests marked ``celery`` hand tasks to a real worker.

    Every other test runs Celery tasks in the calling process, as the embedded
    default does, so the suite behaves the same whether or not REDIS_URL is set;
    runs started from the web are replayed in the request too, not in background
    threads (``scoring.embedded_runs``).
    """
    if request.node.get_closest_marker("celery"):
        yield
        return
    from django.conf import settings

    from attune_site.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    # Runs started from the launcher are replayed before the request returns, as the tasks are: a test reads
    # the outcome at once. The background replay of the embedded default has its own tests (a real server).
    saved_background = settings.ATTUNE_EMBEDDED_RUNS_IN_BACKGROUND
    settings.ATTUNE_EMBEDDED_RUNS_IN_BACKGROUND = False
    try:
        yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = saved
        settings.ATTUNE_EMBEDDED_RUNS_IN_BACKGROUND = saved_background


@pytest.fixture(scope="session")
def _redis_for_tests():
    """One Redis client for the whole session (None without REDIS_URL), not a connection per test."""
    from django.conf import settings

    if not settings.REDIS_URL:
        yield None
        return
    import redis

    with redis.Redis.from_url(settings.REDIS_URL) as client:
        yield client


@pytest.fixture(autouse=True)
def _no_shared_call_cache_from_earlier_tests(_redis_for_tests):
    """Each test starts without model answers cached or journaled in Redis (when REDIS_URL is set).

    They outlive a test, and a test run too, and a replay that finds its answers
    there sends nothing: a test counting what a provider was sent would count
    another test's replay, or the previous run's, instead of its own. (Journal
    keys name run-conversation ids, which a new test database reuses.)
    """
    if _redis_for_tests is not None:
        from scoring.call_courier import REDIS_JOURNAL_PREFIX, REDIS_PENDING_PREFIX
        from scoring.replay_service import REDIS_CACHE_PREFIX

        for prefix in (REDIS_CACHE_PREFIX, REDIS_JOURNAL_PREFIX, REDIS_PENDING_PREFIX):
            keys = list(_redis_for_tests.scan_iter(f"{prefix}*"))
            if keys:
                _redis_for_tests.delete(*keys)
    yield


# Fixtures and markers that mean a test reads or writes the database Django's test runner gives it.
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


def pytest_addoption(parser):
    parser.addoption(
        "--database-dependent-only",
        action="store_true",
        help="run only the tests whose outcome can depend on the database and Redis the run is given "
        "(they use Django's test database, or are marked 'embedded'); CI's second pass, on the embedded "
        "default, runs these and leaves the rest to the first pass",
    )


def depends_on_the_backends(item: pytest.Item) -> bool:
    """True for a test that may behave differently on SQLite without Redis than on Postgres with Redis."""
    if item.get_closest_marker("embedded") or item.get_closest_marker("django_db"):
        return True
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--database-dependent-only"):
        return
    kept = [item for item in items if depends_on_the_backends(item)]
    dropped = [item for item in items if not depends_on_the_backends(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
