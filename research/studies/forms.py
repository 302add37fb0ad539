"""Forms of the study set-up pages.

``STUDY_SETTINGS_FIELDS`` is the one list of a study's editable settings: the
create and edit forms use it, and features that add study settings append
their fields to it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from collection.models import Study, StudyQuota, Topic
from collection.quotas import study_topics
from research.studies.setup import PoolEntry

#: The study settings a researcher edits on the set-up page, in the order shown.
STUDY_SETTINGS_FIELDS: list[str] = [
    "title",
    "information",
    "crisis_resources",
    "consent_version",
    "topics",
    "participant_groups",
    "open_enrolment",
    "min_turns",
    "max_turns",
    "binary_sample_size",
    "max_participants",
    "live_call_budget",
    "link_valid_days",
    # Recruitment platform (entry and exit) and live-model spend
    "platform_completion_url",
    "platform_completion_code",
    "platform_withdrawal_code",
    "platform_screenout_code",
    "platform_study_id",
    "platform_participant_param",
    "platform_study_param",
    "platform_session_param",
    "platform_code_param",
    "live_spend_budget_usd",
    # Quality control
    "attention_checks",
    "quality_min_page_seconds",
    "quality_min_edit_ratio",
    "quality_min_message_chars",
    "quality_max_failed_checks",
    # Participant safety: who is told, the wellbeing code, resources per country
    "safety_contact_email",
    "safety_notify_concern",
    "wellbeing_completion_code",
    "support_resources",
]

#: Settings with a sensible default that a form may leave out or blank: the study keeps what it has (a new
#: study: the default), so a researcher only touches them when the study needs something else.
KEEP_WHEN_BLANK: tuple[str, ...] = (
    "platform_participant_param",
    "platform_study_param",
    "platform_session_param",
    "platform_code_param",
    "attention_checks",
    "quality_min_page_seconds",
    "quality_min_edit_ratio",
    "quality_min_message_chars",
    "quality_max_failed_checks",
)


def _formfield(field: Any, **kwargs: Any) -> Any:
    """URLs typed without a scheme (the platform's completion URL) are taken as https."""
    if isinstance(field, models.URLField):
        kwargs["assume_scheme"] = "https"
    return field.formfield(**kwargs)


class TopicsField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Topic) -> str:
        return f"{obj.category}: {obj.subtopic}"


class TopicChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Topic) -> str:
        return f"{obj.category}: {obj.subtopic}"


class StudySettingsForm(forms.ModelForm):
    """A study's settings; the model's own validation and constraints refuse what the database would."""

    topics = TopicsField(
        queryset=Topic.objects.filter(in_catalogue=True),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Topics participants may choose from; choose none to offer the whole catalogue.",
    )

    class Meta:
        model = Study
        fields = STUDY_SETTINGS_FIELDS
        formfield_callback = _formfield
        labels = {
            "information": "Study information (shown before consent)",
            "consent_version": "Consent version",
            "min_turns": "Fewest turns before a participant may finish",
            "max_turns": "Most turns",
            "binary_sample_size": "Behaviour questions per turn",
            "max_participants": "Participant cap",
            "live_call_budget": "Live-model call budget",
            "safety_contact_email": "Safety contact (email)",
            "safety_notify_concern": "Also email at the concern level",
            "wellbeing_completion_code": "Completion code for stopping for wellbeing reasons",
            "support_resources": "Support resources by country (JSON)",
        }
        help_texts = {
            "consent_version": "Changing it on an open study asks everyone to consent again before they carry on.",
            "binary_sample_size": "0 asks all 36; otherwise a random sample of this many per turn.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in KEEP_WHEN_BLANK:
            if name in self.fields:
                self.fields[name].required = False
        limits = {"binary_sample_size": (0, 36), "min_turns": (1, None), "max_turns": (1, None)}
        for name, (low, high) in limits.items():
            field = self.fields.get(name)
            if field is None:
                continue
            field.validators.append(MinValueValidator(low))
            field.widget.attrs["min"] = low
            if high is not None:
                field.validators.append(MaxValueValidator(high))
                field.widget.attrs["max"] = high

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        for name in KEEP_WHEN_BLANK:
            if name in data and data[name] in (None, ""):
                data[name] = getattr(self.instance, name)
        ratio = data.get("quality_min_edit_ratio")
        if ratio is not None and not 0 <= ratio <= 1:
            self.add_error("quality_min_edit_ratio", "Give a share between 0 and 1 (0.05 = 5%).")
        low, high = data.get("min_turns"), data.get("max_turns")
        if low is not None and high is not None and high < low:
            self.add_error("max_turns", f"The most turns must be at least the fewest turns ({low}).")
        groups = data.get("participant_groups") or ""
        names = [name.strip() for name in groups.split(",") if name.strip()]
        too_long = [name for name in names if len(name) > 40]
        if too_long:
            self.add_error("participant_groups", f"Group names are at most 40 characters: {too_long[0][:40]}…")
        data["participant_groups"] = ", ".join(dict.fromkeys(names))
        return data


#: Addresses a study cannot take: they are pages of their own under /research/studies/.
RESERVED_SLUGS = frozenset({"new"})


class StudyCreateForm(StudySettingsForm):
    """A new study: its settings plus the address participants join at (fixed once made)."""

    class Meta(StudySettingsForm.Meta):
        fields = ["slug", *STUDY_SETTINGS_FIELDS]
        labels = {**StudySettingsForm.Meta.labels, "slug": "Address name (for the join link)"}
        help_texts = {
            **StudySettingsForm.Meta.help_texts,
            "slug": "Letters, numbers, hyphens; participants join at /join/<this>/. It cannot change later.",
        }

    def clean_slug(self) -> str:
        slug = str(self.cleaned_data.get("slug") or "")
        if slug in RESERVED_SLUGS:
            raise forms.ValidationError(f"{slug!r} is reserved; choose another address name.")
        return slug


class PoolForm(forms.Form):
    """One weight per original model: 0 leaves it out of the study's pool."""

    def __init__(self, *args: Any, entries: list[PoolEntry], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries = entries
        for entry in entries:
            self.fields[f"weight_{entry.model.pk}"] = forms.IntegerField(
                label=entry.model.alias,
                min_value=0,
                max_value=1000,
                initial=entry.weight,
                error_messages={
                    "required": "Give a weight (0 leaves the model out).",
                    "invalid": "A weight is a whole number.",
                },
            )

    def rows(self) -> list[tuple[PoolEntry, Any]]:
        return [(entry, self[f"weight_{entry.model.pk}"]) for entry in self.entries]

    def weights(self) -> dict[int, int]:
        return {entry.model.pk: int(self.cleaned_data[f"weight_{entry.model.pk}"]) for entry in self.entries}


class QuotaForm(forms.Form):
    kind = forms.ChoiceField(choices=StudyQuota.Kind.choices, label="Quota on")
    topic = TopicChoiceField(queryset=Topic.objects.none(), required=False, label="Topic (for a topic quota)")
    group = forms.CharField(max_length=40, required=False, label="Participant group (for a group quota)")
    cap = forms.IntegerField(min_value=1, label="Cap", error_messages={"min_value": "A cap is at least 1."})

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        topic = self.fields["topic"]
        assert isinstance(topic, forms.ModelChoiceField)
        topic.queryset = study_topics(study)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("kind") == StudyQuota.Kind.TOPIC and not data.get("topic"):
            self.add_error("topic", "Choose the topic this quota caps.")
        if data.get("kind") == StudyQuota.Kind.GROUP and not (data.get("group") or "").strip():
            self.add_error("group", "Name the participant group this quota caps.")
        return data


class StatusForm(forms.Form):
    status = forms.ChoiceField(choices=Study.Status.choices)
