"""annotation.markup renders the answer pills as the Django template did, escaped, for every state."""

from __future__ import annotations

import re

import pytest
from django import forms
from django.template.loader import render_to_string

from annotation.forms import AnswersForm
from annotation.markup import answer_pills
from attunebench import catalogue as cat


def _norm(html: str) -> str:
    return re.sub(r">\s+<", "><", re.sub(r"\s+", " ", html)).strip()


def _template(field: forms.BoundField) -> str:
    return _norm(render_to_string("participant/includes/answer_pills.html", {"field": field}))


@pytest.mark.parametrize(
    "data",
    [None, {}, {"observed_B1": "yes", "preferred_B1": "na"}, {"observed_B1": "bogus"}],
    ids=["unbound", "all-missing", "answered", "invalid-choice"],
)
def test_pills_match_the_template(data):
    questions = list(cat.BINARY_QUESTIONS[:3])
    form = AnswersForm(data, questions=questions) if data is not None else AnswersForm(questions=questions)
    if data is not None:
        form.is_valid()
    for q in questions:
        for kind in ("observed", "preferred"):
            field = form[f"{kind}_{q.id}"]
            assert _norm(answer_pills(field)) == _template(field)


def test_checked_option_and_error_state():
    form = AnswersForm({"observed_B1": "no"}, questions=list(cat.BINARY_QUESTIONS[:1]))
    form.is_valid()
    observed = _norm(answer_pills(form["observed_B1"]))
    assert 'value="no" id="id_observed_B1_1" required checked>' in observed
    assert "has-error" not in observed
    preferred = _norm(answer_pills(form["preferred_B1"]))
    assert 'aria-describedby="error-preferred_B1"' in preferred
    assert preferred.count('aria-invalid="true"') == 3
    assert "Please say whether you wanted this" in preferred


def test_labels_and_values_are_escaped():
    class Evil(forms.Form):
        pick = forms.ChoiceField(
            label='<script>alert("x")</script>',
            choices=[('"><b>', "<i>Yes & no</i>"), ("na", "N/A")],
            widget=forms.RadioSelect,
        )

    form = Evil({"pick": '"><b>'})
    form.is_valid()
    html = answer_pills(form["pick"])
    assert "<script>" not in html and "<i>" not in html and '"><b>' not in html
    assert "&lt;script&gt;" in html and "&lt;i&gt;Yes &amp; no&lt;/i&gt;" in html
    assert _norm(html) == _template(form["pick"])
    assert html.count(" checked") == 1


def test_forms_sharing_built_fields_keep_their_own_state():
    """The answers page's choice fields are built once and shared; a form's answers, errors and labels stay its own."""
    questions = list(cat.BINARY_QUESTIONS[:2])
    answered = AnswersForm({"observed_B1": "yes", "preferred_B1": "no"}, questions=questions)
    assert not answered.is_valid()
    fresh = AnswersForm(questions=questions)
    fresh_html = _norm(answer_pills(fresh["observed_B1"]))
    assert "checked" not in fresh_html and "has-error" not in fresh_html and "aria-invalid" not in fresh_html
    assert "checked" in _norm(answer_pills(answered["observed_B1"]))
    assert "aria-invalid" in _norm(answer_pills(answered["observed_B2"]))
    # each question keeps its own "did I want it" wording
    assert fresh.fields["preferred_B1"].label == questions[0].wanted
    assert fresh.fields["preferred_B2"].label == questions[1].wanted
    assert fresh.fields["observed_B1"].required and not fresh.fields["intensity_Interested"].required
