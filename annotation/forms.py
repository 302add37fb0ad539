"""Per-turn annotation forms (SPEC 2.1–2.3), worded in the first person for the participant."""

from __future__ import annotations

from functools import cache
from typing import Any

from django import forms

from annotation.models import PairwiseComparison
from attunebench import catalogue as cat
from collection.attention import instruction
from collection.forms import FreeTextField, ParticipantForm, too_long_message

INTENSITY_CHOICES = [("", "\u2013")] + [(str(n), str(n)) for n in range(1, 8)]
YES_NO_NA_CHOICES = [(v, cat.YES_NO_NA_LABELS[v]) for v in cat.YES_NO_NA]
GOLDEN_MAX_LENGTH = 4000

# The answers page has about ninety choice fields (36 questions x 2, 20 mood strengths); building each one
# (Django normalises its choices twice, for the field and its widget) was most of the page's form cost. These
# fields are never changed after they are built (a form's state lives in the form and its bound fields), so each
# is built once per process and shared: set a per-form attribute on a copy, never on one of these.


@cache
def _intensity_field(item: str) -> forms.ChoiceField:
    return forms.ChoiceField(
        required=False, choices=INTENSITY_CHOICES, label=f"Strength of \u201c{item}\u201d (1 to 7)"
    )


@cache
def _yes_no_na_field(label: str, required_message: str) -> forms.ChoiceField:
    return forms.ChoiceField(
        label=label, choices=YES_NO_NA_CHOICES, widget=forms.RadioSelect, error_messages={"required": required_message}
    )


class MoodForm(ParticipantForm):
    """Zero or more of the 20 PANAS words with an optional 1–7 strength, or "no change"."""

    non_field_errors_at = "mood"  # the mood section's own problems (neither, or both) are the form's page-wide ones
    no_change = forms.BooleanField(required=False, label="No change: my mood is about the same as before this reply")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for item in cat.PANAS_ITEMS:
            self.fields[f"mood_{item}"] = forms.BooleanField(required=False, label=item)
            self.fields[f"intensity_{item}"] = _intensity_field(item)

    def rows(self) -> list[tuple[str, forms.BoundField, forms.BoundField, str]]:
        return [
            (item, self[f"mood_{item}"], self[f"intensity_{item}"], cat.panas_affect(item)) for item in cat.PANAS_ITEMS
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        tags = []
        for item in cat.PANAS_ITEMS:
            intensity = data.get(f"intensity_{item}") or ""
            if data.get(f"mood_{item}") or intensity:  # choosing a strength also chooses the word
                tags.append((item, int(intensity) if intensity else None))
        if not tags and not data.get("no_change"):
            raise forms.ValidationError(
                "Please tick at least one feeling, or tick \u201cNo change\u201d if your mood stayed about the same."
            )
        if tags and data.get("no_change"):
            raise forms.ValidationError(
                "You ticked \u201cNo change\u201d and also some feelings. Please untick one or the other."
            )
        data["tags"] = tags
        return data


def _binary_fields(form: forms.Form, questions: list[cat.BinaryQuestion]) -> None:
    for q in questions:
        form.fields[f"observed_{q.id}"] = _yes_no_na_field(
            "Did it happen?", "Please say whether this happened (Yes, No or Not applicable)."
        )
        form.fields[f"preferred_{q.id}"] = _yes_no_na_field(
            q.wanted, "Please say whether you wanted this (Yes, No or Not applicable)."
        )


def _winner_field() -> forms.ChoiceField:
    return forms.ChoiceField(
        label="Which do you prefer?",
        choices=[("A", "Reply A"), ("B", "Reply B")],
        widget=forms.RadioSelect,
        error_messages={"required": "Please choose Reply A or Reply B."},
    )


class AnswersForm(MoodForm):
    """The answers page: mood-shift tags, then each behaviour question answered twice (did it happen, did I want it)."""

    def __init__(self, *args: Any, questions: list[cat.BinaryQuestion], attention: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.questions = questions
        _binary_fields(self, questions)
        #: The instructed answer of this page's attention check (``collection.attention``), if it has one.
        self.attention = attention
        if attention is not None:
            self.fields["attention_check"] = forms.ChoiceField(
                label=instruction("answers", attention),
                choices=YES_NO_NA_CHOICES,
                widget=forms.RadioSelect,
                required=False,  # an unanswered check is recorded as failed, not refused
            )

    def attention_field(self) -> forms.BoundField | None:
        return self["attention_check"] if self.attention is not None else None

    def attention_answer(self) -> str:
        return str(self.cleaned_data.get("attention_check") or "") if self.attention is not None else ""

    def question_groups(self) -> list[tuple[str, list[tuple[cat.BinaryQuestion, forms.BoundField, forms.BoundField]]]]:
        """(category label, [(question, observed field, preferred field)]) in catalogue order."""
        groups: list[tuple[str, list[tuple[cat.BinaryQuestion, forms.BoundField, forms.BoundField]]]] = []
        for q in self.questions:
            label = cat.BINARY_CATEGORY_LABELS[q.category]
            if not groups or groups[-1][0] != label:
                groups.append((label, []))
            groups[-1][1].append((q, self[f"observed_{q.id}"], self[f"preferred_{q.id}"]))
        return groups

    def answers(self) -> dict[str, tuple[str, str]]:
        return {
            q.id: (self.cleaned_data[f"observed_{q.id}"], self.cleaned_data[f"preferred_{q.id}"])
            for q in self.questions
        }


class RewriteForm(ParticipantForm):
    """The participant's own ("golden") reply and the preference questions they choose to answer."""

    human_edited = FreeTextField(
        label="The reply you would have wanted",
        max_length=GOLDEN_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 8}),
        error_messages={
            "required": (
                "Please write the reply you would have wanted. You can start from one of the replies above "
                "if one already comes close."
            ),
            "max_length": too_long_message(),
        },
    )
    questions = forms.MultipleChoiceField(
        label="Which questions would you like to answer about the replies?",
        choices=list(cat.PAIRWISE_QUESTIONS.items()),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Please choose at least one question (the first one is a good start)."},
    )


class WinnersMixin(forms.Form):
    """An A/B winner field per comparison; shared by the compare page and the review page."""

    def __init__(self, *args: Any, comparisons: list[PairwiseComparison], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.comparisons = comparisons
        for c in comparisons:
            self.fields[f"winner_{c.position}"] = _winner_field()

    def winners(self) -> dict[int, str]:
        return {c.position: self.cleaned_data[f"winner_{c.position}"] for c in self.comparisons}


class ReviewForm(WinnersMixin, AnswersForm):
    """A saved turn's answers, to review and change: the answers page plus the comparison winners."""


class CompareForm(WinnersMixin, ParticipantForm):
    """A/B choice for each pair of replies under every chosen preference question."""
