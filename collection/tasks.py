"""Celery task that emails a study's safety contact when a participant may be at risk.

Queued when the safety event commits, so with a worker the participant never waits for a mail server (in
the embedded default, with no worker, it is sent in the request, after the commit, within EMAIL_TIMEOUT). A failing mail
server is retried with backoff; when the retries are spent the reason is stored on the event (the research
pages show it beside the flag) and logged as an error, never swallowed. The email holds no words the
participant wrote: the level, the rules that fired, when, what was shown, and where to look.
"""

from __future__ import annotations

import logging
import smtplib
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from collection.models import SafetyEvent

logger = logging.getLogger("attune.safety")

RETRIES = 5


def safety_email(event: SafetyEvent) -> tuple[str, str]:
    """Subject and body for the safety contact (no participant text)."""
    study = event.study
    slug = study.slug if study else "-"
    subject = f"[Attune] {event.level} safety signal in study {slug}"
    where = reverse("research:study_safety", kwargs={"slug": slug}) if study else "/research/"
    body = "\n".join(
        [
            f"A participant in the study {study.title if study else '-'} may be at risk.",
            "",
            f"Level: {event.level} ({event.get_source_display()})",
            f"Signals: {', '.join(event.signals) or '-'}",
            f"When: {timezone.localtime(event.created_at):%Y-%m-%d %H:%M %Z}",
            f"Participant: {event.participant.pseudonym}",
            f"Shown to them: {event.get_shown_display()}",
            "",
            f"The study's safety log: {settings.ATTUNE_SITE_URL.rstrip('/')}{where}",
            "",
            "This is a research study's safety net, not a clinical assessment. The participant's messages are "
            "on the research pages only.",
        ]
    )
    return subject, body


@shared_task(bind=True, name="collection.notify_safety_contact", max_retries=RETRIES, acks_late=True)
def notify_safety_contact(self: Any, event_pk: int) -> bool:
    """Email the safety contact about one event, once; True when this call sent it."""
    event = SafetyEvent.objects.select_related("study", "participant").filter(pk=event_pk).first()
    if event is None or event.notified_at is not None or event.study is None or not event.study.safety_contact_email:
        return False
    subject, body = safety_email(event)
    try:
        send_mail(subject, body, None, [event.study.safety_contact_email])
    except Exception as exc:  # every failure is retried (mail servers fail in many ways) or recorded
        transient = isinstance(exc, smtplib.SMTPException | OSError)
        if transient and self.request.retries < RETRIES and not self.request.is_eager:
            raise self.retry(exc=exc, countdown=min(60, 2 ** (self.request.retries + 1))) from exc
        SafetyEvent.objects.filter(pk=event_pk).update(notify_error=f"{type(exc).__name__}: {exc}"[:300])
        logger.error(
            "safety: could not email the safety contact of study %s about event %s: %s", event.study.slug, event_pk, exc
        )
        return False
    SafetyEvent.objects.filter(pk=event_pk, notified_at__isnull=True).update(
        notified_at=timezone.now(), notify_error=""
    )
    return True
