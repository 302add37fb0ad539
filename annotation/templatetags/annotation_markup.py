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
def pair_options(field: BoundField) -> SafeString:
    """``{{ field|pair_options }}``: a comparison's A/B radios as numbered pills."""
    return markup.pair_options(field)


@register.filter
def mood_rows(form: Any) -> SafeString:
    """``{{ form|mood_rows }}``: every feeling of a mood form with its check box and strength menu."""
    if _blank(form):
        return markup.blank_form_markup(("mood_rows", *_shape(form)), lambda: markup.mood_rows(form.rows()))
    return markup.mood_rows(form.rows())


@register.filter
def question_groups(form: Any) -> SafeString:
    """``{{ form|question_groups }}``: an answers form's behaviour questions, by category, with its attention check."""

    def build() -> SafeString:
        return markup.question_groups(form.question_groups(), form.attention_field())

    if _blank(form):
        attention = form.attention_field()
        key = ("question_groups", *_shape(form), tuple(q.id for q in form.questions), attention and attention.label)
        return markup.blank_form_markup(key, build)
    return build()


def _blank(form: Any) -> bool:
    """Nothing answered yet and nothing to show again: the markup depends only on the form's shape."""
    return not form.is_bound and not form.initial


def _shape(form: Any) -> tuple[Any, ...]:
    return type(form), form.prefix, form.auto_id, form.use_required_attribute


@register.simple_tag
def scale(field: BoundField, low: str = "", high: str = "") -> SafeString:
    """``{% scale field low="1 not at all" high="7 extremely" %}``: a 1-7 radio scale with its end labels."""
    return markup.scale(field, low, high)


@register.simple_tag
def choices(field: BoundField, hint: str = "") -> SafeString:
    """``{% choices form.topics hint="..." %}``: a radio or check box list with its legend, hint and error."""
    return markup.choices(field, hint)
