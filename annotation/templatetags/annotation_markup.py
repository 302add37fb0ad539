"""Template filters for the annotation pages' precomputed markup (see annotation.markup)."""

from __future__ import annotations

from typing import Any

from django import template
from django.forms import BoundField
from django.utils.safestring import SafeString

from annotation import markup

register = template.Library()


@register.filter
def answer_pills(field: BoundField) -> SafeString:
    """``{{ field|answer_pills }}``: the field's yes/no/not-applicable pills."""
    return markup.answer_pills(field)


@register.filter
def checkbox(field: BoundField) -> SafeString:
    """``{{ field|checkbox }}``: a check box, as ``{{ field }}`` renders it but without the widget templates."""
    return markup.checkbox(field)


@register.filter
def select(field: BoundField) -> SafeString:
    """``{{ field|select }}``: a menu, as ``{{ field }}`` renders it but without the widget templates."""
    return markup.select(field)


@register.filter
def mood_rows(form: Any) -> SafeString:
    """``{{ form|mood_rows }}``: every feeling of a mood form with its check box and strength menu."""
    return markup.mood_rows(form.rows())


@register.filter
def question_groups(form: Any) -> SafeString:
    """``{{ form|question_groups }}``: an answers form's behaviour questions, by category, with its attention check."""
    return markup.question_groups(form.question_groups(), form.attention_field())
