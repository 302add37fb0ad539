"""The data directory and the secret key kept in it, prepared by the entry points, never by settings.

Importing settings must not write anything (a read-only checkout, a test
importing settings, ``manage.py check`` on a fresh machine). So the entry points
that start a real process (``attune``, ``manage.py``, the WSGI application, the
test Celery worker) call ``prepare_data_dir`` first: it creates the directory and,
when ``ATTUNE_SECRET_KEY`` is not set, a secret key file beside the database,
once. Settings only read that file. A process started some other way without
the variable gets a key of its own for its lifetime (sessions then end with it).

The data holds participants' conversations, so an entry point also makes every
file the process creates afterwards private to its owner (umask 077: files
0600, folders 0700): the database, exports, run files and the key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from attune_site.env import env_path, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
# Where an installed package keeps the top-level folders (the build copies them there: setup.py).
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
SECRET_KEY_FILE = "secret_key"
# The key of participant pseudonyms in exports (datasets/pseudonyms.py), kept beside the secret key.
PSEUDONYM_KEY_FILE = "pseudonym_key"
STATIC_SUBDIR = "staticfiles"
# Permission bits withheld from everything a prepared process creates: group and others get nothing.
PRIVATE_UMASK = 0o077


def installed() -> bool:
    """True when running from an installed package rather than a source checkout."""
    return BUNDLED_DIR.is_dir()


def resource_dir(name: str) -> Path:
    """``templates``, ``static`` or ``sample_data``: top level in a checkout, bundled in an installed package."""
    return BUNDLED_DIR / name if installed() else BASE_DIR / name


def data_dir() -> Path:
    """``ATTUNE_DATA_DIR``, else ``data`` beside the code in a checkout or in the working directory when installed.

    An installed package lives in site-packages, which is no place for a database.
    Not created here.
    """
    return env_path("ATTUNE_DATA_DIR", (Path.cwd() if installed() else BASE_DIR) / "data")


def stored_secret_key(directory: Path, name: str = SECRET_KEY_FILE) -> str | None:
    """The key generated into ``directory`` earlier, if there is one."""
    try:
        key = (directory / name).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return key or None


def _write_secret_key(directory: Path, name: str = SECRET_KEY_FILE) -> None:
    """Publish a new key atomically; when two processes race, the first file wins and both read it."""
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".secret-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(secrets.token_urlsafe(50))
        os.chmod(temp, 0o600)
        with contextlib.suppress(FileExistsError):  # a key is there already: never replace it
            os.link(temp, directory / name)
    finally:
        os.unlink(temp)


def prepare_data_dir() -> Path:
    """Make new files owner-only, create the data directory (0700) and its static files folder and,
    unless one is configured, the secret key and the pseudonym key (0600).

    A data directory that exists already keeps its mode: it may be a mount the operator set up.
    """
    os.umask(PRIVATE_UMASK)
    directory = data_dir()
    (directory / STATIC_SUBDIR).mkdir(mode=0o700, parents=True, exist_ok=True)
    if not env_str("ATTUNE_SECRET_KEY") and stored_secret_key(directory) is None:
        _write_secret_key(directory)
    if not env_str("ATTUNE_PSEUDONYM_KEY") and stored_secret_key(directory, PSEUDONYM_KEY_FILE) is None:
        _write_secret_key(directory, PSEUDONYM_KEY_FILE)
    return directory
