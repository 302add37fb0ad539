"""Forms of the run launcher and the model registry (validation only; services do the work)."""

from __future__ import annotations

from typing import Any

from django import forms

from attunebench import catalogue as cat
from datasets.models import DatasetVersion
from research.runs.launcher import MAX_REPEAT
from scoring.models import EvaluatedModel

INTENSITY_CHOICES = [("", "–")] + [(str(i), str(i)) for i in range(cat.PANAS_SCALE_MIN, cat.PANAS_SCALE_MAX + 1)]
YES_NO_NA_CHOICES = [(v, cat.YES_NO_NA_LABELS[v]) for v in cat.YES_NO_NA]


def _topic_choices() -> list[tuple[str, str]]:
    return [(c, c) for c in cat.TOPIC_CATEGORIES]


class LaunchForm(forms.Form):
    models = forms.ModelMultipleChoiceField(
        queryset=EvaluatedModel.objects.filter(active=True).exclude(kind=EvaluatedModel.Kind.HUMAN),
        widget=forms.CheckboxSelectMultiple,
        label="Evaluated models",
    )
    modes = forms.MultipleChoiceField(
        choices=[(m, m) for m in cat.MODES], widget=forms.CheckboxSelectMultiple, initial=["default"]
    )
    panas_strategy = forms.ChoiceField(
        choices=[(s, s) for s in cat.PANAS_STRATEGIES], initial="absolute", label="PANAS strategy"
    )
    judge = forms.ModelChoiceField(
        queryset=EvaluatedModel.objects.filter(active=True).exclude(kind=EvaluatedModel.Kind.HUMAN),
        required=False,
        empty_label="no judge",
        help_text="Optional model that rates the EM's drafts (SPEC 4 step 5).",
    )
    dataset_version = forms.ModelChoiceField(
        queryset=DatasetVersion.objects.filter(frozen=True).order_by("-created_at"),
        required=False,
        empty_label="all complete conversations",
        label="Dataset",
    )
    topic_categories = forms.MultipleChoiceField(
        choices=_topic_choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Only these topic categories",
    )
    fresh_calls = forms.BooleanField(
        required=False,
        label="Fresh calls",
        help_text="Ask the models again instead of reusing answers earlier runs paid for (a model updated "
        "behind its name). The new answers are cached; a resumed run reuses its own.",
    )
    repeat = forms.IntegerField(
        min_value=0,
        max_value=MAX_REPEAT,
        initial=0,
        required=False,
        label="Repeat number",
        help_text="0 for the first run of this configuration; 1, 2, … for repeats, each with answers of its own "
        "(cached under its number), to measure sampling variance. Repeating a number reuses its answers.",
    )

    def clean_repeat(self) -> int:
        return self.cleaned_data.get("repeat") or 0


# Where a model is called and which key variable it reads are the admin's decision only: a researcher
# who could point a model at a host of their choice could collect a key there.
REGISTRY_FIELDS = (
    "name",
    "kind",
    "litellm_model",
    "max_concurrency",
    "requests_per_minute",
    "input_cost_per_million",
    "output_cost_per_million",
    "active",
    "notes",
)
REGISTRY_SUPERUSER_FIELDS = ("api_base", "params")


class EvaluatedModelForm(forms.ModelForm):
    """A registry row as researchers edit it; ``api_base`` and ``params`` only for superusers.

    Validation is the model's own (``EvaluatedModel.clean`` → ``scoring.provider_access``),
    so this form and the admin refuse exactly the same rows.
    """

    class Meta:
        model = EvaluatedModel
        fields = (*REGISTRY_FIELDS, *REGISTRY_SUPERUSER_FIELDS)
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args: Any, superuser: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not superuser:
            for name in REGISTRY_SUPERUSER_FIELDS:
                del self.fields[name]

    def add_error(self, field: str | None, error: Any) -> None:
        """The model's errors on a field this account may not edit go above the form, saying whom to ask.

        (A row saved before the rules existed may break one: the researcher can still see why.)
        """
        from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

        if field is None and isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            kept: dict[str, list[ValidationError]] = {}
            for name, errors in error.error_dict.items():
                if name == NON_FIELD_ERRORS or name in self.fields:
                    kept.setdefault(name, []).extend(errors)
                else:
                    kept.setdefault(NON_FIELD_ERRORS, []).extend(
                        ValidationError(f"{name} (an administrator's setting): {message}")
                        for e in errors
                        for message in e.messages
                    )
            error = ValidationError(kept)
        super().add_error(field, error)
