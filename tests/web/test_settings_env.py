"""Settings fail loudly: typed environment readers, and importing settings writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from attune_site import datadir
from attune_site.env import env_bool, env_float, env_int, env_list, env_path, env_str

ROOT = Path(__file__).resolve().parents[2]
VAR = "ATTUNE_TEST_SETTING"


@pytest.fixture
def setenv(monkeypatch):
    def set_(value: str) -> None:
        monkeypatch.setenv(VAR, value)

    monkeypatch.delenv(VAR, raising=False)
    return set_


def assert_names(error: pytest.ExceptionInfo[ImproperlyConfigured], value: str, accepted: str) -> None:
    message = str(error.value)
    assert VAR in message and repr(value) in message and accepted in message, message


# --- booleans -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "Yes", "on", " On "])
def test_bool_true_words(setenv, value):
    setenv(value)
    assert env_bool(VAR, False) is True


@pytest.mark.parametrize("value", ["0", "false", "False", "NO", "off"])
def test_bool_false_words(setenv, value):
    setenv(value)
    assert env_bool(VAR, True) is False


def test_bool_unset_or_blank_is_the_default(setenv):
    assert env_bool(VAR, True) is True
    setenv("   ")
    assert env_bool(VAR, True) is True


@pytest.mark.parametrize("value", ["ture", "2", "enabled", "y"])
def test_bool_typo_is_an_error_not_off(setenv, value):
    setenv(value)
    with pytest.raises(ImproperlyConfigured) as error:
        env_bool(VAR, False)
    assert_names(error, value, "1/0, true/false, yes/no or on/off")


# --- numbers ---------------------------------------------------------------------


def test_int_parses_and_defaults(setenv):
    assert env_int(VAR, 12) == 12
    setenv(" 40 ")
    assert env_int(VAR, 12, minimum=1, maximum=100) == 40
    setenv("1")
    assert env_int(VAR, 12, minimum=1) == 1  # the bounds are inclusive


@pytest.mark.parametrize(
    ("value", "accepted"),
    [("twelve", "a whole number of at least 1"), ("1.5", "a whole number of at least 1"), ("0", "at least 1")],
)
def test_int_bad_value_names_the_variable(setenv, value, accepted):
    setenv(value)
    with pytest.raises(ImproperlyConfigured) as error:
        env_int(VAR, 12, minimum=1)
    assert_names(error, value, accepted)


def test_int_above_maximum(setenv):
    setenv("2000")
    with pytest.raises(ImproperlyConfigured) as error:
        env_int(VAR, 32, minimum=1, maximum=1024)
    assert_names(error, "2000", "from 1 to 1024")


def test_float_parses_and_defaults(setenv):
    assert env_float(VAR, 0.03) == 0.03
    setenv("2.5")
    assert env_float(VAR, 60.0, minimum=1) == 2.5


@pytest.mark.parametrize("value", ["sixty", "nan", "inf", "-0.5"])
def test_float_bad_value_names_the_variable(setenv, value):
    setenv(value)
    with pytest.raises(ImproperlyConfigured) as error:
        env_float(VAR, 0.03, minimum=0)
    assert_names(error, value, "a number of at least 0")


# --- strings, lists, paths --------------------------------------------------------


def test_list_drops_blank_items(setenv):
    assert env_list(VAR, ["localhost"]) == ["localhost"]
    setenv(" a.example , ,b.example,")
    assert env_list(VAR, ["localhost"]) == ["a.example", "b.example"]


def test_str_choices_are_case_insensitive_and_checked(setenv):
    levels = ("DEBUG", "INFO", "WARNING")
    assert env_str(VAR, "WARNING", choices=levels) == "WARNING"
    setenv("info")
    assert env_str(VAR, "WARNING", choices=levels) == "INFO"
    setenv("verbose")
    with pytest.raises(ImproperlyConfigured) as error:
        env_str(VAR, "WARNING", choices=levels)
    assert_names(error, "verbose", "one of DEBUG, INFO, WARNING")


def test_path_is_made_absolute(setenv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    setenv("relative/data")
    assert env_path(VAR, Path("/unused")) == tmp_path.resolve() / "relative" / "data"


# --- settings as a whole ------------------------------------------------------------


def _settings_process(data_dir: Path, code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "attune_site.settings",
        "ATTUNE_DATA_DIR": str(data_dir),
        **extra,
    }
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)


def test_importing_settings_writes_no_file(tmp_path):
    data_dir = tmp_path / "fresh"
    data_dir.mkdir()
    code = "import django; django.setup(); from django.conf import settings as s; print(len(s.SECRET_KEY) > 40)"
    result = _settings_process(data_dir, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True"]
    assert list(data_dir.iterdir()) == []


def test_importing_settings_does_not_create_a_missing_data_dir(tmp_path):
    data_dir = tmp_path / "not-there"
    result = _settings_process(data_dir, "import django; django.setup()")
    assert result.returncode == 0, result.stderr
    assert not data_dir.exists()


def test_a_bad_flag_stops_settings_with_its_name(tmp_path):
    result = _settings_process(tmp_path, "import django; django.setup()", ATTUNE_ALLOW_LIVE_MODELS="ture")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "ATTUNE_ALLOW_LIVE_MODELS='ture'" in result.stderr


def test_a_bad_number_stops_settings_with_its_name(tmp_path):
    result = _settings_process(tmp_path, "import django; django.setup()", ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE="ten")
    assert result.returncode != 0
    assert "ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE='ten'" in result.stderr


def test_prepare_creates_the_key_once_and_settings_read_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTUNE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ATTUNE_SECRET_KEY", raising=False)
    monkeypatch.delenv("ATTUNE_PSEUDONYM_KEY", raising=False)
    directory = datadir.prepare_data_dir()
    key_file = directory / datadir.SECRET_KEY_FILE
    key = key_file.read_text()
    assert len(key) >= 50 and (key_file.stat().st_mode & 0o777) == 0o600
    assert (directory / "staticfiles").is_dir()
    datadir.prepare_data_dir()  # a second entry point (another worker) keeps the first key
    assert key_file.read_text() == key
    # the pseudonym key is made beside the secret key; no temp file left
    assert sorted(p.name for p in directory.iterdir()) == ["pseudonym_key", "secret_key", "staticfiles"]
    code = "import django; django.setup(); from django.conf import settings as s; print(s.SECRET_KEY)"
    result = _settings_process(directory, code)
    assert result.stdout.strip() == key


def test_prepare_writes_no_key_when_one_is_configured(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTUNE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ATTUNE_SECRET_KEY", "configured")
    datadir.prepare_data_dir()
    assert not (tmp_path / datadir.SECRET_KEY_FILE).exists()


def test_the_attune_command_prepares_the_data_dir(tmp_path):
    result = _settings_process(
        tmp_path / "data",
        "from attune_site.cli import main; main(['attune', 'check'])",
        LITELLM_LOCAL_MODEL_COST_MAP="1",
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "secret_key").is_file()


def test_boolean_switches_read_their_words_when_settings_load(tmp_path):
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.ATTUNE_ALLOW_LIVE_MODELS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE)"
    )
    result = _settings_process(tmp_path, code, ATTUNE_ALLOW_LIVE_MODELS="Yes", ATTUNE_SECURE_COOKIES="false")
    assert result.stdout.split() == ["True", "False", "False"], result.stderr
    result = _settings_process(tmp_path, code, ATTUNE_ALLOW_LIVE_MODELS="off", ATTUNE_SECURE_COOKIES="1")
    assert result.stdout.split() == ["False", "True", "True"], result.stderr
    result = _settings_process(tmp_path, "import django; django.setup()", ATTUNE_SECURE_COOKIES="maybe")
    assert result.returncode != 0 and "ATTUNE_SECURE_COOKIES='maybe'" in result.stderr
