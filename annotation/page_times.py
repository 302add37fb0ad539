"""How long each annotation page was open before it was sent (quality control: pages sent too fast to be read).

Showing a page writes nothing (GET only reads): the page carries a signed stamp
of when it was shown, and the time is stored with the page's answers
(``do_record_page_time``). A refreshed page carries a new stamp; a page shown
again with errors keeps the first one. A stamp that is missing, forged or from
another turn or page records nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.core import signing
from django.utils import timezone

from annotation.models import PageTime
from collection.models import Turn

_SALT = "attune.annotation.page-time"
PAGES = ("answers", "rewrite", "compare")


def page_stamp(turn: Turn, page: str, at: datetime | None = None) -> str:
    """A signed note that ``page`` of ``turn`` was shown at ``at`` (now by default)."""
    return signing.dumps({"turn": turn.pk, "page": page, "at": (at or timezone.now()).timestamp()}, salt=_SALT)


def shown_at(turn: Turn, page: str, stamp: str) -> datetime | None:
    """When the page was shown, from its stamp; None for a missing, forged or misplaced stamp."""
    try:
        note = signing.loads(stamp, salt=_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(note, dict) or note.get("turn") != turn.pk or note.get("page") != page:
        return None
    at = note.get("at")
    return datetime.fromtimestamp(float(at), tz=UTC) if isinstance(at, int | float) else None


def do_record_page_time(turn: Turn, page: str, stamp: str, now: datetime | None = None) -> PageTime | None:
    """Store the seconds between the page being shown and sent (the latest submission of the page wins)."""
    if page not in PAGES:
        raise ValueError(f"unknown annotation page {page!r}")
    started = shown_at(turn, page, stamp)
    if started is None:
        return None
    seconds = max(0.0, ((now or timezone.now()) - started).total_seconds())
    row = PageTime(turn=turn, page=page, seconds=seconds)
    # one INSERT .. ON CONFLICT statement (update_or_create takes four, with two savepoints)
    PageTime.objects.bulk_create(
        [row], update_conflicts=True, unique_fields=["turn", "page"], update_fields=["seconds", "recorded_at"]
    )
    return row
