"""Defaults a fresh installation needs before anyone can take part: topics, a demo study, an offline model pool.

``ensure_defaults()`` is idempotent: call it as often as you like (``attune
demo`` does on every start); it creates what is missing and never changes what
a researcher has edited.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from attunebench import catalogue as cat
from collection.models import OriginalModel, Study, Topic

DEFAULT_STUDY_SLUG = "attune-demo"

DEFAULT_STUDY_INFORMATION = """\
Thank you for considering taking part in this study.

What it is about: we are studying how well AI chat models respond to people's feelings. You will have a short conversation with an AI model about a topic you choose, and answer some questions about how you feel and about its replies.

What you will do: answer a few questions about yourself and your mood, choose a topic, chat for at least a few messages (after each reply you will answer questions about it), and finish with a few last questions.

Taking part is voluntary. You can skip sharing details you would rather keep private, stop at any time, and withdraw from the study using the link at the bottom of every page.
"""

DEFAULT_CRISIS_RESOURCES = (
    "If you are in danger or thinking about harming yourself, please call your local emergency number now "
    "(112 in Europe, 911 in the US, 999 in the UK). In the UK you can call Samaritans free on 116 123; "
    "in the US call or text 988. Elsewhere, findahelpline.com lists free, confidential helplines."
)

#: The offline pool: scripted models with two different styles (see collection.chat_model).
OFFLINE_MODEL_NAMES: tuple[str, ...] = ("offline-scripted-listener", "offline-scripted-guide")


@dataclass(frozen=True)
class DefaultsResult:
    study: Study
    models: list[OriginalModel]
    topics_created: int


def ensure_topics() -> int:
    """Every catalogued topic exists (the 0002 migration normally did this); returns how many were added."""
    created = 0
    for order, (category, subtopic) in enumerate(cat.ALL_TOPICS):
        _, was_created = Topic.objects.get_or_create(
            category=category, subtopic=subtopic, defaults={"order": order, "in_catalogue": True}
        )
        created += was_created
    return created


def ensure_defaults() -> DefaultsResult:
    """The demo study (open enrolment), the offline model pool and the topics."""
    with transaction.atomic():
        topics_created = ensure_topics()
        study, _ = Study.objects.get_or_create(
            slug=DEFAULT_STUDY_SLUG,
            defaults={
                "title": "Feelings and AI conversations (demo study)",
                "information": DEFAULT_STUDY_INFORMATION,
                "crisis_resources": DEFAULT_CRISIS_RESOURCES,
                "open_enrolment": True,
                "min_turns": 3,
                "max_turns": 12,
                "binary_sample_size": 0,
            },
        )
        models = [
            OriginalModel.objects.get_or_create(name=name, defaults={"provider": "offline", "litellm_model": ""})[0]
            for name in OFFLINE_MODEL_NAMES
        ]
    return DefaultsResult(study=study, models=models, topics_created=topics_created)
