"""Setting up a study from the researcher pages: status, model pool, quotas, preview.

The views only parse and authorise; every change goes through a function here,
so the pages, tests and any future command apply the same rules. The rules:

- A study is made as a **draft**: nobody can join it, but researchers can
  preview it. **Open** takes participants; **closed** refuses new ones (those
  already in carry on with their own links). A study that has been open never
  goes back to draft (it has participants); closed can be reopened.
- A study opens only when it could actually run: a model to assign and at
  least one topic to offer (``readiness_problems``).
- A **preview** participant (``Participant.is_test``) walks the real flow but
  is never data: ``collection.models.not_test_data`` keeps it out of exports,
  datasets, scores, statistics and monitoring.
- Settings that would not do what they say (``setup_warnings``: attention checks some participants never
  meet) are shown on the set-up page but do not stop the study opening.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from collection import attention
from collection.models import OriginalModel, Participant, Study, StudyModel, StudyQuota, Topic
from collection.quotas import study_topics

#: Status changes a researcher may make: from -> allowed targets.
ALLOWED_TRANSITIONS: dict[str, tuple[str, ...]] = {
    Study.Status.DRAFT: (Study.Status.OPEN,),
    Study.Status.OPEN: (Study.Status.CLOSED,),
    Study.Status.CLOSED: (Study.Status.OPEN,),
}


class StudySetupError(Exception):
    """A change the study's rules refuse; ``str()`` says why, for the page or the API."""


def readiness_problems(study: Study) -> list[str]:
    """What stops ``study`` from opening, in words a researcher can act on; empty when it can open."""
    problems = []
    pool = StudyModel.objects.filter(study=study)
    if pool.exists():
        if not pool.filter(original_model__active=True).exists():
            problems.append("Every model in the study's pool is switched off; add an active model to the pool.")
    elif not OriginalModel.objects.filter(active=True).exists():
        problems.append("There is no active original model to chat with; add one to the pool.")
    if not study_topics(study).exists():
        problems.append("The study offers no topics; choose at least one.")
    if study.max_turns < study.min_turns:
        problems.append("The most turns must be at least the fewest turns.")
    return problems


def setup_warnings(study: Study) -> list[str]:
    """Settings that let a study open but would not do what they say (e.g. attention checks that some
    participants never meet), so the researcher can fix them before participants arrive."""
    warning = attention.placement_warning(study)
    return [warning] if warning else []


def do_set_status(study: Study, target: str) -> Study:
    """Move ``study`` to ``target`` if the rules allow it; raises StudySetupError otherwise."""
    if target not in Study.Status.values:
        raise StudySetupError(f"Unknown status {target!r}; choose one of {', '.join(Study.Status.values)}.")
    if target == study.status:
        return study
    if target not in ALLOWED_TRANSITIONS.get(study.status, ()):
        raise StudySetupError(
            f"A {study.get_status_display().split(' (')[0].lower()} study cannot become "
            f"{Study.Status(target).label.split(' (')[0].lower()}."
        )
    if target == Study.Status.OPEN:
        problems = readiness_problems(study)
        if problems:
            raise StudySetupError("The study cannot open yet: " + " ".join(problems))
    Study.objects.filter(pk=study.pk).update(status=target)
    study.status = target
    return study


@dataclass(frozen=True)
class PoolEntry:
    """One original model as the pool page shows it: its weight in this study (0 = not in the pool)."""

    model: OriginalModel
    weight: int


def pool_entries(study: Study) -> list[PoolEntry]:
    """Every original model that is active or already in the pool, with its weight here."""
    weights = dict(StudyModel.objects.filter(study=study).values_list("original_model_id", "weight"))
    models = OriginalModel.objects.filter(active=True) | OriginalModel.objects.filter(pk__in=list(weights))
    return [PoolEntry(m, weights.get(m.pk, 0)) for m in models.distinct().order_by("alias")]


def do_set_pool(study: Study, weights: dict[int, int]) -> list[StudyModel]:
    """Make the study's pool exactly the models with a weight above 0 (model id -> weight).

    An empty pool means "every active model, equally" (the behaviour before pools).
    """
    unknown = set(weights) - set(OriginalModel.objects.filter(pk__in=list(weights)).values_list("pk", flat=True))
    if unknown:
        raise StudySetupError("Some of those models no longer exist; reload the page and try again.")
    if any(w < 0 for w in weights.values()):
        raise StudySetupError("Weights are whole numbers from 0 (not in the pool) upwards.")
    with transaction.atomic():
        keep = {pk: w for pk, w in weights.items() if w > 0}
        StudyModel.objects.filter(study=study).exclude(original_model_id__in=list(keep)).delete()
        for pk, weight in keep.items():
            StudyModel.objects.update_or_create(study=study, original_model_id=pk, defaults={"weight": weight})
    return list(StudyModel.objects.filter(study=study).select_related("original_model"))


def do_add_quota(study: Study, kind: str, cap: int, topic: Topic | None = None, group: str = "") -> StudyQuota:
    """A new quota; a topic or group that already has one gets its cap changed instead."""
    group = group.strip()
    if cap < 1:
        raise StudySetupError("A quota's cap is at least 1.")
    if kind == StudyQuota.Kind.TOPIC:
        if topic is None:
            raise StudySetupError("Choose the topic this quota caps.")
        if not study_topics(study).filter(pk=topic.pk).exists():
            raise StudySetupError(f"The study does not offer the topic {topic}; add it to the study's topics first.")
        quota, _ = StudyQuota.objects.update_or_create(
            study=study, kind=kind, topic=topic, defaults={"cap": cap, "group": ""}
        )
        return quota
    if kind == StudyQuota.Kind.GROUP:
        if group not in study.group_names:
            known = ", ".join(study.group_names) or "none yet: add them to the study's settings"
            raise StudySetupError(f"{group or 'That'!s} is not one of the study's participant groups ({known}).")
        quota, _ = StudyQuota.objects.update_or_create(
            study=study, kind=kind, group=group, defaults={"cap": cap, "topic": None}
        )
        return quota
    raise StudySetupError("A quota caps a topic or a participant group.")


def do_remove_quota(study: Study, quota_id: int) -> bool:
    """Remove one of the study's quotas; False when it was already gone."""
    deleted, _ = StudyQuota.objects.filter(study=study, pk=quota_id).delete()
    return bool(deleted)


def do_start_preview(study: Study) -> Participant:
    """A new preview participant in ``study``; its token (``participant.token``) opens the participant flow.

    Works whatever the study's status, so a draft can be walked through before it opens. The preview
    never counts: it is marked ``is_test`` and every data surface filters it out.
    """
    return Participant.objects.create(study=study, is_test=True)
