"""Participant forms. Every option string comes from the catalogue, so a stored answer is the catalogued string.

Error messages are written for people who may be tired or upset: they say what
is missing and how to fix it, in plain words.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet

from attunebench import catalogue as cat
from collection import quotas
from collection.attention import instruction
from collection.models import Topic

SCALE_CHOICES = [(str(n), str(n)) for n in range(cat.PANAS_SCALE_MIN, cat.PANAS_SCALE_MAX + 1)]
MESSAGE_MAX_LENGTH = 4000


def _options(values: tuple[str, ...], labels: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(stored, shown) pairs: the stored value is always the catalogued string, the label may be shorter."""
    return [(v, (labels or {}).get(v, v)) for v in values]


# Shorter wording for the survey screen; what is stored is the catalogued string (SPEC 2.4).
Q1_SCREEN_LABELS: dict[str, str] = {
    "To just listen or let me vent": "Just listen, or let me vent",
    "To help me understand or sort out my feelings": "Help me understand or sort out my feelings",
    "To help me think through options or make a decision": "Help me think through options or decide",
    "To help with something urgent, risky, or high-stakes": "Help with something urgent, risky or high-stakes",
    "To get specific information or advice": "Specific information or advice",
    "To help me calm down or feel steadier": "Help me calm down or feel steadier",
}


Q1_MISSING_MESSAGE = "Please choose at least one answer (you can choose \u201cOther\u201d)."


def too_long_message(advice: str = "Please shorten it: everything you wrote is still in the box.") -> str:
    """The error for text over its limit: nothing is cut, the message says by how much (Django %-formats it)."""
    return "This is %(show_value)d characters long and the limit is %(limit_value)d. " + advice.replace("%", "%%")


class FreeTextField(forms.CharField):
    """Free text with line breaks counted once (browsers post CR LF), as the live counter counts them."""

    def to_python(self, value: Any) -> str:
        text = super().to_python(value) or ""
        return text.replace("\r\n", "\n").replace("\r", "\n")


class ParticipantForm(forms.Form):
    """Base of every participant form: knows where the first problem is, for the error summary link."""

    #: The page section (``id="field-…"``) that shows this form's page-wide errors, for the summary to link to.
    non_field_errors_at = ""

    @property
    def first_error_field(self) -> str:
        for name in self.fields:
            if name in self.errors:
                return self.add_prefix(name)
        return ""

    @property
    def answers_with_errors(self) -> int:
        """How many answers are marked with a problem: what the summary counts (page-wide problems are listed apart)."""
        return sum(1 for name in self.fields if name in self.errors)


def scale_field(label: str, missing: str) -> forms.ChoiceField:
    """A required 1–7 radio scale."""
    return forms.ChoiceField(
        label=label,
        choices=SCALE_CHOICES,
        widget=forms.RadioSelect,
        error_messages={"required": missing, "invalid_choice": missing},
    )


class ConsentForm(ParticipantForm):
    agree = forms.BooleanField(
        label="I have read the information above and I agree to take part.",
        error_messages={
            "required": "To take part, please tick this box. If you would rather not, you can simply close this page."
        },
    )
    sensitive = forms.BooleanField(
        required=False,
        label=(
            "Optional: I agree that mental-health information I choose to share (for example a diagnosis) "
            "may be stored for this research."
        ),
    )


class ProfileForm(ParticipantForm):
    age_band = forms.ChoiceField(
        label="Your age",
        choices=_options(cat.AGE_BANDS),
        widget=forms.RadioSelect,
        error_messages={"required": "Please choose an age range, or \u201cPrefer not to say\u201d."},
    )
    traits = forms.MultipleChoiceField(
        label="Which words describe you? (optional, choose any)",
        required=False,
        choices=_options(cat.TRAIT_OPTIONS),
        widget=forms.CheckboxSelectMultiple,
    )
    goals = forms.MultipleChoiceField(
        label="What would you like from today's chat? (optional, choose any)",
        required=False,
        choices=_options(cat.GOAL_OPTIONS),
        widget=forms.CheckboxSelectMultiple,
    )
    diagnoses = forms.MultipleChoiceField(
        label="Have you ever been diagnosed with any of these? (optional, choose any)",
        required=False,
        choices=_options(cat.DIAGNOSIS_OPTIONS),
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args: Any, ask_diagnoses: bool, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.ask_diagnoses = ask_diagnoses
        if not ask_diagnoses:
            del self.fields["diagnoses"]

    def clean_diagnoses(self) -> list[str]:
        chosen = self.cleaned_data.get("diagnoses") or []
        exclusive = [c for c in chosen if c in (cat.DIAGNOSIS_NONE, cat.DIAGNOSIS_PREFER_NOT_TO_SAY)]
        if exclusive and len(chosen) > 1:
            raise forms.ValidationError(
                f"\u201c{exclusive[0]}\u201d cannot be combined with other answers. Please untick one of them."
            )
        return chosen


class PanasForm(ParticipantForm):
    """The 20 PANAS items on a 1–7 scale, all required (SPEC 2.1)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for item in cat.PANAS_ITEMS:
            self.fields[item] = scale_field(item, f"Please choose how {item.lower()} you feel, from 1 to 7.")

    def ratings(self) -> dict[str, int]:
        return {item: int(self.cleaned_data[item]) for item in cat.PANAS_ITEMS}


class TopicChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Topic) -> str:
        return obj.subtopic


def offered_topics() -> QuerySet[Topic]:
    """The topics a participant may choose from, in catalogue order."""
    return Topic.objects.filter(in_catalogue=True)


class TopicForm(ParticipantForm):
    topic = TopicChoiceField(
        queryset=offered_topics(),
        widget=forms.RadioSelect,
        empty_label=None,
        label="Choose a topic",
        error_messages={
            "required": "Please choose one topic to talk about.",
            "invalid_choice": "Please choose one of the topics listed.",
        },
    )
    attitude = forms.ChoiceField(
        label="How do you feel about talking about this topic?",
        choices=_options(cat.TOPIC_ATTITUDE_OPTIONS),
        widget=forms.RadioSelect,
        error_messages={"required": "Please say how you feel about talking about this topic."},
    )

    def __init__(self, *args: Any, study: Any = None, **kwargs: Any) -> None:
        """``study`` narrows the choice to its offered topics that are not full (``collection.quotas``)."""
        super().__init__(*args, **kwargs)
        self._topics = quotas.open_topics(study) if study is not None else offered_topics()
        field = self.fields["topic"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = self._topics
        self._topic_list: list[Topic] | None = None

    def topic_list(self) -> list[Topic]:
        if self._topic_list is None:
            self._topic_list = list(self._topics)
        return self._topic_list

    def has_topics(self) -> bool:
        """False when every topic the study offers is full: the page then says so instead of a form."""
        return bool(self.topic_list())

    def grouped_topics(self) -> list[tuple[str, list[Any]]]:
        """Radio buttons grouped by category, in catalogue order."""
        by_id = {str(radio.data["value"]): radio for radio in self["topic"]}
        groups: dict[str, list[Any]] = {}
        for topic in self.topic_list():
            radio = by_id.get(str(topic.pk))
            if radio is not None:
                groups.setdefault(topic.category, []).append(radio)
        return list(groups.items())


class MessageForm(ParticipantForm):
    message = FreeTextField(
        label="Your message",
        max_length=MESSAGE_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 4}),
        error_messages={
            "required": "Please write a message before sending.",
            "max_length": too_long_message(
                "Please shorten it, or send part of it now and the rest in your next message. "
                "Your text is still in the box."
            ),
        },
    )
    turn_number = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class SurveyForm(ParticipantForm):
    """Post-chat questions Q1–Q3, the follow-up, four-branch ratings and a comment (SPEC 2.4)."""

    # Not required on its own: words under "Other" are an answer too (``clean`` asks for one or the other).
    looking_for = forms.MultipleChoiceField(
        label=cat.Q1_PROMPT,
        required=False,
        choices=_options(cat.Q1_OPTIONS, Q1_SCREEN_LABELS),
        widget=forms.CheckboxSelectMultiple,
    )
    looking_for_other = FreeTextField(
        label="If you chose “Other”: what were you looking for? (optional)",
        required=False,
        max_length=300,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"max_length": too_long_message()},
    )
    emotion_clarity = forms.ChoiceField(
        label=cat.Q2_PROMPT,
        choices=_options(cat.Q2_OPTIONS),
        widget=forms.RadioSelect,
        error_messages={"required": "Please choose the answer closest to your experience."},
    )
    model_fit = forms.ChoiceField(
        label=cat.Q3_PROMPT,
        choices=_options(cat.Q3_OPTIONS),
        widget=forms.RadioSelect,
        error_messages={"required": "Please choose the answer closest to your experience."},
    )
    felt_off = forms.MultipleChoiceField(
        label=cat.Q3_FOLLOW_UP_PROMPT,
        required=False,
        choices=_options(cat.Q3_WHAT_FELT_OFF_SUGGESTIONS),
        widget=forms.CheckboxSelectMultiple,
    )
    felt_off_other = FreeTextField(
        label="Anything else that felt off? Write one thing per line (optional).",
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"max_length": too_long_message()},
    )
    comment = FreeTextField(
        label="Anything else you would like to tell the researchers? (optional)",
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 4}),
        error_messages={"max_length": too_long_message()},
    )

    def __init__(self, *args: Any, attention: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for branch in cat.FOUR_BRANCHES:
            self.fields[f"branch_{branch}"] = scale_field(
                cat.FOUR_BRANCH_PROMPTS[branch],
                "Please choose a number from 1 (not at all well) to 7 (extremely well).",
            )
        #: The instructed rating of the survey's attention check (``collection.attention``), if it has one.
        self.attention = attention
        if attention is not None:
            check = scale_field(instruction("survey", attention), "")
            check.required = False  # an unanswered check is recorded as failed, not refused
            self.fields["attention_check"] = check

    def branch_fields(self) -> list[forms.BoundField]:
        """The four ratings, with the attention check (if any) among them, after the second."""
        fields = [self[f"branch_{b}"] for b in cat.FOUR_BRANCHES]
        if self.attention is not None:
            fields.insert(2, self["attention_check"])
        return fields

    def attention_answer(self) -> str:
        return str(self.cleaned_data.get("attention_check") or "") if self.attention is not None else ""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "looking_for" not in data:  # an unknown choice: its own error says so
            return data
        # words written under "Other" choose "Other", as a strength chooses its feeling
        if (data.get("looking_for_other") or "").strip() and cat.Q1_OTHER not in data["looking_for"]:
            data["looking_for"] = [*data["looking_for"], cat.Q1_OTHER]
        if not data["looking_for"] and "looking_for_other" not in self.errors:  # over-long words are still words
            self.add_error("looking_for", Q1_MISSING_MESSAGE)
        return data

    def answers(self) -> dict[str, Any]:
        data = self.cleaned_data
        felt_off = list(data["felt_off"])
        for line in data["felt_off_other"].splitlines():
            line = line.strip()
            if line and line not in felt_off:
                felt_off.append(line)
        return {
            "looking_for": [o for o in cat.Q1_OPTIONS if o in data["looking_for"]],
            "looking_for_other": " ".join(data["looking_for_other"].split()),
            "emotion_clarity": data["emotion_clarity"],
            "model_fit": data["model_fit"],
            "what_felt_off": felt_off,
            "branches": {b: int(data[f"branch_{b}"]) for b in cat.FOUR_BRANCHES},
            "comment": data["comment"].strip(),
        }
