"""Forms of the human-baseline page and the rater screens (validation only; services do the work)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from attunebench import catalogue as cat
from collection.models import Conversation
from research.raters.human_baseline import RaterStep

INTENSITY_CHOICES = [("", "–")] + [(str(i), str(i)) for i in range(cat.PANAS_SCALE_MIN, cat.PANAS_SCALE_MAX + 1)]
YES_NO_NA_CHOICES = [(v, cat.YES_NO_NA_LABELS[v]) for v in cat.YES_NO_NA]


class AssignForm(forms.Form):
    rater = forms.ModelChoiceField(queryset=get_user_model().objects.filter(is_active=True).order_by("username"))
    conversation = forms.ModelChoiceField(
        queryset=Conversation.objects.real()
        .filter(status=Conversation.Status.COMPLETE, participant__withdrawn_at__isnull=True)
        .order_by("conversation_id"),
        to_field_name="conversation_id",
    )


class DraftForm(forms.Form):
    turn_number = forms.IntegerField(widget=forms.HiddenInput)
    draft = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), required=False, label="The reply you would give to this message"
    )


class AnalysisForm(forms.Form):
    """Emotion tags, behaviour answers and pairwise picks for one turn, built from the step's questions."""

    turn_number = forms.IntegerField(widget=forms.HiddenInput)

    def __init__(self, *args: Any, step: RaterStep, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step = step
        for item in cat.PANAS_ITEMS:
            self.fields[f"emotion_{item}"] = forms.BooleanField(required=False, label=item)
            self.fields[f"intensity_{item}"] = forms.ChoiceField(choices=INTENSITY_CHOICES, required=False, label="")
        for q in step.questions:
            self.fields[f"om_{q.id}"] = forms.ChoiceField(
                choices=YES_NO_NA_CHOICES, widget=forms.RadioSelect, label="Did the original reply do this?"
            )
            self.fields[f"hp_{q.id}"] = forms.ChoiceField(
                choices=YES_NO_NA_CHOICES, widget=forms.RadioSelect, label="Did the participant want it?"
            )
        for c in step.comparisons:
            self.fields[f"pw_{c['index']}"] = forms.ChoiceField(
                choices=[("A", f"A ({c['a']})"), ("B", f"B ({c['b']})")], widget=forms.RadioSelect, label=c["question"]
            )

    def emotion_rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        return [(self[f"emotion_{i}"], self[f"intensity_{i}"]) for i in cat.PANAS_ITEMS]

    def question_rows(self) -> list[tuple[cat.BinaryQuestion, forms.BoundField, forms.BoundField]]:
        return [(q, self[f"om_{q.id}"], self[f"hp_{q.id}"]) for q in self.step.questions]

    def comparison_rows(self) -> list[tuple[dict[str, Any], forms.BoundField]]:
        return [(c, self[f"pw_{c['index']}"]) for c in self.step.comparisons]

    def answers(self) -> dict[str, Any]:
        data = self.cleaned_data
        tags = [
            {"emotion": item, "intensity": int(data[f"intensity_{item}"]) if data[f"intensity_{item}"] else None}
            for item in cat.PANAS_ITEMS
            if data[f"emotion_{item}"]
        ]
        return {
            "emotion_tags": tags,
            "om_answers": {q.id: data[f"om_{q.id}"] for q in self.step.questions},
            "participant_answers": {q.id: data[f"hp_{q.id}"] for q in self.step.questions},
            "pairwise": {str(c["index"]): data[f"pw_{c['index']}"] for c in self.step.comparisons},
        }


class PostForm(forms.Form):
    """Post-conversation predictions (SPEC 4, strategy 'absolute': the rater sees pre-PANAS totals)."""

    looking_for = forms.MultipleChoiceField(
        choices=[(o, o) for o in cat.Q1_OPTIONS],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label=cat.Q1_PROMPT,
    )
    emotion_clarity = forms.ChoiceField(
        choices=[("", "–")] + [(o, o) for o in cat.Q2_OPTIONS], required=False, label=cat.Q2_PROMPT
    )
    model_fit = forms.ChoiceField(
        choices=[("", "–")] + [(o, o) for o in cat.Q3_OPTIONS], required=False, label=cat.Q3_PROMPT
    )
    what_felt_off = forms.CharField(
        required=False,
        label="What felt off for the participant? (comma-separated)",
        help_text="Suggestions: " + ", ".join(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        scale = [(str(i), str(i)) for i in range(cat.PANAS_SCALE_MIN, cat.PANAS_SCALE_MAX + 1)]
        for item in cat.PANAS_ITEMS:
            self.fields[f"panas_{item}"] = forms.ChoiceField(choices=scale, initial="4", label=item)
        branch_scale = [(str(i), str(i)) for i in range(cat.FOUR_BRANCH_MIN, cat.FOUR_BRANCH_MAX + 1)]
        for branch in cat.FOUR_BRANCHES:
            self.fields[f"branch_{branch}"] = forms.ChoiceField(
                choices=branch_scale,
                initial=str(cat.FOUR_BRANCH_DEFAULT_PREDICTION),
                label=f"{branch.capitalize()}: the participant's rating of the model (1–7)",
                help_text=cat.FOUR_BRANCH_PROMPTS[branch],
            )

    def panas_fields(self) -> list[forms.BoundField]:
        return [self[f"panas_{i}"] for i in cat.PANAS_ITEMS]

    def branch_fields(self) -> list[forms.BoundField]:
        return [self[f"branch_{b}"] for b in cat.FOUR_BRANCHES]

    def answers(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "panas_items": {i: int(data[f"panas_{i}"]) for i in cat.PANAS_ITEMS},
            "looking_for": list(data["looking_for"]),
            "emotion_clarity": data["emotion_clarity"] or None,
            "model_fit": data["model_fit"] or None,
            "what_felt_off": [p.strip() for p in data["what_felt_off"].split(",") if p.strip()],
            "four_branch": {b: int(data[f"branch_{b}"]) for b in cat.FOUR_BRANCHES},
        }
