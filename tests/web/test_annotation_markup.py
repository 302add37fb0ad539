"""annotation.markup renders the answer pills as the Django template did, escaped, for every state."""

from __future__ import annotations

import re

import pytest
from django import forms
from django.template import engines
from django.template.loader import render_to_string

from annotation.forms import AnswersForm, RewriteForm
from annotation.markup import (
    answer_pills,
    checkbox,
    choices,
    mood_rows,
    pair_options,
    question_groups,
    row_pills,
    scale,
    select,
)
from attunebench import catalogue as cat
from collection.forms import PanasForm


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


@pytest.mark.parametrize(
    "data",
    [None, {}, {"observed_B1": "na", "preferred_B1": "yes"}, {"observed_B1": "bogus"}],
    ids=["unbound", "all-missing", "answered", "invalid-choice"],
)
def test_row_pills_match_their_template_and_keep_the_full_names_for_screen_readers(data):
    questions = list(cat.BINARY_QUESTIONS[:3])
    form = AnswersForm(data, questions=questions) if data is not None else AnswersForm(questions=questions)
    if data is not None:
        form.is_valid()
    for q in questions:
        for kind, caption in (("observed", "Did it happen?"), ("preferred", "Did I want it?")):
            field = form[f"{kind}_{q.id}"]
            expected = render_to_string("participant/includes/row_pills.html", {"field": field, "caption": caption})
            html = _norm(row_pills(field, caption))
            assert html == _norm(expected)
            # the full question is the group's name, the short "N/A" is shown and "Not applicable" read out
            assert f'<legend class="visually-hidden">{q.wanted if kind == "preferred" else "Did it happen?"}' in html
            assert '<span aria-hidden="true">N/A</span><span class="visually-hidden">Not applicable</span>' in html


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


@pytest.mark.parametrize(
    "data",
    [
        None,
        {"mood_Afraid": "on", "intensity_Afraid": "3"},
        {"intensity_Upset": "9", "no_change": "on"},  # an invalid strength: the menu says so
        {"mood_Afraid": "", "intensity_Afraid": ""},
    ],
    ids=["unbound", "ticked-with-strength", "invalid-strength", "blank"],
)
def test_mood_boxes_and_menus_match_django(data):
    """The mood grid's check boxes and menus are what Django's widgets render, in every state."""
    form = AnswersForm(data, questions=[]) if data is not None else AnswersForm(questions=[])
    if data is not None:
        form.is_valid()
    assert _norm(checkbox(form["no_change"])) == _norm(str(form["no_change"]))
    for item in cat.PANAS_ITEMS:
        assert _norm(checkbox(form[f"mood_{item}"])) == _norm(str(form[f"mood_{item}"]))
        assert _norm(select(form[f"intensity_{item}"])) == _norm(str(form[f"intensity_{item}"]))


def test_initial_answers_are_shown_ticked_and_selected():
    form = AnswersForm(initial={"mood_Proud": "on", "intensity_Proud": "6"}, questions=[])
    assert " checked" in checkbox(form["mood_Proud"]) and " checked" not in checkbox(form["mood_Afraid"])
    assert '<option value="6" selected>' in select(form["intensity_Proud"])
    assert _norm(select(form["intensity_Proud"])) == _norm(str(form["intensity_Proud"]))


def test_required_box_and_menu_carry_required_and_escape_everything():
    class Odd(forms.Form):
        agree = forms.BooleanField(label="x")
        pick = forms.ChoiceField(choices=[("", "--"), ('"><b>', "<i>Yes & no</i>")])

    for data in ({}, {"agree": "on", "pick": '"><b>'}):
        form = Odd(data)
        form.is_valid()
        for name, render in (("agree", checkbox), ("pick", select)):
            html = render(form[name])
            assert _norm(html) == _norm(str(form[name]))
            assert "<i>" not in html and '"><b>' not in html
        assert " required" in checkbox(form["agree"]) and " required" in select(form["pick"])


def test_other_widgets_are_refused_not_misrendered():
    form = AnswersForm(questions=list(cat.BINARY_QUESTIONS[:1]))
    with pytest.raises(TypeError, match="observed_B1"):
        select(form["observed_B1"])
    with pytest.raises(TypeError, match="intensity_Afraid"):
        checkbox(form["intensity_Afraid"])


# The loops the answers and review pages ran through Django templates before annotation.markup took them over:
# the reference the markup must equal, field by field, in every state.
REFERENCE_GROUPS = """{% for label, rows in form.question_groups %}
<section class="question-group" aria-labelledby="group-{{ forloop.counter }}">
  <div class="group-head"><h3 id="group-{{ forloop.counter }}">{{ label }}</h3>
  <div class="binary-head" aria-hidden="true"><span>Did it happen?</span><span>Did I want it?</span></div></div>
  {% for question, observed, preferred in rows %}
  <fieldset class="binary-question" id="q-{{ question.id }}">
    <legend>{{ question.first_person }}</legend>
    <div class="binary-pair">
      {% include "participant/includes/row_pills.html" with field=observed caption="Did it happen?" %}
      {% include "participant/includes/row_pills.html" with field=preferred caption="Did I want it?" %}
    </div>
  </fieldset>
  {% endfor %}
  {% if forloop.first and form.attention_field %}
  <div class="binary-question" id="q-attention">
    {% include "participant/includes/answer_pills.html" with field=form.attention_field %}
  </div>
  {% endif %}
</section>
{% endfor %}"""
REFERENCE_MOOD = """{% for item, box, strength, affect in form.rows %}
    <div class="mood-item mood-{{ affect|lower }}" data-mood-item>
      <label class="choice" for="{{ box.id_for_label }}">{{ box }}<span>{{ item }}</span></label>
      <label class="strength" for="{{ strength.id_for_label }}"><span class="visually-hidden">{{ strength.label }}</span><span aria-hidden="true">Strength</span>
        {{ strength }}</label>
    </div>
{% endfor %}"""


def _reference(source: str, form: forms.Form) -> str:
    return _norm(engines["django"].from_string(source).render({"form": form}))


@pytest.mark.parametrize(
    "data",
    [None, {}, {"mood_Afraid": "on", "intensity_Afraid": "3", "observed_B1": "yes", "attention_check": "no"}],
    ids=["unbound", "all-missing", "partly-answered"],
)
@pytest.mark.parametrize("attention", [None, "no"], ids=["no-check", "with-check"])
def test_page_sections_match_the_template_loops(data, attention):
    questions = list(cat.BINARY_QUESTIONS)
    form = AnswersForm(data, questions=questions, attention=attention)
    if data is not None:
        form.is_valid()
    assert _norm(question_groups(form.question_groups(), form.attention_field())) == _reference(REFERENCE_GROUPS, form)
    assert _norm(mood_rows(form.rows())) == _reference(REFERENCE_MOOD, form)


def test_the_attention_check_closes_the_first_section_only():
    form = AnswersForm(questions=list(cat.BINARY_QUESTIONS), attention="yes")
    html = question_groups(form.question_groups(), form.attention_field())
    assert html.count('id="q-attention"') == 1
    first_section_end = html.index("</section>")
    assert html.index('id="q-attention"') < first_section_end
    assert html.count('class="question-group"') == len(form.question_groups())


def _filters(form: AnswersForm) -> str:
    template = engines["django"].from_string(
        "{% load annotation_markup %}{{ form|mood_rows }}|{{ form|question_groups }}"
    )
    return template.render({"form": form})


def _direct(form: AnswersForm) -> str:
    return f"{mood_rows(form.rows())}|{question_groups(form.question_groups(), form.attention_field())}"


def test_an_unanswered_form_is_served_from_the_blank_cache_with_exactly_its_own_markup():
    first, again = (AnswersForm(questions=list(cat.BINARY_QUESTIONS[:4])) for _ in range(2))
    assert _filters(first) == _filters(again) == _direct(AnswersForm(questions=list(cat.BINARY_QUESTIONS[:4])))
    # another question set, or the same one with an attention check, is another section
    other = AnswersForm(questions=list(cat.BINARY_QUESTIONS[4:6]))
    assert _filters(other) == _direct(other) and 'name="observed_B1"' not in _filters(other)
    checked = AnswersForm(questions=list(cat.BINARY_QUESTIONS[:4]), attention="no")
    assert _filters(checked) == _direct(checked) and 'name="attention_check"' in _filters(checked)


def test_saved_or_posted_answers_are_never_served_from_the_blank_cache():
    questions = list(cat.BINARY_QUESTIONS[:4])
    _filters(AnswersForm(questions=questions))  # the blank section is cached now
    saved = AnswersForm(initial={"observed_B1": "yes", "mood_Upset": "on"}, questions=questions)
    posted = AnswersForm({"observed_B1": "na"}, questions=questions)
    posted.is_valid()
    for form in (saved, posted):
        html = _filters(form)
        assert html == _direct(form) and " checked" in html
    assert 'value="na" id="id_observed_B1_2" required checked' in _filters(posted)
    assert "has-error" in _filters(posted)  # the unanswered questions show their errors


@pytest.mark.parametrize(
    "data",
    [None, {}, {"Upset": "4"}, {"Upset": "9"}],
    ids=["unbound", "all-missing", "answered", "invalid-choice"],
)
def test_scales_match_the_template(data):
    form = PanasForm(data) if data is not None else PanasForm()
    if data is not None:
        form.is_valid()
    for name in ("Upset", "Interested"):
        field = form[name]
        expected = render_to_string(
            "participant/includes/scale.html", {"field": field, "low": "1 not at all", "high": "7 <extremely>"}
        )
        assert _norm(scale(field, "1 not at all", "7 <extremely>")) == _norm(expected)
    if data == {"Upset": "4"}:
        assert 'value="4" id="id_Upset_3" required checked' in scale(form["Upset"])
    # no end labels: no anchor line, as the template leaves it out
    assert "scale-anchors" not in scale(form["Upset"]) and _norm(scale(form["Upset"])) == _norm(
        render_to_string("participant/includes/scale.html", {"field": form["Upset"]})
    )


def test_the_panas_page_shows_its_scales_through_the_fast_markup(client, participant):
    from tests.web.test_participant_flow import Walker

    walker = Walker(client, participant)
    walker.consent()
    walker.profile()
    html = walker.body(walker.get(walker.url("feelings-before/")))
    assert html.count('class="scale-options"') == len(cat.PANAS_ITEMS)
    assert html.count("<span>1 not at all</span><span>7 extremely</span>") == len(cat.PANAS_ITEMS)


def _choices_template(field: forms.BoundField, hint: str = "") -> str:
    return _norm(render_to_string("participant/includes/choices.html", {"field": field, "hint": hint}))


PROFILE_POSTS = {
    "unbound": None,
    "all-missing": {},
    "answered": {"age_band": cat.AGE_BANDS[1], "traits": [cat.TRAIT_OPTIONS[0], cat.TRAIT_OPTIONS[2]]},
    "invalid-choice": {"age_band": "bogus", "traits": ["bogus"], "goals": [cat.GOAL_OPTIONS[0]]},
}


@pytest.mark.parametrize("data", list(PROFILE_POSTS.values()), ids=list(PROFILE_POSTS))
@pytest.mark.parametrize("hint", ["", "You can leave it blank."], ids=["no-hint", "hint"])
def test_radio_and_check_box_lists_match_the_template(data, hint):
    from collection.forms import ProfileForm, SurveyForm

    profile = ProfileForm(data, ask_diagnoses=True) if data is not None else ProfileForm(ask_diagnoses=True)
    rewrite = RewriteForm(data, initial={"questions": ["general"]}) if data is not None else RewriteForm()
    survey = SurveyForm(data) if data is not None else SurveyForm()
    for form in (profile, rewrite, survey):
        if data is not None:
            form.is_valid()
        for name, field in form.fields.items():
            if type(field.widget) in (forms.RadioSelect, forms.CheckboxSelectMultiple):
                bound = form[name]
                assert _norm(choices(bound, hint)) == _choices_template(bound, hint), name


def test_a_list_shows_the_chosen_options_and_its_error():
    from collection.forms import ProfileForm

    form = ProfileForm({"traits": [cat.TRAIT_OPTIONS[1], cat.TRAIT_OPTIONS[3]]}, ask_diagnoses=False)
    form.is_valid()
    traits = _norm(choices(form["traits"]))
    assert traits.count(" checked") == 2 and "required" not in traits  # check boxes are never each required
    age = _norm(choices(form["age_band"]))
    assert 'aria-describedby="error-age_band"' in age and "Please choose an age range" in age
    assert age.count(" required") == len(cat.AGE_BANDS) and age.count('aria-invalid="true"') == len(cat.AGE_BANDS)


def test_list_labels_values_and_hints_are_escaped():
    class Evil(forms.Form):
        picks = forms.MultipleChoiceField(
            label='<script>alert("x")</script>',
            choices=[('"><b>', "<i>Yes & no</i>"), ("na", "N/A")],
            widget=forms.CheckboxSelectMultiple,
        )

    form = Evil({"picks": ['"><b>']})
    form.is_valid()
    html = choices(form["picks"], hint="<em>hint</em>")
    assert "<script>" not in html and "<i>" not in html and '"><b>' not in html and "<em>" not in html
    assert _norm(html) == _choices_template(form["picks"], "<em>hint</em>")
    assert html.count(" checked") == 1


def test_choices_refuses_a_widget_it_does_not_render():
    class Menu(forms.Form):
        pick = forms.ChoiceField(choices=[("a", "A")])

    with pytest.raises(TypeError, match="RadioSelect or CheckboxSelectMultiple"):
        choices(Menu()["pick"])


# How compare_pairs.html wrote a comparison's radios before pair_options: the reference it must match.
PAIR_OPTIONS_REFERENCE = (
    "{% for option in field %}"
    '<label class="pill" for="{{ option.id_for_label }}">{{ option.tag }}<span>{{ option.choice_label }}'
    '<kbd class="key-hint" aria-hidden="true">{{ forloop.counter }}</kbd></span></label>'
    "{% endfor %}"
)


@pytest.mark.parametrize(
    "data", [None, {}, {"winner_1": "B"}, {"winner_1": "C"}], ids=["unbound", "missing", "chosen", "bogus"]
)
def test_comparison_pills_match_the_widget_templates(data):
    from annotation.forms import CompareForm

    class Comparison:
        position = 1

    form = (
        CompareForm(data, comparisons=[Comparison()]) if data is not None else CompareForm(comparisons=[Comparison()])
    )
    if data is not None:
        form.is_valid()
    field = form["winner_1"]
    reference = engines["django"].from_string(PAIR_OPTIONS_REFERENCE).render({"field": field})
    assert _norm(pair_options(field)) == _norm(reference)
    assert pair_options(field).count(" checked") == (1 if data == {"winner_1": "B"} else 0)
