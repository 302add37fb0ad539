"""Fast markup for the answers page's many small fields: server cost per request stays small under load.

The answers and review pages show 36 behaviour questions, each asked twice with three radio options.
Rendering those 216 radios through Django's form widgets and an included template per field cost most of
the page's CPU (about 140 ms of a GET on this machine), which under load pushed annotation submits far past
their latency target. The markup is the same for every participant except for which option is checked and
the field's error, so a field's markup is cached by everything it depends on (name, id, label, options, the
answer shown, required, errors) and a request mostly looks it up.

The 1-7 scales of the PANAS pages (20 items, seven radios each) and of the model ratings are the same kind of
field and go the same way (:func:`scale`).

The same holds for the mood grid's 20 check boxes and 20 strength menus: through Django's widget templates
(an included template per attribute and per option) they were about half of what was left of the page's CPU.
The loops over questions and feelings are joined here too, not in a template: each template variable costs
tens of microseconds, and these loops had several hundred.

A form nobody has answered yet (the usual first view of a page) goes further: its whole mood grid and question
list are the same for every participant shown the same questions, so :func:`blank_form_markup` keeps the section
by the form's shape and the page builds none of those sections' bound fields.

The radio and check box lists of the other participant pages (profile, topic, rewrite, surveys: :func:`choices`)
went through a Django widget template per option too; they are built here the same way.

The output is equivalent to ``participant/includes/answer_pills.html``, ``row_pills.html``, ``scale.html`` and
``choices.html`` (kept as the reference the tests compare with) rendered with a bound field, and
to Django's own rendering of a check box or a menu (tests/web/test_annotation_markup.py checks that, including
escaping, errors and the chosen value); every text is escaped with Django's ``escape`` and the result is marked
safe only here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Any, NamedTuple

from django import forms
from django.forms import BoundField
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


def answer_pills(field: BoundField) -> SafeString:
    """One yes/no/not-applicable question as labelled radio "pills", with its error if it has one."""
    return mark_safe(_pills(_radio_state(field)))


def scale(field: BoundField, low: str = "", high: str = "") -> SafeString:
    """A 1-7 radio scale (PANAS items, the model ratings) as ``participant/includes/scale.html`` renders it,
    with its end labels ``low`` and ``high`` when given."""
    return mark_safe(_scale(_radio_state(field), str(low), str(high)))


class _RadioState(NamedTuple):
    """Everything a radio group's markup depends on; hashable, so the markup is cached by it."""

    html_name: str
    auto_id: str
    label: str
    choices: tuple[tuple[str, str], ...]
    current: str  # the answer shown, "" for none
    required: bool
    errors: tuple[str, ...]


def _radio_state(field: BoundField) -> _RadioState:
    choices = tuple((str(value), str(label)) for value, label in field.field.choices)  # type: ignore[attr-defined]
    current = field.value()
    return _RadioState(
        field.html_name,
        field.auto_id or "",
        str(field.label),
        choices,
        "" if current is None else str(current),
        bool(field.field.required and field.form.use_required_attribute),
        tuple(str(error) for error in field.errors),
    )


def _group_head(
    css_class: str, state: _RadioState | _ChoicesState, data_attr: str = "", hint: str = "", legend_class: str = ""
) -> list[str]:
    """A field's opening fieldset, legend, hint and error line (``field_errors.html``)."""
    name = escape(state.html_name)
    error_class = " has-error" if state.errors else ""
    described = f' aria-describedby="error-{name}"' if state.errors else ""
    parts = [f'<fieldset class="{css_class}{error_class}" id="field-{name}"{data_attr}{described}>']
    legend_attr = f' class="{legend_class}"' if legend_class else ""
    parts.append(f"<legend{legend_attr}>{escape(state.label)}</legend>")
    if hint:
        parts.append(f'<p class="hint">{escape(hint)}</p>')
    if state.errors:
        messages = "".join(f'<span class="visually-hidden">Error: </span>{escape(e)} ' for e in state.errors)
        parts.append(f'<p class="field-error" id="error-{name}">{messages}</p>')
    return parts


def _radio_inputs(state: _RadioState) -> list[tuple[str, str, str]]:
    """Per option: (its id, its ``<input>`` as Django's RadioSelect writes it, its label escaped)."""
    name = escape(state.html_name)
    dynamic = (" required" if state.required else "") + "{checked}" + (' aria-invalid="true"' if state.errors else "")
    options: list[tuple[str, str, str]] = []
    for index, (value, choice_label) in enumerate(state.choices):
        option_id = escape(f"{state.auto_id}_{index}") if state.auto_id else ""
        id_attr = f' id="{option_id}"' if option_id else ""
        attributes = dynamic.format(checked=" checked" if value == state.current else "")
        tag = f'<input type="radio" name="{name}" value="{escape(value)}"{id_attr}{attributes}>'
        options.append((option_id, tag, escape(choice_label)))
    return options


@lru_cache(maxsize=8192)
def _pills(state: _RadioState) -> str:
    """The pills' markup, every text escaped. Cached: a question's markup depends only on its state, and
    a page has few distinct states per question (unanswered, or one of three answers, rarely an error)."""
    parts = _group_head("yes-no", state, " data-answer-group")
    parts.append('<div class="yes-no-options">')
    for index, (option_id, tag, choice_label) in enumerate(_radio_inputs(state), start=1):
        for_attr = f' for="{option_id}"' if option_id else ""
        parts.append(
            f'<label class="pill"{for_attr}>{tag}<span>{choice_label}'
            f'<kbd class="key-hint" aria-hidden="true">{index}</kbd></span></label>'
        )
    parts.append("</div></fieldset>")
    return "".join(parts)


#: The column headings of the behaviour rows: the two halves of every question (SPEC 2.2 observed, preferred).
OBSERVED_CAPTION = "Did it happen?"
PREFERRED_CAPTION = "Did I want it?"
#: What a row's pills show where the full option name would not fit; the full name stays their accessible name.
SHORT_OPTION_LABELS: dict[str, str] = {"Not applicable": "N/A"}


def row_pills(field: BoundField, caption: str) -> SafeString:
    """One half of a behaviour row: its full question is the (visually hidden) legend that screen readers
    announce, ``caption`` the short visible heading phones show above the pills (wider screens show it once,
    as a column heading), and the options are compact pills without key hints (the shortcuts box lists them)."""
    return mark_safe(_row_pills(_radio_state(field), caption))


@lru_cache(maxsize=8192)
def _row_pills(state: _RadioState, caption: str) -> str:
    parts = _group_head("yes-no row-answer", state, " data-answer-group", legend_class="visually-hidden")
    parts.append(f'<span class="answer-caption" aria-hidden="true">{escape(caption)}</span>')
    parts.append('<div class="yes-no-options">')
    for (_, label), (option_id, tag, choice_label) in zip(state.choices, _radio_inputs(state), strict=True):
        for_attr = f' for="{option_id}"' if option_id else ""
        short = SHORT_OPTION_LABELS.get(label)
        text = (
            f'<span aria-hidden="true">{escape(short)}</span><span class="visually-hidden">{choice_label}</span>'
            if short
            else choice_label
        )
        parts.append(f'<label class="pill"{for_attr}>{tag}<span>{text}</span></label>')
    parts.append("</div></fieldset>")
    return "".join(parts)


@lru_cache(maxsize=4096)
def _scale(state: _RadioState, low: str, high: str) -> str:
    """The scale's markup, every text escaped; cached as the pills are (a page of 20 items, 8 states each)."""
    parts = _group_head("scale", state)
    parts.append('<div class="scale-options">')
    for option_id, tag, choice_label in _radio_inputs(state):
        parts.append(f'<label class="scale-option" for="{option_id}">{tag}<span>{choice_label}</span></label>')
    parts.append("</div>")
    if low:
        parts.append(
            f'<p class="scale-anchors" aria-hidden="true"><span>{escape(low)}</span><span>{escape(high)}</span></p>'
        )
    parts.append("</fieldset>")
    return "".join(parts)


def _attributes(attrs: dict[str, Any]) -> str:
    """HTML attributes as Django's ``attrs.html`` writes them: ``True`` alone, ``False`` and ``None`` left out."""
    out = []
    for name, value in attrs.items():
        if value is True:
            out.append(f" {escape(name)}")
        elif value is not False and value is not None:
            out.append(f' {escape(name)}="{escape(value)}"')
    return "".join(out)


def _widget_attrs(field: BoundField) -> dict[str, Any]:
    """The attributes Django's ``BoundField.as_widget`` gives the field's widget (required, aria, id)."""
    widget = field.field.widget
    attrs = {**widget.attrs, **field.build_widget_attrs({})}
    if field.auto_id and "id" not in widget.attrs:
        attrs.setdefault("id", field.auto_id)
    return attrs


def checkbox(field: BoundField) -> SafeString:
    """A ``BooleanField``'s check box, ticked as Django's ``CheckboxInput`` would tick it."""
    widget = field.field.widget
    if not isinstance(widget, forms.CheckboxInput):
        raise TypeError(f"{field.html_name}: checkbox() renders a CheckboxInput, not {type(widget).__name__}")
    attrs = _widget_attrs(field)
    if widget.check_test(field.value()):
        attrs["checked"] = True
    return mark_safe(f'<input type="checkbox" name="{escape(field.html_name)}"{_attributes(attrs)}>')


class _ChoicesState(NamedTuple):
    """Everything a list of radios or check boxes depends on (``choices``); hashable, so it is cached by it."""

    html_name: str
    label: str
    hint: str
    input_type: str
    choices: tuple[tuple[str, str], ...]
    chosen: frozenset[int]  # the indexes of the options shown ticked
    attrs: tuple[tuple[str, Any], ...]  # every option's attributes before its own id and ``checked``
    errors: tuple[str, ...]


_CHOICE_WIDGETS = (forms.RadioSelect, forms.CheckboxSelectMultiple)


def choices(field: BoundField, hint: str = "") -> SafeString:
    """A radio or check box list with its legend, hint and error, as ``participant/includes/choices.html``
    renders it (each option through Django's widget templates), from a cache."""
    return mark_safe(_choices(_choices_state(field, hint)))


def pair_options(field: BoundField) -> SafeString:
    """A comparison's A/B radios as numbered pills, as ``participant/includes/compare_pairs.html`` wrote them
    with Django's widget templates, from a cache."""
    return mark_safe(_pair_options(_choices_state(field, "")))


def _choices_state(field: BoundField, hint: str) -> _ChoicesState:
    widget = field.field.widget
    if type(widget) not in _CHOICE_WIDGETS:
        raise TypeError(f"{field.html_name}: choices() renders a RadioSelect or CheckboxSelectMultiple")
    if any(isinstance(label, (list, tuple)) for _, label in widget.choices):
        raise TypeError(f"{field.html_name}: choices() renders flat options, not groups")
    options = tuple(("" if value is None else str(value), str(label)) for value, label in widget.choices)
    # the option attributes as BoundField.subwidgets builds them: the widget's, then id, required, aria
    id_ = widget.attrs.get("id") or field.auto_id
    attrs = {**widget.attrs, **field.build_widget_attrs({"id": id_} if id_ else {})}
    shown = set(widget.format_value(field.value()))
    chosen = [index for index, (value, _) in enumerate(options) if value in shown]
    if not widget.allow_multiple_selected:
        chosen = chosen[:1]
    return _ChoicesState(
        field.html_name,
        str(field.label),
        str(hint),
        widget.input_type,
        options,
        frozenset(chosen),
        tuple(attrs.items()),
        tuple(str(error) for error in field.errors),
    )


def _option_tags(state: _ChoicesState) -> list[tuple[str, str, str]]:
    """Per option: (its id escaped, its ``<input>`` as Django's ``input_option.html`` writes it, its label escaped)."""
    name = escape(state.html_name)
    base = dict(state.attrs)
    options: list[tuple[str, str, str]] = []
    for index, (value, label) in enumerate(state.choices):
        attrs = dict(base)
        if "id" in attrs:
            attrs["id"] = f"{attrs['id']}_{index}"
        if index in state.chosen:
            attrs["checked"] = True
        tag = f'<input type="{state.input_type}" name="{name}" value="{escape(value)}"{_attributes(attrs)}>'
        options.append((escape(attrs.get("id", "")), tag, escape(label)))
    return options


@lru_cache(maxsize=1024)
def _choices(state: _ChoicesState) -> str:
    parts = _group_head("choices", state, hint=state.hint)
    for option_id, tag, label in _option_tags(state):
        parts.append(f'<label class="choice" for="{option_id}">{tag}<span>{label}</span></label>')
    parts.append("</fieldset>")
    return "".join(parts)


@lru_cache(maxsize=1024)
def _pair_options(state: _ChoicesState) -> str:
    return "".join(
        f'<label class="pill" for="{option_id}">{tag}<span>{label}'
        f'<kbd class="key-hint" aria-hidden="true">{number}</kbd></span></label>'
        for number, (option_id, tag, label) in enumerate(_option_tags(state), start=1)
    )


@lru_cache(maxsize=256)
def _option_markup(choices: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str, str], ...]:
    """Per option: (value, markup before ``selected``, markup after); shared by every menu with these options."""
    return tuple((value, f'<option value="{escape(value)}"', f">{escape(label)}</option>") for value, label in choices)


def select(field: BoundField) -> SafeString:
    """A single-choice ``Select`` menu of flat options, with the chosen one selected as Django would."""
    widget = field.field.widget
    if type(widget) is not forms.Select:
        raise TypeError(f"{field.html_name}: select() renders a plain Select, not {type(widget).__name__}")
    choices = tuple((str(value), str(label)) for value, label in field.field.choices)  # type: ignore[attr-defined]
    chosen = set(widget.format_value(field.value()))
    options = "".join(
        f"{head}{' selected' if value in chosen else ''}{tail}" for value, head, tail in _option_markup(choices)
    )
    return mark_safe(f'<select name="{escape(field.html_name)}"{_attributes(_widget_attrs(field))}>{options}</select>')


def mood_rows(rows: list[tuple[str, BoundField, BoundField, str]]) -> SafeString:
    """The mood grid's items (``MoodForm.rows()``): each feeling's check box and strength menu."""
    parts = []
    for item, box, strength, affect in rows:
        parts.append(
            f'<div class="mood-item mood-{escape(affect.lower())}" data-mood-item>'
            f'<label class="choice" for="{escape(box.id_for_label)}">{checkbox(box)}<span>{escape(item)}</span></label>'
            f'<label class="strength" for="{escape(strength.id_for_label)}">'
            f'<span class="visually-hidden">{escape(strength.label)}</span><span aria-hidden="true">Strength</span>'
            f"{select(strength)}</label></div>"
        )
    return mark_safe("".join(parts))


def question_groups(
    groups: list[tuple[str, list[tuple[Any, BoundField, BoundField]]]], attention: BoundField | None = None
) -> SafeString:
    """The behaviour questions (``AnswersForm.question_groups()``), a section per category and one row per
    behaviour: the question, then its two answers side by side (did it happen, did I want it), under column
    headings; the attention check, if the page has one, closes the first section."""
    parts = []
    for number, (label, rows) in enumerate(groups, start=1):
        parts.append(f'<section class="question-group" aria-labelledby="group-{number}">')
        parts.append(
            f'<div class="group-head"><h3 id="group-{number}">{escape(label)}</h3>'
            f'<div class="binary-head" aria-hidden="true"><span>{OBSERVED_CAPTION}</span>'
            f"<span>{PREFERRED_CAPTION}</span></div></div>"
        )
        for question, observed, preferred in rows:
            parts.append(
                f'<fieldset class="binary-question" id="q-{escape(question.id)}">'
                f"<legend>{escape(question.first_person)}</legend>"
                f'<div class="binary-pair">{row_pills(observed, OBSERVED_CAPTION)}'
                f"{row_pills(preferred, PREFERRED_CAPTION)}</div></fieldset>"
            )
        if number == 1 and attention is not None:
            parts.append(f'<div class="binary-question" id="q-attention">{answer_pills(attention)}</div>')
        parts.append("</section>")
    return mark_safe("".join(parts))


_BLANK_SECTIONS: dict[Hashable, SafeString] = {}
_BLANK_SECTIONS_MAX = 512  # a form shape per question set shown: few in practice, bounded in any case


def blank_form_markup(key: Hashable, build: Callable[[], SafeString]) -> SafeString:
    """A section of an unanswered form, built once per ``key`` (which names everything the markup depends on)."""
    html = _BLANK_SECTIONS.get(key)
    if html is None:
        html = build()
        if len(_BLANK_SECTIONS) < _BLANK_SECTIONS_MAX:
            _BLANK_SECTIONS[key] = html
    return html
