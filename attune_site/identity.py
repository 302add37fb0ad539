"""One identity per deployment: every process uses the secret key and the pseudonym key the database knows.

Two hosts with different pseudonym keys give one participant two ids (an
erasure request quoting one fails on the other host); two secret keys log
every user out whenever a request lands on the other host. So the first
process to use a database records a one-way fingerprint of each key
(``DeploymentKey``), and every web process and worker compares its own with
them before it starts, refusing with an error that names the variable. This
holds in every mode, not only in production.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from attune_site.datadir import PSEUDONYM_KEY_FILE, SECRET_KEY_FILE, stored_secret_key
from attune_site.models import DeploymentKey

#: The variables of the two keys and the data-directory file each falls back to.
KEY_VARIABLES = {"ATTUNE_SECRET_KEY": SECRET_KEY_FILE, "ATTUNE_PSEUDONYM_KEY": PSEUDONYM_KEY_FILE}


class DeploymentIdentityError(ImproperlyConfigured):
    """This process's keys are not the deployment's; the message names the variable to set."""


def fingerprint(key: str) -> str:
    """A one-way digest that tells keys apart without revealing them (the keys are long random strings)."""
    return hashlib.sha256(b"attune deployment key fingerprint\x00" + key.encode("utf-8")).hexdigest()


def process_key(variable: str) -> str:
    return str(settings.SECRET_KEY if variable == "ATTUNE_SECRET_KEY" else settings.ATTUNE_PSEUDONYM_KEY)


def key_source(variable: str) -> str:
    """Where this process's key came from, in the words an operator needs."""
    if os.environ.get(variable, "").strip():
        return f"the environment variable {variable}"
    file = Path(settings.DATA_DIR) / KEY_VARIABLES[variable]
    if stored_secret_key(Path(settings.DATA_DIR), KEY_VARIABLES[variable]) is not None:
        return f"the file {file} (generated on this host, as {variable} was not set)"
    return f"a key made up for this process alone ({variable} was not set)"


@dataclass(frozen=True)
class KeyComparison:
    variable: str
    ours: str
    recorded: DeploymentKey | None

    @property
    def matches(self) -> bool:
        return self.recorded is None or self.recorded.fingerprint == self.ours

    def mismatch(self) -> str:
        assert self.recorded is not None
        return (
            f"{self.variable} is not this deployment's: its database was first used with a key of fingerprint "
            f"{self.recorded.fingerprint[:12]} (recorded {self.recorded.recorded_at:%Y-%m-%d %H:%M} UTC by "
            f"{self.recorded.recorded_by or 'an earlier process'}), and this process has {self.ours[:12]}, from "
            f"{key_source(self.variable)}. Every web process and worker of one deployment must use the same "
            f"{self.variable}: set it to the deployment's key on this host (docs/several-machines.md)."
        )


def identity_table_exists() -> bool:
    return DeploymentKey._meta.db_table in connection.introspection.table_names()


def compare_keys(record: bool) -> list[KeyComparison]:
    """This process's key fingerprints beside the recorded ones; with ``record``, record those not yet known.

    Recording is race-free: of two first processes, the first insert wins and both compare with it.
    """
    ours = {variable: fingerprint(process_key(variable)) for variable in KEY_VARIABLES}
    if record:
        who = f"{socket.gethostname()[:120]}:{os.getpid()}"
        DeploymentKey.objects.bulk_create(
            [DeploymentKey(variable=v, fingerprint=f, recorded_by=who) for v, f in ours.items()],
            ignore_conflicts=True,
        )
    recorded = {row.variable: row for row in DeploymentKey.objects.filter(variable__in=list(ours))}
    return [KeyComparison(variable, print_, recorded.get(variable)) for variable, print_ in ours.items()]


def verify_deployment_identity() -> None:
    """Refuse to start a process whose keys differ from the deployment's (recording them on first use).

    Before the first migration there is nothing to compare with: the check waits for the table.
    """
    try:
        if not identity_table_exists():
            return
        differing = [c for c in compare_keys(record=True) if not c.matches]
    finally:
        if not connection.in_atomic_block:
            connection.close()  # a worker forks after this; a web server's threads open their own
    if differing:
        raise DeploymentIdentityError("\n".join(c.mismatch() for c in differing))
