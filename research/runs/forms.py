"""Forms of the run launcher and the model registry (validation only; services do the work)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from attunebench import catalogue as cat
from datasets.models import DatasetVersion
from research.runs.launcher import MAX_REPEAT
from scoring.models import EvaluatedModel
from scoring.provider_access import api_base_problem

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


# Which key variable a model reads is the admin's decision only: a researcher who could name one and point the
# model at a host of their choice could collect the key there. Where a model is called (api_base) a researcher
# may choose within the host allow-list (``scoring.provider_access``): this machine while live models are off,
# a listed host otherwise; a model that reads a key keeps the endpoint its administrator gave it.
REGISTRY_FIELDS = (
    "name",
    "kind",
    "litellm_model",
    "api_base",
    "max_concurrency",
    "requests_per_minute",
    "input_cost_per_million",
    "output_cost_per_million",
    "active",
    "notes",
)
REGISTRY_SUPERUSER_FIELDS = ("params",)


class EvaluatedModelForm(forms.ModelForm):
    """A registry row as researchers edit it; ``params`` only for superusers, ``api_base`` within the allow-list.

    Validation is the model's own (``EvaluatedModel.clean`` → ``scoring.provider_access``),
    so this form and the admin refuse exactly the same rows.
    """

    class Meta:
        model = EvaluatedModel
        fields = (*REGISTRY_FIELDS, *REGISTRY_SUPERUSER_FIELDS)
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args: Any, superuser: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.superuser = superuser
        if not superuser:
            for name in REGISTRY_SUPERUSER_FIELDS:
                del self.fields[name]
            self.fields["api_base"].help_text = (
                "An OpenAI-compatible server's URL, e.g. http://127.0.0.1:8000/v1 (litellm model openai/NAME). "
                + (
                    "Live models are on: only hosts listed in ATTUNE_PROVIDER_HOSTS."
                    if settings.ATTUNE_ALLOW_LIVE_MODELS
                    else "This machine only while live models are off."
                )
            )

    def clean_api_base(self) -> str:
        """A researcher's endpoint: on an allowed host, and never a new one for a model that reads a key."""
        value = (self.cleaned_data.get("api_base") or "").strip()
        stored = self.instance.api_base or "" if self.instance.pk else ""
        if self.superuser or value == stored:
            return value  # the model's own rules (clean) still apply
        if problem := api_base_problem(value, live=bool(settings.ATTUNE_ALLOW_LIVE_MODELS)):
            raise forms.ValidationError(problem)
        if self.instance.pk and "api_key_env" in (self.instance.params or {}):
            raise forms.ValidationError(
                "this model reads a provider key (params.api_key_env), so only an administrator may change "
                "where it is called"
            )
        return value

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
