"""Template filters for the annotation pages' precomputed markup (see annotation.markup)."""

from __future__ import annotations

from django import template
from django.forms import BoundField
from django.utils.safestring import SafeString

from annotation.markup import answer_pills as _answer_pills

register = template.Library()


@register.filter
def answer_pills(field: BoundField) -> SafeString:
    """``{{ field|answer_pills }}``: the field's yes/no/not-applicable pills."""
    return _answer_pills(field)
