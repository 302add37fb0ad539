"""Forms of the dataset-version and export pages (validation only; services do the work)."""

from __future__ import annotations

from django import forms

from attunebench import catalogue as cat
from datasets.exchange import JOB_FORMATS


def _topic_choices() -> list[tuple[str, str]]:
    return [(c, c) for c in cat.TOPIC_CATEGORIES]


class DatasetVersionForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    topic_categories = forms.MultipleChoiceField(
        choices=_topic_choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave empty for every complete, non-withdrawn conversation.",
    )
    include_unfinished = forms.BooleanField(
        required=False,
        label="Include unfinished conversations",
        help_text="Off by default: a version holds complete conversations only. On, unfinished and empty ones are "
        "added, flagged in their records, with unanswered steps as null.",
    )


class ExportForm(forms.Form):
    fmt = forms.ChoiceField(
        choices=[
            (
                f,
                {
                    "json": "Canonical JSON (zip)",
                    "jsonl": "JSONL",
                    "parquet": "Parquet",
                    "published": "Published dataset folder (Hugging Face layout, card, Croissant; zip)",
                }[f],
            )
            for f in JOB_FORMATS
        ],
        label="Format",
    )
    include_model_identity = forms.BooleanField(
        required=False, initial=False, label="Include original models' real names (default: aliases)"
    )
