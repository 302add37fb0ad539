"""The participant id that leaves the database: a keyed hash, the same on every export path (SPEC 2.5).

Every path out (canonical JSON, JSONL, Parquet, the API, ``attune export``,
export jobs) writes ``export_pseudonym(stored id)``: HMAC-SHA256 under the
deployment's pseudonym key (``ATTUNE_PSEUDONYM_KEY``, by default a file beside
the secret key in the data dir). A stored id may be anything, e.g. an e-mail
address an imported file carried; only its hash ever leaves.

A pseudonym carries a check tag computed with the same key, so a pseudonym this
deployment wrote is recognised when it comes back (export → import → export)
and kept as it is rather than hashed twice: the round trip stays byte-stable,
and one participant keeps one pseudonym.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import QuerySet

if TYPE_CHECKING:
    from collection.models import Participant

PREFIX = "pp-"
_BODY_HEX = 20
_TAG_HEX = 8
_SHAPE = re.compile(rf"^{PREFIX}([0-9a-f]{{{_BODY_HEX}}})([0-9a-f]{{{_TAG_HEX}}})$")


def _mac(label: str, value: str, key: str | None = None) -> str:
    secret = (key or settings.ATTUNE_PSEUDONYM_KEY).encode("utf-8")
    return hmac.new(secret, f"{label}\x00{value}".encode(), hashlib.sha256).hexdigest()


def is_own_pseudonym(value: str, key: str | None = None) -> bool:
    """True for a pseudonym this deployment's key wrote (its tag checks out)."""
    match = _SHAPE.match(value)
    if match is None:
        return False
    return hmac.compare_digest(match.group(2), _mac("tag", match.group(1), key)[:_TAG_HEX])


def export_pseudonym(stored_id: str, key: str | None = None) -> str:
    """The participant id written to every export; a pseudonym of this deployment is returned unchanged."""
    if is_own_pseudonym(stored_id, key):
        return stored_id
    body = _mac("participant", stored_id, key)[:_BODY_HEX]
    return f"{PREFIX}{body}{_mac('tag', body, key)[:_TAG_HEX]}"


def find_participant(participants: QuerySet[Participant], identifier: str) -> Participant | None:
    """The participant among ``participants`` known as ``identifier``, or None.

    Accepts the pseudonym exports and the API show (what a researcher copies from a
    conversation), the stored one (the admin's), or the id an imported file carried
    (stored only as its keyed hash). An export pseudonym of a collected participant is
    a hash of the stored id, so it is found by hashing each stored id in turn; only an
    identifier shaped like this deployment's pseudonyms can match that way.
    """
    identifier = identifier.strip()
    if not identifier:
        return None
    found = participants.filter(pseudonym__in={identifier, export_pseudonym(identifier)}).first()
    if found is not None or not is_own_pseudonym(identifier):
        return found
    for pk, stored in participants.values_list("pk", "pseudonym").iterator():
        if export_pseudonym(stored) == identifier:
            return participants.get(pk=pk)
    return None
