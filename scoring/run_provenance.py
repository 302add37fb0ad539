"""Where a run came from: who started it, from where, with which code and settings.

Every run records this beside its numbers (``EvaluationRun.origin`` and
``provenance``), whether the run launcher, the REST API or ``attune eval``
made it, so a row on the leaderboard can be traced back to the command or the
click that produced it. Settings are what changes an answer or its pace
(endpoint, sampling parameters, concurrency); a key never is one: the registry
keeps only the name of a key variable, and parameters are scrubbed here anyway.
"""

from __future__ import annotations

import functools
import getpass
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from attunebench.replay.llm import scrub_params
from attunebench.replay.prompts import PROMPT_VERSION

SOURCE_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def code_version() -> str:
    """The installed attune package's version, plus the git commit when it runs from a checkout.

    Two runs of one release made from different commits of a working tree differ
    here; an installed wheel has no commit and shows the version alone.
    """
    try:
        version = metadata.version("attune")
    except metadata.PackageNotFoundError:
        version = "unknown (attune not installed as a package)"
    if not (SOURCE_ROOT / ".git").exists():
        return version
    try:
        found = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return version
    commit = found.stdout.strip()
    return f"{version}+g{commit}" if found.returncode == 0 and commit else version


def os_user() -> str:
    """The login name of the process owner (the person at the terminal, for a CLI run)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def provenance(origin: str, *, user: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The ``EvaluationRun.provenance`` of a run started now from ``origin`` by ``user``."""
    return {
        "origin": origin,
        "user": user,
        "host": socket.gethostname(),
        "code_version": code_version(),
        "prompt_version": PROMPT_VERSION,
        "settings": settings,
    }


def model_settings(
    name: str, *, litellm_model: str, api_base: str | None, params: dict[str, Any], max_in_flight: int | None
) -> dict[str, Any]:
    """The settings of one model of a run, parameters scrubbed (a key variable's name is kept, never a value)."""
    return {
        "name": name,
        "litellm_model": litellm_model,
        "api_base": api_base or None,
        "params": scrub_params(dict(params)),
        "max_in_flight": max_in_flight,
    }
