"""Fast markup for the behaviour questions' answer pills (issue 14: server cost per request).

The answers and review pages show 36 behaviour questions, each asked twice with three radio options.
Rendering those 216 radios through Django's form widgets and an included template per field cost most of
the page's CPU (about 140 ms of a GET on this machine), which under load pushed annotation submits far past
their latency target. The markup is the same for every participant except for which option is checked and
the field's error, so the static part of each field (its escaped legend, option labels, names and ids) is
built once and cached; a request only joins those pieces with the few dynamic attributes.

The output is equivalent to ``participant/includes/answer_pills.html`` rendered with a bound radio field
(tests/web/test_annotation_markup.py checks that, including escaping); every text is escaped with Django's
``escape`` and the result is marked safe only here.
"""

from __future__ import annotations

from functools import lru_cache

from django.forms import BoundField
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


@lru_cache(maxsize=4096)
def _static_parts(
    html_name: str, auto_id: str, label: str, choices: tuple[tuple[str, str], ...]
) -> tuple[str, tuple[tuple[str, str, str], ...]]:
    """The escaped legend and, per option, (value, markup before the dynamic attributes, markup after).

    Cached per field name, id, label and options: none of them depends on the participant.
    """
    name = escape(html_name)
    options = []
    for index, (value, choice_label) in enumerate(choices):
        option_id = escape(f"{auto_id}_{index}") if auto_id else ""
        id_attr = f' id="{option_id}"' if option_id else ""
        for_attr = f' for="{option_id}"' if option_id else ""
        head = f'<label class="pill"{for_attr}><input type="radio" name="{name}" value="{escape(value)}"{id_attr}'
        tail = f'><span>{escape(choice_label)}<kbd class="key-hint" aria-hidden="true">{index + 1}</kbd></span></label>'
        options.append((str(value), head, tail))
    return escape(label), tuple(options)


def answer_pills(field: BoundField) -> SafeString:
    """One yes/no/not-applicable question as labelled radio "pills", with its error if it has one."""
    choices = tuple((str(value), str(label)) for value, label in field.field.choices)  # type: ignore[attr-defined]
    legend, options = _static_parts(field.html_name, field.auto_id or "", str(field.label), choices)
    name = escape(field.html_name)
    errors = field.errors
    current = field.value()
    current = "" if current is None else str(current)
    required = " required" if field.field.required and field.form.use_required_attribute else ""
    invalid = ' aria-invalid="true"' if errors else ""
    error_class = " has-error" if errors else ""
    described = f' aria-describedby="error-{name}"' if errors else ""
    parts = [
        f'<fieldset class="yes-no{error_class}" id="field-{name}" data-answer-group{described}>',
        f"<legend>{legend}</legend>",
    ]
    if errors:
        messages = "".join(f'<span class="visually-hidden">Error: </span>{escape(e)} ' for e in errors)
        parts.append(f'<p class="field-error" id="error-{name}">{messages}</p>')
    parts.append('<div class="yes-no-options">')
    for value, head, tail in options:
        checked = " checked" if value == current else ""
        parts.append(f"{head}{required}{checked}{invalid}{tail}")
    parts.append("</div></fieldset>")
    # every dynamic text above is escaped
    return mark_safe("".join(parts))
