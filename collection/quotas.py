"""A study's quotas and offered topics: what is still open to a new participant or conversation.

Quotas cap *data*, so withdrawn participants and conversations and preview
(test) participants never count (``collection.models.not_test_data``). A
conversation counts from the moment it starts, so a topic cannot be
over-filled by people chatting at the same time.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, QuerySet

from collection.models import Conversation, Participant, Study, StudyQuota, Topic

TOPIC_FULL_MESSAGE = "That topic has all the conversations it needs now. Please choose another topic."
ALL_TOPICS_FULL_MESSAGE = (
    "Every topic of this study has all the conversations it needs, so it cannot start a new chat. "
    "Thank you for your time; nothing more is needed from you."
)
GROUP_FULL_MESSAGE = (
    "This part of the study has all the participants it needs, so it is not taking anyone new. "
    "Thank you for your interest."
)
UNKNOWN_GROUP_MESSAGE = (
    "This study link names a group the study does not have. Please check the link you were given, "
    "or ask the research team for a new one."
)


def counted_conversations(study: Study) -> QuerySet[Conversation]:
    """The study's conversations that count towards quotas: real and not withdrawn."""
    return (
        Conversation.objects.real()
        .filter(participant__study=study)
        .exclude(status=Conversation.Status.WITHDRAWN)
        .exclude(participant__withdrawn_at__isnull=False)
    )


def counted_participants(study: Study) -> QuerySet[Participant]:
    """The study's participants that count towards group quotas: real and not withdrawn."""
    return Participant.objects.real().filter(study=study, withdrawn_at__isnull=True)


def topic_counts(study: Study) -> dict[int, int]:
    """Topic id -> counted conversations in ``study`` (one grouped query)."""
    rows = counted_conversations(study).values_list("topic_id").annotate(n=Count("id"))
    return dict(rows)


def group_counts(study: Study) -> dict[str, int]:
    """Participant group -> counted participants in ``study`` (one grouped query)."""
    rows = counted_participants(study).values_list("group").annotate(n=Count("id"))
    return dict(rows)


def full_topic_ids(study: Study) -> set[int]:
    """Topics whose quota is reached: no longer offered to new conversations."""
    quotas = list(study.quotas.filter(kind=StudyQuota.Kind.TOPIC))
    if not quotas:
        return set()
    counts = topic_counts(study)
    return {q.topic_id for q in quotas if q.topic_id is not None and counts.get(q.topic_id, 0) >= q.cap}


def group_is_full(study: Study, group: str) -> bool:
    """True when ``group`` has a quota and it is reached (a group without a quota is never full)."""
    quota = study.quotas.filter(kind=StudyQuota.Kind.GROUP, group=group).first()
    if quota is None:
        return False
    return counted_participants(study).filter(group=group).count() >= quota.cap


def study_topics(study: Study | None) -> QuerySet[Topic]:
    """The topics a study offers, full or not: its chosen ones, or the whole catalogue when none are chosen."""
    if study is not None and study.pk is not None and study.topics.exists():
        return study.topics.all().order_by("order", "category", "subtopic")
    return Topic.objects.filter(in_catalogue=True)


def open_topics(study: Study | None) -> QuerySet[Topic]:
    """The topics a participant of ``study`` may choose now: offered, and not full."""
    topics = study_topics(study)
    return topics.exclude(pk__in=full_topic_ids(study)) if study is not None else topics


@dataclass(frozen=True)
class QuotaFill:
    """How full one quota is, for the set-up page and monitoring."""

    quota_id: int
    kind: str
    target: str
    cap: int
    filled: int

    @property
    def full(self) -> bool:
        return self.filled >= self.cap

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.filled / self.cap)) if self.cap else 100


def quota_fill(study: Study) -> list[QuotaFill]:
    """Every quota of ``study`` with how many it holds (three queries whatever the number of quotas)."""
    quotas = list(study.quotas.select_related("topic"))
    topics, groups = topic_counts(study), group_counts(study)  # always both: a fixed query count
    out = []
    for q in quotas:
        if q.kind == StudyQuota.Kind.TOPIC:
            out.append(QuotaFill(q.pk, q.kind, str(q.topic), q.cap, topics.get(q.topic_id or 0, 0)))
        else:
            out.append(QuotaFill(q.pk, q.kind, q.group, q.cap, groups.get(q.group, 0)))
    return out
