"""Data and export files are private to the account running Attune."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from attune_site import datadir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022():
    """A typical login umask for the test, restored afterwards (prepare_data_dir changes it)."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_prepare_data_dir_makes_everything_after_it_owner_only(tmp_path, monkeypatch, umask_022):
    monkeypatch.setenv("ATTUNE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ATTUNE_SECRET_KEY", raising=False)
    monkeypatch.delenv("ATTUNE_PSEUDONYM_KEY", raising=False)
    directory = datadir.prepare_data_dir()
    assert mode(directory) == 0o700 and mode(directory / datadir.STATIC_SUBDIR) == 0o700
    assert mode(directory / datadir.SECRET_KEY_FILE) == 0o600
    assert mode(directory / datadir.PSEUDONYM_KEY_FILE) == 0o600
    # Whatever the process writes next (a database, a run file) gets 0666 & ~077 = 0600.
    (directory / "db.sqlite3").write_text("x")
    (directory / "runs").mkdir()
    assert mode(directory / "db.sqlite3") == 0o600 and mode(directory / "runs") == 0o700


def test_an_existing_data_dir_keeps_its_mode(tmp_path, monkeypatch, umask_022):
    existing = tmp_path / "mounted"
    existing.mkdir(mode=0o750)
    monkeypatch.setenv("ATTUNE_DATA_DIR", str(existing))
    monkeypatch.setenv("ATTUNE_SECRET_KEY", "configured")
    datadir.prepare_data_dir()
    assert mode(existing) == 0o750


@pytest.mark.django_db(transaction=True)
def test_export_bundle_is_owner_only_even_under_umask_022(sample_conversations, researcher, export_dir, umask_022):
    from datasets.models import ExportJob
    from datasets.tasks import do_request_export
    from datasets.versions import do_freeze_dataset_version, export_root

    version = do_freeze_dataset_version("modes-v1", user=researcher)
    job = do_request_export(version, "jsonl", researcher)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE, job.error
    path = export_root() / job.file_path
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
