"""Quality control: detectors of inattentive or low-effort work, per-participant summaries, researcher decisions.

The detectors only *flag*; nothing is excluded automatically. A researcher reads
the reasons and the evidence and records an explicit decision (``decide``),
which is logged (``QualityDecision``: who, when, why) and reversible. While a
participant's current decision is "exclude", ``Participant.quality_excluded_at``
is set, and dataset building and scoring leave their conversations out by rule
(``datasets.exchange.usable_conversations``). Frozen dataset versions keep what
they hold: an exclusion applies to versions made after it.

Each check is explained in ``FLAG_KINDS`` (shown to the researcher beside every flag).
Thresholds are per study (``Study.quality_*``), so a study with long replies or a
short sample of behaviour questions can be tuned without code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from annotation.models import AlternateResponses, BinaryJudgement, PageTime
from collection.models import AttentionCheck, Participant, QualityDecision, Study, Turn

ATTENTION = "attention_check"
TOO_FAST = "too_fast"
STRAIGHT_LINING = "straight_lining"
UNEDITED_REPLY = "unedited_reply"
SHORT_MESSAGES = "short_messages"

#: Every flag a participant can carry: kind -> (short label, what the check does and why it matters).
FLAG_KINDS: dict[str, tuple[str, str]] = {
    ATTENTION: (
        "Failed attention checks",
        "Some questions were instructions in disguise (\u201cFor this question, choose \u2018No\u2019\u201d). "
        "Answering one differently suggests the questions were not read. Flagged when more checks are failed "
        "than the study tolerates. These items are never part of the data.",
    ),
    TOO_FAST: (
        "Pages answered too fast",
        "Each annotation page records the seconds between being shown and being sent. A page sent faster "
        "than the study's minimum is unlikely to have been read (the message, the reply and the questions).",
    ),
    STRAIGHT_LINING: (
        "Straight-lining",
        "On a behaviour-question page every question got the same answer in both columns (say \u2018Yes\u2019 "
        "throughout). With several different questions this pattern usually means clicking down a column.",
    ),
    UNEDITED_REPLY: (
        "Ideal reply barely edited",
        "The participant's ideal reply differs from the reply it started from (the model's reply or the "
        "suggested rewrite) by fewer characters than the study's minimum share: little effort went into it.",
    ),
    SHORT_MESSAGES: (
        "Very short chat messages",
        "Chat messages shorter than the study's minimum length (\u201cok\u201d, \u201cyes\u201d) give the "
        "models little to respond to. Flagged when at least half of the participant's messages are that short.",
    ),
}

#: Reasons a researcher may give for an exclusion: any flag, or a judgement of their own.
OTHER_REASON = "other"
EXCLUSION_REASONS: dict[str, str] = {**{k: v[0] for k, v in FLAG_KINDS.items()}, OTHER_REASON: "Other (see note)"}

#: A page needs at least this many behaviour questions for identical answers to count as straight-lining.
STRAIGHT_LINE_MIN_QUESTIONS = 5


class QualityError(ValueError):
    """A decision that cannot be recorded (the message says why)."""


@dataclass
class Flag:
    kind: str
    summary: str
    evidence: list[dict[str, Any]]

    @property
    def label(self) -> str:
        return FLAG_KINDS[self.kind][0]

    @property
    def explanation(self) -> str:
        return FLAG_KINDS[self.kind][1]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "summary": self.summary, "evidence": self.evidence}


@dataclass
class ParticipantQuality:
    """One participant's quality summary: flags with evidence, attention-check tally and current decision."""

    participant: Participant
    flags: list[Flag] = field(default_factory=list)
    checks_passed: int = 0
    checks_failed: int = 0

    @property
    def excluded(self) -> bool:
        return self.participant.quality_excluded_at is not None

    @property
    def flag_kinds(self) -> list[str]:
        return [f.kind for f in self.flags]

    def as_dict(self, pseudonym: str) -> dict[str, Any]:
        """The summary as the API shows it, under ``pseudonym``: the id exports show
        (``datasets.pseudonyms.export_pseudonym``), so flags can be matched with conversations.

        The caller supplies it because this layer sits below ``datasets`` and cannot compute
        it, and the stored id (``Participant.pseudonym``) is never shown outside the admin.
        """
        p = self.participant
        return {
            "pseudonym": pseudonym,
            "flag_count": len(self.flags),
            "flags": [f.as_dict() for f in self.flags],
            "attention_checks": {"passed": self.checks_passed, "failed": self.checks_failed},
            "excluded": self.excluded,
            "excluded_at": p.quality_excluded_at.isoformat() if p.quality_excluded_at else None,
            "exclusion_reason": p.quality_exclusion_reason or None,
        }


# ---------------------------------------------------------------------------
# Text distance
# ---------------------------------------------------------------------------


def bounded_edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance between ``a`` and ``b`` when it is at most ``limit``, else ``limit + 1``.

    Only a diagonal band of width ``2 * limit + 1`` is computed, so checking long
    replies against a small threshold stays cheap (O(len * limit)).
    """
    if limit < 0:
        return 0 if a == b else 1
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    over = limit + 1
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        low, high = max(1, i - limit), min(len(b), i + limit)
        current = [over] * (len(b) + 1)
        if i <= limit:
            current[0] = i
        row_min = current[0]
        for j in range(low, high + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost, over)
            row_min = min(row_min, current[j])
        if row_min > limit:
            return over
        previous = current
    return min(previous[len(b)], over)


def _normalised(text: str) -> str:
    return " ".join(text.split())


def edit_share(original: str, edited: str, threshold: float) -> float | None:
    """The share of ``original``'s characters changed to get ``edited`` (whitespace runs ignored), when it is
    below ``threshold``; None when it is at least that (the exact figure is not needed then)."""
    a, b = _normalised(original), _normalised(edited)
    length = max(len(a), 1)
    limit = int(threshold * length)  # distances up to this are below the threshold... or equal to it
    distance = bounded_edit_distance(a, b, limit)
    share = distance / length
    return share if distance <= limit and share < threshold else None


# ---------------------------------------------------------------------------
# Detectors (each takes a participant's prefetched rows; hand-checkable rules)
# ---------------------------------------------------------------------------


def _turns(participant: Participant) -> list[Turn]:
    """The turns quality control reads: never one whose questions the participant skipped for their wellbeing
    (from the support panel), so going on without them counts against no one."""
    turns: list[Turn] = []
    for conversation in participant.conversations.all():
        turns.extend(t for t in conversation.turns.all() if not t.skipped_for_wellbeing)
    return turns


def detect_attention(participant: Participant, study: Study) -> tuple[Flag | None, int, int]:
    checks = list(participant.attention_checks.all())
    failed = [c for c in checks if not c.passed]
    passed = len(checks) - len(failed)
    if len(failed) <= study.quality_max_failed_checks:
        return None, passed, len(failed)
    evidence = [
        {
            "place": c.place,
            "turn": c.turn.turn_number if c.turn is not None else None,
            "instructed": c.instructed,
            "given": c.given or None,
        }
        for c in failed
    ]
    return Flag(ATTENTION, f"{len(failed)} of {len(checks)} attention checks failed", evidence), passed, len(failed)


def detect_too_fast(participant: Participant, study: Study) -> Flag | None:
    minimum = study.quality_min_page_seconds
    evidence = [
        {"turn": turn.turn_number, "page": pt.page, "seconds": round(pt.seconds, 1)}
        for turn in _turns(participant)
        for pt in turn.page_times.all()
        if pt.seconds < minimum
    ]
    if not evidence:
        return None
    total = sum(len(t.page_times.all()) for t in _turns(participant))
    return Flag(TOO_FAST, f"{len(evidence)} of {total} pages sent in under {minimum} s", evidence)


def detect_straight_lining(participant: Participant, study: Study) -> Flag | None:
    evidence = []
    pages = 0
    for turn in _turns(participant):
        rows = [j for j in turn.binary_judgements.all() if j.observed is not None and j.preferred is not None]
        if len(rows) < STRAIGHT_LINE_MIN_QUESTIONS:
            continue
        pages += 1
        observed = {j.observed for j in rows}
        preferred = {j.preferred for j in rows}
        if len(observed) == 1 and len(preferred) == 1:
            evidence.append(
                {"turn": turn.turn_number, "questions": len(rows), "observed": rows[0].observed,
                 "preferred": rows[0].preferred}
            )  # fmt: skip
    if not evidence:
        return None
    return Flag(STRAIGHT_LINING, f"{len(evidence)} of {pages} behaviour pages answered identically", evidence)


def detect_unedited_replies(participant: Participant, study: Study) -> Flag | None:
    threshold = study.quality_min_edit_ratio
    evidence = []
    written = 0
    for turn in _turns(participant):
        alternates: AlternateResponses | None = getattr(turn, "alternates", None)
        if alternates is None or not alternates.human_edited.strip():
            continue
        written += 1
        starts = {"the model's reply": turn.llm_response, "the suggested rewrite": alternates.llm_improved}
        closest = None
        for name, text in starts.items():
            if not text.strip():
                continue
            share = edit_share(text, alternates.human_edited, threshold)
            if share is not None and (closest is None or share < closest[1]):
                closest = (name, share)
        if closest is not None:
            evidence.append(
                {"turn": turn.turn_number, "compared_with": closest[0], "changed_share": round(closest[1], 3)}
            )
    if not evidence or threshold <= 0:
        return None
    return Flag(
        UNEDITED_REPLY, f"{len(evidence)} of {written} ideal replies changed less than {threshold:.0%}", evidence
    )


def detect_short_messages(participant: Participant, study: Study) -> Flag | None:
    minimum = study.quality_min_message_chars
    turns = _turns(participant)
    short = [
        {"turn": t.turn_number, "characters": len(t.user_message.strip()), "message": t.user_message.strip()}
        for t in turns
        if len(t.user_message.strip()) < minimum
    ]
    if not turns or 2 * len(short) < len(turns):
        return None
    return Flag(SHORT_MESSAGES, f"{len(short)} of {len(turns)} messages under {minimum} characters", short)


def _participants(study: Study) -> Any:
    turns = Turn.objects.order_by("turn_number").prefetch_related(
        Prefetch("page_times", queryset=PageTime.objects.order_by("page")),
        Prefetch("binary_judgements", queryset=BinaryJudgement.objects.order_by("position")),
    )
    turns = turns.select_related("alternates")
    return (
        Participant.objects.filter(study=study)
        .order_by("created_at", "pk")
        .prefetch_related(
            Prefetch("conversations__turns", queryset=turns),
            Prefetch("attention_checks", queryset=AttentionCheck.objects.select_related("turn")),
        )
    )


def participant_quality(participant: Participant, study: Study | None = None) -> ParticipantQuality:
    """Run every detector on one participant (use ``study_quality`` for a whole study: fewer queries)."""
    study = study or participant.study
    if study is None:
        raise QualityError("This participant belongs to no study.")
    prefetched = _participants(study).get(pk=participant.pk)
    return _summarise(prefetched, study)


def _summarise(participant: Participant, study: Study) -> ParticipantQuality:
    attention, passed, failed = detect_attention(participant, study)
    flags = [
        f
        for f in (
            attention,
            detect_too_fast(participant, study),
            detect_straight_lining(participant, study),
            detect_unedited_replies(participant, study),
            detect_short_messages(participant, study),
        )
        if f is not None
    ]
    return ParticipantQuality(participant, flags, passed, failed)


def study_quality(study: Study, include_test: bool = False) -> list[ParticipantQuality]:
    """Every participant's quality summary in ``study``, most-flagged first (a fixed number of queries).

    Preview participants (``is_test``) are left out unless asked for.
    """
    queryset = _participants(study)
    if not include_test:
        queryset = queryset.exclude(is_test=True)
    summaries = [_summarise(p, study) for p in queryset]
    summaries.sort(key=lambda s: -len(s.flags))  # stable: enrolment order within the same count
    return summaries


def flag_counts(summaries: list[ParticipantQuality]) -> dict[str, int]:
    """Participants flagged per kind (every kind listed, zero included)."""
    return {kind: sum(kind in s.flag_kinds for s in summaries) for kind in FLAG_KINDS}


# ---------------------------------------------------------------------------
# Researcher decisions
# ---------------------------------------------------------------------------


def decide(participant: Participant, decision: str, user: Any, reason: str = "", note: str = "") -> QualityDecision:
    """Record a researcher's include/exclude decision and make it current; the log keeps every earlier one.

    An exclusion needs a reason (a flag kind or ``other``, then with a note). The
    decision applies to dataset versions and scores made after it.
    """
    note = note.strip()
    if decision not in QualityDecision.Decision.values:
        raise QualityError(f"Unknown decision {decision!r}: choose include or exclude.")
    if decision == QualityDecision.Decision.EXCLUDE:
        if reason not in EXCLUSION_REASONS:
            raise QualityError("Choose the reason for excluding this participant.")
        if reason == OTHER_REASON and not note:
            raise QualityError("Say in the note why this participant is excluded.")
    else:
        reason = ""
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        now = timezone.now()
        record = QualityDecision.objects.create(
            participant=locked,
            decision=decision,
            reason=reason,
            note=note,
            decided_by=user if getattr(user, "is_authenticated", False) else None,
            decided_at=now,
        )
        excluded = decision == QualityDecision.Decision.EXCLUDE
        locked.quality_excluded_at = now if excluded else None
        locked.quality_exclusion_reason = reason if excluded else ""
        locked.save(update_fields=["quality_excluded_at", "quality_exclusion_reason"])
    participant.quality_excluded_at = locked.quality_excluded_at
    participant.quality_exclusion_reason = locked.quality_exclusion_reason
    return record


def decision_history(participant: Participant) -> list[QualityDecision]:
    """Every decision about ``participant``, newest first."""
    return list(participant.quality_decisions.select_related("decided_by").order_by("-decided_at", "-id"))
