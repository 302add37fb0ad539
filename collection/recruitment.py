"""Recruitment-platform entry and exit (Prolific's conventions, kept generic).

Entry: ``/enter/<slug>/?PROLIFIC_PID=..&STUDY_ID=..&SESSION_ID=..`` (the
parameter names are the study's ``platform_*_param`` settings). The platform's
participant id is the participant's credential here: it enrols them once per
study, and the same id coming back resumes *their* participant, never a second
one and never anyone else's. Only its keyed hash is stored
(``hash_platform_id``); the platform's study id is only compared with the
study's configured one and is not kept.

A platform participant id is no secret (every researcher the person ever
worked for sees it), so it alone never hands over an enrolled participant:
coming back resumes them only in the browser that enrolled (a signed cookie
names the participant) or with the same platform session id as at enrolment
(kept as a keyed hash; the platform repeats it when the person reopens the
study, on any device). Anything else gets a calm page, and their link stays as
it was.

Exit: finishing sends the participant to the platform's completion URL with the
study's completion code; withdrawing and being screened out (not consenting)
each have their own return code.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.db import IntegrityError, transaction
from django.utils import timezone

from collection.models import Participant, Study, hash_platform_id, hash_platform_session
from collection.study_flow import STUDY_FULL_MESSAGE, StudyFull, do_issue_link, do_withdraw, study_is_full

logger = logging.getLogger("attune.participant")

#: Longest platform id taken (Prolific's are 24 hex characters); longer values are refused, not cut.
MAX_PLATFORM_ID_LENGTH = 128

COMPLETED = "completed"
WITHDRAWN = "withdrawn"
SCREENED_OUT = "screened_out"
STOPPED = "stopped"  # stopped for their wellbeing: the wellbeing code, so nobody loses pay for stopping


class EntryRefused(Exception):
    """The entry URL cannot enrol anyone; ``str()`` is the calm sentence shown, ``status`` the HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


MISSING_IDS_MESSAGE = (
    "This link is missing the details your recruitment website adds to it, so we cannot tell who you are. "
    "Please go back to the study page on that website and open the study from there. Nothing has been recorded."
)
NOT_OPEN_MESSAGE = "This study is not taking part in recruitment just now. Nothing has been recorded. Thank you."
IN_PROGRESS_ELSEWHERE_MESSAGE = (
    "This study is already in progress for you, started on another device or browser, so we cannot open it "
    "here. To carry on, use the personal study link you were given, or open the study again from your "
    "recruitment website on the device where you started. If you are stuck, message the researchers through "
    "your recruitment website; nothing has changed and your answers so far are safe."
)
WRONG_STUDY_MESSAGE = (
    "This link belongs to a different study on your recruitment website. Please open the study again from "
    "that website. Nothing has been recorded."
)


@dataclass(frozen=True)
class PlatformEntry:
    """What an entry URL carries that we use: the participant id (hashed at once) for this study."""

    study: Study
    platform_id_hash: str
    platform_session_hash: str


def takes_platform_entries(study: Study) -> bool:
    """A study is set up for a platform once it has a completion URL and a completion code."""
    return bool(study.platform_completion_url and study.platform_completion_code)


def read_entry(study: Study | None, query: Mapping[str, str]) -> PlatformEntry:
    """Check an entry URL's query against the study's settings; raise :class:`EntryRefused` with a calm reason.

    ``study`` is None when the slug names no study.
    """
    if study is None or not study.is_open or not takes_platform_entries(study):
        raise EntryRefused(NOT_OPEN_MESSAGE, 404)
    platform_id = (query.get(study.platform_participant_param) or "").strip()
    study_id = (query.get(study.platform_study_param) or "").strip()
    session_id = (query.get(study.platform_session_param) or "").strip()
    if not platform_id or not study_id or not session_id or len(platform_id) > MAX_PLATFORM_ID_LENGTH:
        raise EntryRefused(MISSING_IDS_MESSAGE, 400)
    if study.platform_study_id and study_id != study.platform_study_id:
        raise EntryRefused(WRONG_STUDY_MESSAGE, 400)
    return PlatformEntry(
        study=study,
        platform_id_hash=hash_platform_id(platform_id),
        platform_session_hash=hash_platform_session(session_id),
    )


def check_returning(entry: PlatformEntry, participant: Participant, enrolled_here: int | None) -> None:
    """Raise :class:`EntryRefused` unless the one coming back proves to be ``participant``.

    Proof is the browser that enrolled (``enrolled_here``: the participant id its signed cookie names) or
    the platform session id of the enrolment. A participant enrolled before session ids were kept can still
    come back in their browser or with their personal link.
    """
    if enrolled_here == participant.pk:
        return
    if participant.platform_session_hash and hmac.compare_digest(
        participant.platform_session_hash, entry.platform_session_hash
    ):
        return
    raise EntryRefused(IN_PROGRESS_ELSEWHERE_MESSAGE, 409)


def enrolled(entry: PlatformEntry) -> Participant | None:
    """The participant this entry's platform id already enrolled in its study, if any."""
    return _enrolled(entry.study, entry.platform_id_hash)


def do_platform_enrol(entry: PlatformEntry, enrolled_here: int | None = None) -> tuple[Participant, bool]:
    """The participant of this platform id in this study, made on first entry; returns (participant, created).

    Race-safe: the study row is locked while looking and creating, and the
    unique constraint on (study, platform_id_hash) is the last word, so two
    simultaneous entries of one id get one participant. A returning id that
    proves who it is (``check_returning``) is given a fresh study link (only link
    hashes are stored, so the old link cannot be read back) and lands where they
    left off; one that does not is refused and nothing changes. The study's
    participant cap applies to new ids only.
    """
    study = entry.study
    for _ in range(2):
        try:
            with transaction.atomic():
                locked = Study.objects.select_for_update().get(pk=study.pk)
                existing = _enrolled(locked, entry.platform_id_hash)
                if existing is not None:
                    check_returning(entry, existing, enrolled_here)
                    do_issue_link(existing)
                    return existing, False
                if study_is_full(locked):
                    raise StudyFull(STUDY_FULL_MESSAGE)
                with transaction.atomic():
                    participant = Participant.objects.create(
                        study=locked,
                        platform_id_hash=entry.platform_id_hash,
                        platform_session_hash=entry.platform_session_hash,
                    )
                return participant, True
        except IntegrityError:  # a simultaneous entry of the same id made it first: take theirs
            logger.info("simultaneous platform entries for one id in study %s; resuming the first", study.slug)
    raise EntryRefused("Please open the study again from your recruitment website.", 409)


def _enrolled(study: Study, platform_id_hash: str) -> Participant | None:
    return Participant.objects.select_related("study").filter(study=study, platform_id_hash=platform_id_hash).first()


def exit_kind(participant: Participant) -> str:
    """Which return code this platform participant gets: screened out, withdrawn, or completed."""
    if participant.screened_out_at is not None:
        return SCREENED_OUT
    if participant.is_withdrawn:
        return WITHDRAWN
    if participant.stopped_at is not None:
        return STOPPED
    return COMPLETED


def exit_code(study: Study, kind: str) -> str:
    return {
        COMPLETED: study.platform_completion_code,
        WITHDRAWN: study.platform_withdrawal_code,
        SCREENED_OUT: study.platform_screenout_code,
        STOPPED: study.wellbeing_completion_code or study.platform_completion_code,
    }[kind]


def return_url(study: Study, kind: str) -> str:
    """The platform's completion URL with the code for ``kind`` in the study's code parameter (other
    parameters of the configured URL kept)."""
    parts = urlsplit(study.platform_completion_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != study.platform_code_param]
    code = exit_code(study, kind)
    if code:
        query.append((study.platform_code_param, code))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def allow_form_return(response: object, participant: Participant) -> None:
    """Let a page's form end at the platform: its Content-Security-Policy ``form-action`` covers the form's
    redirects too, so the page whose post returns a platform participant names the platform's origin."""
    study = participant.study
    if study is None or not participant.from_platform or not takes_platform_entries(study):
        return
    parts = urlsplit(study.platform_completion_url)
    response._csp_update = {"form-action": [f"{parts.scheme}://{parts.netloc}"]}  # type: ignore[attr-defined]


def do_screen_out(participant: Participant) -> None:
    """A platform participant who will not take part (declined consent): recorded, and nothing of theirs used."""
    Participant.objects.filter(pk=participant.pk, screened_out_at__isnull=True, withdrawn_at__isnull=True).update(
        screened_out_at=timezone.now()
    )
    do_withdraw(participant)
    participant.refresh_from_db(fields=["screened_out_at", "withdrawn_at"])
