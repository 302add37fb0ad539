"""Erasure of a participant on a researcher's request: every row that leads to them, and an audit record.

Collected data is PROTECTed against cascading deletes on purpose (nothing
disappears because a topic or a model was removed), so erasure deletes
explicitly, leaves first. Which tables it deletes from is read from the schema,
not kept by hand: every model whose foreign keys lead (directly or through
other such models) to a participant is erased, unless ``KEPT`` names it with
the reason; a test fails when a new relation is neither. A kept row's link to
an erased row must be ``SET_NULL``.

Erasure first withdraws the participant, in a transaction of its own, so a
failed erasure never undoes the withdrawal: the data is already out of scores,
exports and every page. The withdrawal re-scores the runs that held their
conversations and withdraws the export files that held them. The
ErasureRecord keeps counts only (research/models.py).

Not reachable from here: model answers in the shared call cache
(ModelCallCache holds responses under a hash of the request, with no link to
a conversation) and run files ``attune eval`` wrote outside the database.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from graphlib import TopologicalSorter
from typing import Any

from django.apps import apps
from django.db import models, transaction

from collection.models import Conversation, Participant
from collection.study_flow import do_withdraw
from datasets.models import ExportJob
from datasets.pseudonyms import find_participant, is_own_pseudonym
from research.models import ErasureRecord
from scoring.withdrawal import runs_holding

# Rows that lead to a participant but are kept when they are erased, and why. Nothing here may hold
# text the participant wrote or anything that identifies them.
KEPT: dict[str, str] = {
    "collection.LiveCall": "what a live original model cost (tokens, dollars, time) for the study's budget; "
    "no text, and its link to the turn is cleared",
}


def _links_to(model: type[models.Model], targets: set[type[models.Model]]) -> dict[str, type[models.Model]]:
    """``model``'s foreign keys (and one-to-ones) to any of ``targets``, by name, with the model each points at."""
    return {
        field.name: field.related_model
        for field in model._meta.get_fields()
        if field.concrete
        and (field.many_to_one or field.one_to_one)
        and isinstance(field.related_model, type)
        and field.related_model in targets
        and field.related_model is not model
    }


@cache
def personal_models() -> tuple[dict[type[models.Model], dict[str, type[models.Model]]], tuple[type[models.Model], ...]]:
    """Every model that leads to a participant, with its foreign keys that do (name: parent), parents first.

    Auto-created many-to-many tables count as models (a dataset version's membership rows lead to a
    conversation). Cached: the schema does not change while a process runs.
    """
    every = apps.get_models(include_auto_created=True)
    leads: dict[type[models.Model], dict[str, type[models.Model]]] = {Participant: {}}
    grown = True
    while grown:
        grown = False
        for model in every:
            links = _links_to(model, set(leads))
            if links and links != leads.get(model):
                leads[model] = links
                grown = True
    graph = {model: set(parents.values()) for model, parents in leads.items()}
    return leads, tuple(TopologicalSorter(graph).static_order())


def erased_models() -> list[type[models.Model]]:
    """The models erasure deletes from, parents first (delete in reverse)."""
    _, order = personal_models()
    return [model for model in order if model._meta.label not in KEPT]


class ErasureError(ValueError):
    """The participant to erase cannot be identified; the message says why."""


class AlreadyErased(ErasureError):
    """Nothing is stored under a pseudonym this deployment wrote: erased before (or never collected).

    Asking again for an erasure that was done is not an error for a caller that retries (the API answers
    it as done): the pseudonym's check tag proves this deployment issued it, so it is not a typo.
    """


def access_participant_to_erase(identifier: str) -> Participant:
    """The participant a researcher names: by stored pseudonym, by the pseudonym exports show, or by the
    id an imported file carried (stored only as its keyed hash)."""
    identifier = identifier.strip()
    if not identifier:
        raise ErasureError("Name the participant: a pseudonym as exports or the admin show it.")
    found = find_participant(Participant.objects.all(), identifier)
    if found is None and is_own_pseudonym(identifier):
        raise AlreadyErased(
            f"No participant is known as {identifier!r} any more: nothing is stored under this pseudonym "
            "(erased before, or never collected)."
        )
    if found is None:
        raise ErasureError(f"No participant is known as {identifier!r}.")
    return found


def do_erase_participant(participant: Participant, erased_by: Any = None, via: str = "command") -> ErasureRecord:
    """Delete everything stored about ``participant``; returns the audit record (no personal data in it)."""
    conversation_pks = list(Conversation.objects.filter(participant=participant).values_list("pk", flat=True))
    runs = runs_holding(conversation_pks)
    started = set(ExportJob.objects.values_list("pk", flat=True).filter(status=ExportJob.Status.WITHDRAWN))
    do_withdraw(participant)  # its own transaction: re-scoring and export withdrawal are queued for its commit
    exports = sorted(
        set(ExportJob.objects.values_list("pk", flat=True).filter(status=ExportJob.Status.WITHDRAWN)) - started
    )
    with transaction.atomic():
        locked = Participant.objects.select_for_update().filter(pk=participant.pk).first()
        if locked is None:  # a concurrent erasure of the same participant finished first
            raise AlreadyErased("This participant was erased by another request a moment ago.")
        rows = _delete_rows_leading_to(locked)
        return ErasureRecord.objects.create(
            erased_by=erased_by if getattr(erased_by, "is_authenticated", False) else None,
            via=via,
            rows_deleted=rows,
            runs_rescored=runs,
            exports_withdrawn=exports,
        )


def _delete_rows_leading_to(participant: Participant) -> dict[str, int]:
    """Finds the participant's rows table by table, parents first, then deletes them leaves first."""
    leads, _ = personal_models()
    order = erased_models()
    found: dict[type[models.Model], list[Any]] = {Participant: [participant.pk]}
    for model in order[1:] if order[0] is Participant else order:
        pks: set[Any] = set()
        for name, parent in leads[model].items():
            if found.get(parent):
                pks.update(model._default_manager.filter(**{f"{name}__in": found[parent]}).values_list("pk", flat=True))
        found[model] = sorted(pks)
    rows: dict[str, int] = defaultdict(int)
    for model in reversed(order):
        if found.get(model):
            _, deleted = model._default_manager.filter(pk__in=found[model]).delete()
            for label, count in deleted.items():
                rows[label] += count
    return {model._meta.label: rows.get(model._meta.label, 0) for model in reversed(order)}
