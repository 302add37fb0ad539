"""Site-wide plumbing: health check, settings defaults, the attune command."""

import subprocess
import sys

import pytest
from django.conf import settings


@pytest.mark.django_db
def test_healthz_answers_when_the_database_does(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    expected_redis = "ok" if settings.REDIS_URL else "not configured"
    assert response.json() == {"status": "ok", "database": "ok", "redis": expected_redis}
    workers = client.get("/healthz?workers=1").json()["workers"]  # asked for: a broadcast ping
    assert workers == "in-process" if not settings.REDIS_URL else workers.endswith("answering")


def test_debug_is_off_by_default():
    assert settings.DEBUG is False


def test_attune_help_lists_the_commands():
    result = subprocess.run([sys.executable, "-m", "attune_site.cli"], capture_output=True, text=True, check=True)
    for command in ("demo", "serve", "worker", "import", "export", "validate", "synth", "eval", "score", "analyze"):
        assert f"  {command} " in result.stdout


def test_embedded_default_without_environment(tmp_path):
    code = (
        "import django, os; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.CELERY_BROKER_URL)"
    )
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "attune_site.settings", "ATTUNE_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ["django.db.backends.sqlite3", "True", "memory://localhost/"]
    env.update(DATABASE_URL="postgresql://u@db:5432/x", REDIS_URL="redis://r:6379/0")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ["django.db.backends.postgresql", "False", "redis://r:6379/0"]


@pytest.mark.django_db
def test_landing_page_points_participants_and_researchers_onwards(client):
    from collection.setup import ensure_defaults

    study = ensure_defaults().study
    body = client.get("/").content.decode()
    assert f"/join/{study.slug}/" in body
    assert "/research/" in body and "not a certificate" in body
    for model in ensure_defaults().models:
        assert model.name not in body


def test_the_embedded_broker_connects_without_a_warning(tmp_path):
    """The demo's first screen must not show a kombu warning about a missing broker host."""
    code = (
        "import logging, django; logging.basicConfig(); django.setup(); "
        "from attune_site.celery import app; connection = app.connection_for_write(); "
        "print(connection.info()['transport'])"
    )
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "attune_site.settings", "ATTUNE_DATA_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ["memory"]
    assert "No hostname" not in result.stderr, result.stderr
