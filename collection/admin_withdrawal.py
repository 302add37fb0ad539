"""Withdrawal in the Django admin: a withdrawn participant's data is out of every admin list, page and search.

The research pages, the API, exports and scores already leave a withdrawn
participant out; the admin is the last surface that reads collected data. For
everyone but superusers, every admin whose model leads to a participant
(through its foreign keys: a conversation, a turn, an annotation, a profile,
a run output) leaves their rows out of its queryset, so lists, searches over
the text and change pages all lose them. Superusers, who handle erasure
requests and mistakes, still see them, marked in a "withdrawn" column.
"""

from __future__ import annotations

from collections import deque
from functools import cache
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import BaseModelAdmin
from django.db import models
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.http import HttpRequest

from collection.models import Participant


@cache
def participant_lookup(model: type[models.Model]) -> str | None:
    """The shortest foreign-key path from ``model`` to its participant (``turn__conversation__participant``).

    None for a model that leads to no participant. The participant's own model is reached as ``pk`` itself.
    """
    if model is Participant:
        return ""
    seen = {model}
    queue: deque[tuple[type[models.Model], str]] = deque([(model, "")])
    while queue:
        current, path = queue.popleft()
        for field in current._meta.get_fields():
            if not (field.concrete and (field.many_to_one or field.one_to_one)):
                continue
            target = field.related_model
            step = f"{path}__{field.name}" if path else field.name
            if target is Participant:
                return step
            if isinstance(target, type) and target not in seen and target._meta.app_label != "auth":
                seen.add(target)
                queue.append((target, step))
    return None


def withdrawn_condition(model: type[models.Model]) -> Q | None:
    """Rows of ``model`` that belong to a withdrawn participant, or None when the model has no participant."""
    lookup = participant_lookup(model)
    if lookup is None:
        return None
    return Q(**{f"{lookup}__withdrawn_at__isnull" if lookup else "withdrawn_at__isnull": False})


class HidesWithdrawnRows(BaseModelAdmin):
    """Leaves withdrawn participants' rows out of a model admin's or an inline's queryset, except for superusers."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        condition = withdrawn_condition(self.model)
        if condition is None:
            return queryset
        if getattr(request.user, "is_superuser", False):
            return queryset.annotate(_withdrawn=ExpressionWrapper(condition, output_field=BooleanField()))
        return queryset.exclude(condition)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        """A choice of a related row (a conversation to assign, say) never offers a withdrawn participant's."""
        return super().formfield_for_foreignkey(db_field, request, **self._choices(db_field, request, kwargs))

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        return super().formfield_for_manytomany(db_field, request, **self._choices(db_field, request, kwargs))

    def _choices(self, db_field: Any, request: HttpRequest, kwargs: dict[str, Any]) -> dict[str, Any]:
        condition = withdrawn_condition(db_field.related_model)
        if condition is None or getattr(request.user, "is_superuser", False):
            return kwargs
        queryset = kwargs.get("queryset", db_field.related_model._default_manager.all())
        return {**kwargs, "queryset": queryset.exclude(condition)}


class HidesWithdrawnAdmin(HidesWithdrawnRows, admin.ModelAdmin):
    """A model admin without withdrawn participants' rows; superusers see them, marked in a "withdrawn" column."""

    def get_list_display(self, request: HttpRequest) -> Any:
        display = super().get_list_display(request)
        if getattr(request.user, "is_superuser", False) and withdrawn_condition(self.model) is not None:
            return (*display, "participant_withdrawn")
        return display

    @admin.display(boolean=True, description="withdrawn", ordering="_withdrawn")
    def participant_withdrawn(self, obj: models.Model) -> bool:
        return bool(getattr(obj, "_withdrawn", False))  # annotated by get_queryset
