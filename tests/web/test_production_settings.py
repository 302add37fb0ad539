"""ATTUNE_PRODUCTION=1: HTTPS settings on, no start without a real key, and a compose file that passes everything.

Settings are read once per process, so each production case runs in a subprocess
with its own environment (and a temporary data dir: nothing is written to the
real one). Without the switch nothing changes: the rest of the suite runs the demo.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from attune_site.health import probe_host
from attunebench.replay.llm import DEFAULT_PROVIDER_KEY_ENV
from devtools.reference_docs import read_variables

ROOT = Path(__file__).resolve().parents[2]
HOST = "study.example.org"
# 50 random URL-safe bytes: 67 characters, what the README tells the operator to generate.
REAL_KEY = secrets.token_urlsafe(50)
REAL_PSEUDONYM_KEY = secrets.token_urlsafe(50)


def _run(tmp_path: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    # Earlier tests may leave DJANGO_ALLOW_ASYNC_UNSAFE set in this process; a deployment never has it.
    dropped = {"DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ATTUNE_") and k not in dropped}
    clean.update({"ATTUNE_DATA_DIR": str(tmp_path / "data"), "DJANGO_SETTINGS_MODULE": "attune_site.settings"})
    clean.update(env)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120, check=False
    )


def _production(tmp_path: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    settings = {
        "ATTUNE_PRODUCTION": "1",
        "ATTUNE_SECRET_KEY": REAL_KEY,
        "ATTUNE_PSEUDONYM_KEY": REAL_PSEUDONYM_KEY,
        "ATTUNE_ALLOWED_HOSTS": HOST,
    }
    return _run(tmp_path, args, **{**settings, **env})


def test_deploy_check_passes_at_warning_level_and_reports_both_keys(tmp_path):
    result = _production(tmp_path, ["manage.py", "check", "--deploy", "--fail-level", "WARNING"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNINGS" not in result.stderr + result.stdout and "ERRORS" not in result.stderr + result.stdout
    for variable in ("ATTUNE_SECRET_KEY", "ATTUNE_PSEUDONYM_KEY"):
        assert f"{variable}: from the environment variable {variable}" in result.stderr + result.stdout


def test_https_settings_are_on(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_PROXY_SSL_HEADER, s.DEBUG)"
    )
    result = _production(tmp_path, ["-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "True True 31536000 True ('HTTP_X_FORWARDED_PROTO', 'https') False"


def test_templates_are_parsed_once_per_process(tmp_path):
    # Rendering is a large part of a page's CPU: the cached loader keeps each parsed template for the process.
    code = (
        "import django; django.setup(); from django.template import engines; "
        "print([type(loader).__module__ for loader in engines['django'].engine.template_loaders])"
    )
    result = _production(tmp_path, ["-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "['django.template.loaders.cached']"


def test_without_the_switch_the_demo_settings_are_unchanged(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)"
    )
    result = _run(tmp_path, ["-c", code])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "False False 0 None"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("", "ATTUNE_PRODUCTION=1 needs ATTUNE_SECRET_KEY"),
        ("collectstatic-only", "refuses this ATTUNE_SECRET_KEY"),  # the Dockerfile's build-time key
        ("short-but-random-Zq81", "refuses this ATTUNE_SECRET_KEY"),  # 21 characters < 50
        ("django-insecure-" + "x" * 50, "refuses this ATTUNE_SECRET_KEY"),
        ("ab" * 30, "refuses this ATTUNE_SECRET_KEY"),  # 60 characters, only 2 distinct
    ],
)
def test_refuses_a_missing_or_weak_secret_key(tmp_path, key, expected):
    result = _production(tmp_path, ["-c", "import django; django.setup()"], ATTUNE_SECRET_KEY=key)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and expected in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("", "ATTUNE_PRODUCTION=1 needs ATTUNE_PSEUDONYM_KEY"),
        ("collectstatic-only", "refuses this ATTUNE_PSEUDONYM_KEY"),
        ("short-but-random-Zq81", "refuses this ATTUNE_PSEUDONYM_KEY"),
    ],
)
def test_refuses_a_missing_or_weak_pseudonym_key(tmp_path, key, expected):
    """Each host would otherwise generate its own: one participant, two ids (docs/several-machines.md)."""
    result = _production(tmp_path, ["-c", "import django; django.setup()"], ATTUNE_PSEUDONYM_KEY=key)
    assert result.returncode != 0
    assert expected in result.stderr


def test_refuses_default_hosts_and_debug(tmp_path):
    result = _production(tmp_path, ["-c", "import django; django.setup()"], ATTUNE_ALLOWED_HOSTS="")
    assert result.returncode != 0 and "needs ATTUNE_ALLOWED_HOSTS" in result.stderr, result.stderr
    result = _production(tmp_path, ["-c", "import django; django.setup()"], ATTUNE_DEBUG="1")
    assert result.returncode != 0 and "refuses ATTUNE_DEBUG=1" in result.stderr, result.stderr


def test_healthz_answers_the_container_probe_over_plain_http(tmp_path):
    """The probe's Host passes host validation and /healthz skips the HTTPS redirect; nothing else does."""
    (tmp_path / "data").mkdir()
    code = (
        "import django; django.setup(); from django.conf import settings; from django.test import Client; "
        "from attune_site.health import probe_host; c = Client(); "
        "print(c.get('/healthz', HTTP_HOST=probe_host(settings.ALLOWED_HOSTS)).status_code, "
        "c.get('/healthz').status_code, "  # Host 'testserver' is not allowed: 400 as for any request
        f"c.get('/research/login/', HTTP_HOST='{HOST}').status_code)"  # other pages still redirect to HTTPS
    )
    result = _production(tmp_path, ["-c", code], ATTUNE_ALLOWED_HOSTS=f"{HOST},www.{HOST}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "200 400 301"


def test_probe_host_is_the_first_usable_allowed_host():
    assert probe_host([HOST, "localhost"]) == HOST
    assert probe_host([".example.org"]) == "example.org"  # matches the domain and its subdomains
    assert probe_host(["*"]) == "localhost"
    assert probe_host([]) == "localhost"


def test_the_image_build_writes_no_secret_key(tmp_path):
    """Run the Dockerfile's collectstatic step as written: the data dir it leaves holds no key."""
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")  # join continued lines
    step = next(line for line in dockerfile.splitlines() if "collectstatic" in line and line.startswith("RUN"))
    words = shlex.split(step.split("&&", 1)[1])
    assignments = dict(word.split("=", 1) for word in words if re.fullmatch(r"[A-Z_]+=.*", word))
    assert assignments.get("ATTUNE_SECRET_KEY"), "collectstatic must run with a build-only ATTUNE_SECRET_KEY"
    command = [word for word in words if word not in {f"{k}={v}" for k, v in assignments.items()}]
    assert command[:2] == ["python", "manage.py"]
    result = _run(tmp_path, command[1:], **assignments)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "staticfiles").is_dir()
    assert not (tmp_path / "data" / "secret_key").exists()
    assert not (
        tmp_path / "data" / "pseudonym_key"
    ).exists()  # seeded into a fresh volume, it would be every deployment's


# --- docker-compose.yml -----------------------------------------------------------


def _compose() -> dict:
    yaml = pytest.importorskip("yaml")  # PyYAML is not a dependency of Attune: without it these tests skip
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def test_compose_passes_every_documented_variable_to_web_and_worker():
    variables = {variable.name for variable in read_variables()}  # what the configuration reference lists
    assert {"ATTUNE_PRODUCTION", "ATTUNE_SECRET_KEY", "ATTUNE_CSRF_TRUSTED_ORIGINS", "DATABASE_URL"} <= variables
    services = _compose()["services"]
    for name in ("web", "worker", "migrate"):
        passed = set(services[name]["environment"])
        assert variables <= passed, f"{name} misses {sorted(variables - passed)}"
        assert set(DEFAULT_PROVIDER_KEY_ENV) <= passed, f"{name} misses a provider key"


def test_compose_migrates_once_before_web_and_worker():
    services = _compose()["services"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert "migrate" not in " ".join(services[name]["command"])


def test_compose_health_checks_web_with_the_allowed_host_probe():
    assert _compose()["services"]["web"]["healthcheck"]["test"] == ["CMD", "python", "-m", "attune_site.health"]


def test_compose_worker_health_check_pings_this_containers_worker_only():
    """A broadcast ping is answered by any host's worker, so a dead worker here would never be restarted."""
    check = _compose()["services"]["worker"]["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL"
    assert "inspect ping --destination celery@$$HOSTNAME" in check[1]  # compose turns $$ into $ for the shell
    assert "python manage.py worker" in " ".join(_compose()["services"]["worker"]["command"])  # node celery@<host>
