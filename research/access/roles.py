"""Roles: who may see what.

- participant: holds a study link only; never a Django user with staff rights,
  so every researcher page and API endpoint refuses them.
- researcher: ``is_staff`` and a member of the ``research`` group, which grants
  read access to collected data and write access to evaluation and export
  bookkeeping (never to participants' answers).
- admin: ``is_superuser``, everything, including Django admin edits of data.

The group's permissions are defined here once, applied by a data migration and
re-applied by ``do_make_researcher`` so a fresh database and a running one agree.
"""

from __future__ import annotations

from typing import Any

RESEARCH_GROUP = "research"

# (app_label, model, actions): what the research group may do in Django admin.
RESEARCH_GROUP_PERMISSIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    *[
        ("collection", model, ("view",))
        for model in (
            "participant",
            "consent",
            "participantprofile",
            "originalmodel",
            "topic",
            "conversation",
            "turn",
            "panassurvey",
            "panasitemresponse",
            "conversationwideanswers",
            "fourbranchrating",
            "attentioncheck",  # quality control: read-only; decisions go through the quality pages
            "qualitydecision",
            "livecall",  # live-model calls and their prices (the study's spend)
            "safetyevent",  # the safety log: read-only; written by the participant pages only
        )
    ],
    *[
        ("annotation", model, ("view",))
        for model in (
            "moodtag",
            "binaryjudgement",
            "alternateresponses",
            "pairwisecomparison",
            "pagetime",
        )
    ],
    # Study set-up on the research pages: studies, their model pools and quotas.
    ("collection", "study", ("view", "add", "change")),
    ("collection", "studymodel", ("view", "add", "change", "delete")),
    ("collection", "studyquota", ("view", "add", "change", "delete")),
    ("scoring", "evaluatedmodel", ("view", "add", "change")),
    ("datasets", "datasetversion", ("view", "add")),
    ("scoring", "evaluationrun", ("view", "add", "change")),
    ("scoring", "runconversation", ("view",)),
    ("scoring", "conversationscore", ("view",)),
    ("scoring", "runscore", ("view",)),
    ("scoring", "modelcallcache", ("view",)),
    ("scoring", "calltranscript", ("view",)),
    ("datasets", "exportjob", ("view", "add")),
    ("research", "humanassignment", ("view", "add", "change", "delete")),
    # "add" an erasure record = may erase a participant (admin action; research/erasure.py).
    ("research", "erasurerecord", ("view", "add")),
    ("research", "resultsnapshot", ("view",)),
)


def apply_research_group(group_model: Any, permission_model: Any) -> Any:
    """Create or update the research group; models are passed in so migrations can use historical ones."""
    group, _ = group_model.objects.get_or_create(name=RESEARCH_GROUP)
    wanted = []
    for app_label, model, actions in RESEARCH_GROUP_PERMISSIONS:
        for action in actions:
            perm = permission_model.objects.filter(
                content_type__app_label=app_label, codename=f"{action}_{model}"
            ).first()
            if perm is not None:
                wanted.append(perm)
    group.permissions.set(wanted)
    return group


def is_researcher(user: Any) -> bool:
    """Superusers, and staff accounts in the research group, are researchers.

    The check every researcher view and the API use. ``is_staff`` alone is not
    enough: a staff account made for something else (say, editing studies in
    admin) must not see diagnoses, exports or the launcher. The answer is kept
    on the user object so a page asking twice costs one query.
    """
    if not (user and user.is_authenticated and user.is_active):
        return False
    if user.is_superuser:
        return True
    if not user.is_staff:
        return False
    cached = getattr(user, "_attune_is_researcher", None)
    if cached is None:
        cached = user.groups.filter(name=RESEARCH_GROUP).exists()
        user._attune_is_researcher = cached
    return bool(cached)


def may_erase(user: Any) -> bool:
    """Whether ``user`` may erase participants (the admin action, the API): superusers, and accounts granted
    "add erasure record" (the research group is); ``attune erase`` runs on the server and asks no account."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser or user.has_perm("research.add_erasurerecord"))


def do_make_researcher(user: Any) -> None:
    """Give a user researcher rights: staff flag plus the research group."""
    from django.contrib.auth.models import Group, Permission

    group = apply_research_group(Group, Permission)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.groups.add(group)
