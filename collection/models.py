"""What a study collects: participants, consent, profiles, original models, conversations, turns and surveys.

Collected data is protected from cascading deletes (PROTECT): removing a model
or a topic must never silently remove what a participant gave us. Withdrawal
is a status, and exports and scoring skip withdrawn data.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from attunebench import catalogue as cat


def _choices(values: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(v, v) for v in values]


#: Outcomes of the identity screen of a reply (collection.identity_guard).
IDENTITY_UNSCREENED = "unscreened"
IDENTITY_CLEAN = "clean"
IDENTITY_REGENERATED = "regenerated"
IDENTITY_MASKED = "masked"
IDENTITY_SCREEN_OUTCOMES: tuple[str, ...] = (IDENTITY_UNSCREENED, IDENTITY_CLEAN, IDENTITY_REGENERATED, IDENTITY_MASKED)


def new_pseudonym() -> str:
    """The only participant id that ever leaves the database (SPEC 2.5)."""
    return "p-" + secrets.token_hex(6)


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    """What the database keeps of a study-link token: its SHA-256 (the token has 192 random bits, so no salt)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def hash_platform_id(platform_id: str, key: str | None = None) -> str:
    """What the database keeps of a recruitment-platform participant id: its HMAC-SHA256 under the pseudonym key.

    Keyed (unlike a study-link token, a platform id is short and guessable, so a
    plain hash could be reversed by trying ids); the key is the deployment's
    ``ATTUNE_PSEUDONYM_KEY``, kept beside the secret key in the data dir.
    """
    secret = (key or settings.ATTUNE_PSEUDONYM_KEY).encode("utf-8")
    return hmac.new(secret, f"platform-id\x00{platform_id}".encode(), hashlib.sha256).hexdigest()


def hash_platform_session(session_id: str, key: str | None = None) -> str:
    """What the database keeps of the platform session id a participant enrolled with: a keyed hash.

    The session id is what proves a returning platform participant is the one who enrolled: unlike their
    participant id, which every researcher they ever worked for sees, it is only in the link the platform
    gave them for this study.
    """
    secret = (key or settings.ATTUNE_PSEUDONYM_KEY).encode("utf-8")
    return hmac.new(secret, f"platform-session\x00{session_id}".encode(), hashlib.sha256).hexdigest()


def new_alias() -> str:
    return "om-" + secrets.token_hex(4)


def new_completion_code() -> str:
    return secrets.token_hex(4).upper()


class StudyQuerySet(models.QuerySet["Study"]):
    def open(self) -> StudyQuerySet:
        """Studies that accept participants now: the one definition every entry point uses."""
        return self.filter(status=Study.Status.OPEN)


def not_test_data(participant_path: str = "participant") -> Q:
    """The one filter that keeps preview (test) participants out of the data.

    A researcher's preview walks the real participant flow as a participant with
    ``is_test`` set; exports, dataset versions, scores, collection statistics and
    monitoring all filter with this, so nothing a preview made is ever counted.
    Imported conversations have no participant and are data. ``participant_path``
    is the lookup path from the queried model to its participant.
    """
    return Q(**{f"{participant_path}__isnull": True}) | Q(**{f"{participant_path}__is_test": False})


class ParticipantQuerySet(models.QuerySet["Participant"]):
    def real(self) -> ParticipantQuerySet:
        """Participants who are data: everyone but researchers' preview participants."""
        return self.filter(is_test=False)


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def real(self) -> ConversationQuerySet:
        """Conversations that are data: collected from real participants, or imported."""
        return self.filter(not_test_data())


class Study(models.Model):
    """Settings a researcher controls for one data-collection study."""

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=200)
    information = models.TextField(help_text="Study information shown before consent.")
    crisis_resources = models.TextField(
        help_text=(
            "Where to get help if distressed; shown on the consent page and in the footer of every participant page."
        )
    )
    consent_version = models.CharField(max_length=40, default="1.0")
    open_enrolment = models.BooleanField(default=False, help_text="Allow joining without a personal study link.")
    min_turns = models.PositiveSmallIntegerField(default=3)
    max_turns = models.PositiveSmallIntegerField(default=12)
    binary_sample_size = models.PositiveSmallIntegerField(
        default=0, help_text="Behaviour questions asked per turn; 0 asks all 36."
    )
    link_valid_days = models.PositiveSmallIntegerField(
        default=90,
        help_text="Days a participant's study link works after it was issued; 0 = it never expires.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    max_participants = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Open enrolment closes once the study has this many participants (withdrawn ones included); "
        "blank for no cap. Invitations are not capped.",
    )
    live_call_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most live model calls this study may make (participants' replies, retries included, and "
        "improved-reply rewrites); blank for no limit. Checked before each call.",
    )
    live_calls_used = models.PositiveIntegerField(
        default=0, help_text="Live model calls made so far (counted when a call is started)."
    )

    # --- Study set-up in the researcher UI ---
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft (being set up; nobody can join)"
        OPEN = "open", "Open (taking participants)"
        CLOSED = "closed", "Closed (no new participants)"

    status = models.CharField(
        max_length=10,
        choices=Status.choices,
        default=Status.OPEN,
        help_text="draft: being set up, only previews; open: taking participants; closed: refuses new ones.",
    )
    topics: models.ManyToManyField[Any, Any] = models.ManyToManyField(
        "Topic",
        blank=True,
        related_name="studies",
        help_text="Topics participants may choose from; none chosen offers the whole catalogue.",
    )
    participant_groups = models.CharField(
        max_length=500,
        blank=True,
        help_text="Comma-separated participant groups (e.g. 'students, staff'); a join link may name one "
        "with ?group=NAME. Model assignment is balanced within each group.",
    )
    # --- Recruitment-platform entry and exit (Prolific's conventions by default) ---
    platform_participant_param = models.CharField(
        max_length=64,
        default="PROLIFIC_PID",
        help_text="Query parameter of the entry URL holding the platform's participant id.",
    )
    platform_study_param = models.CharField(
        max_length=64, default="STUDY_ID", help_text="Query parameter holding the platform's study id."
    )
    platform_session_param = models.CharField(
        max_length=64,
        default="SESSION_ID",
        help_text="Query parameter holding the platform's session id (checked to be present, never stored).",
    )
    platform_study_id = models.CharField(
        max_length=128,
        blank=True,
        help_text="The platform's id of this study; when set, entries naming another "
        "study id are refused. Never exported.",
    )
    platform_completion_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Where participants go back to the platform, e.g. "
        "https://app.prolific.com/submissions/complete; blank = this study takes no platform entries.",
    )
    platform_code_param = models.CharField(
        max_length=32, default="cc", help_text="Query parameter of the completion URL that carries the code."
    )
    platform_completion_code = models.CharField(
        max_length=64, blank=True, help_text="Code for participants who finished the study."
    )
    platform_withdrawal_code = models.CharField(
        max_length=64, blank=True, help_text="Return code for participants who withdrew."
    )
    platform_screenout_code = models.CharField(
        max_length=64, blank=True, help_text="Return code for participants screened out (e.g. did not consent)."
    )
    # --- Participant safety: who hears of a participant at risk, and what a participant who stops gets ---
    safety_contact_email = models.EmailField(
        blank=True,
        default="",
        db_default="",
        help_text="Who is emailed when a participant may be at risk (urgent always, concern when chosen below); "
        "blank: the flag on the research pages only.",
    )
    safety_notify_concern = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Email the safety contact at the concern level too (hopelessness, passive thoughts of death, "
        "being harmed), not only when a participant may be in danger.",
    )
    wellbeing_completion_code = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="The code a participant gets who stops for their wellbeing, so nobody loses pay for stopping; "
        "blank: they get their usual completion code.",
    )
    support_resources = models.JSONField(
        null=True,
        blank=True,
        help_text='Support resources by country, shown when a participant may be at risk: {"United Kingdom": '
        '"Samaritans, free on 116 123", ...}. The crisis resources above are always shown first.',
    )
    # --- Live-model spend ---
    live_spend_budget_usd = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text="Most US dollars this study's live model calls may cost (litellm's prices; calls to unpriced "
        "models are counted apart); blank for no limit. Checked before each call.",
    )
    # --- Quality control: attention checks and detector thresholds ---
    attention_checks = models.PositiveSmallIntegerField(
        default=2,
        help_text="Instructed-response attention checks per participant (0 for none), placed among the "
        "behaviour questions and in the closing survey; never scored as data.",
    )
    quality_min_page_seconds = models.PositiveSmallIntegerField(
        default=8, help_text="An annotation page answered faster than this many seconds is flagged as too fast."
    )
    quality_min_edit_ratio = models.FloatField(
        default=0.05,
        help_text="An ideal reply changed by less than this share of the original reply's characters is "
        "flagged as unedited (0.05 = 5%).",
    )
    quality_min_message_chars = models.PositiveSmallIntegerField(
        default=15, help_text="A chat message shorter than this many characters is flagged as very short."
    )
    quality_max_failed_checks = models.PositiveSmallIntegerField(
        default=0, help_text="Failed attention checks tolerated before the participant is flagged."
    )

    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(condition=Q(status__in=["draft", "open", "closed"]), name="study_status_valid"),
            models.CheckConstraint(condition=Q(min_turns__gte=1), name="study_min_turns_positive"),
            models.CheckConstraint(condition=Q(max_turns__gte=models.F("min_turns")), name="study_max_turns_ge_min"),
            models.CheckConstraint(condition=Q(binary_sample_size__lte=36), name="study_binary_sample_le_36"),
            models.CheckConstraint(
                condition=Q(live_spend_budget_usd__isnull=True) | Q(live_spend_budget_usd__gte=0),
                name="study_live_spend_budget_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(quality_min_edit_ratio__gte=0, quality_min_edit_ratio__lte=1),
                name="study_quality_edit_ratio_range",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_open(self) -> bool:
        """Whether participants may join or carry on now (mirrors ``Study.objects.open()``)."""
        return self.status == Study.Status.OPEN

    @property
    def group_names(self) -> list[str]:
        """The study's participant groups, in the order the researcher wrote them."""
        names = [name.strip() for name in self.participant_groups.split(",")]
        return list(dict.fromkeys(name for name in names if name))


class Participant(models.Model):
    """A pseudonymous participant. The study-link token is a secret; the pseudonym is what exports show.

    Only the token's hash is stored. The token itself exists in memory on the
    instance that issued it (``token``: a new participant, ``issue_link``) or
    that was reached through it (``study_flow.access_participant``), so the
    invitation prints it once and nobody can read it back later.
    """

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="participants", null=True, blank=True)
    pseudonym = models.CharField(max_length=64, unique=True, default=new_pseudonym)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    link_issued_at = models.DateTimeField(default=timezone.now, editable=False)
    link_revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    platform_id_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="Keyed hash of the recruitment-platform participant id (hash_platform_id); the id itself is "
        "never stored, and neither is ever exported.",
    )
    platform_session_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        default="",
        db_default="",
        help_text="Keyed hash of the platform session id at enrolment (hash_platform_session): a return from "
        "the platform resumes this participant only with the same session id, or in the browser that enrolled.",
    )
    screened_out_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When a platform participant left before taking part "
        "(e.g. did not consent); they get the screen-out return code.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    completion_code = models.CharField(max_length=16, default=new_completion_code)
    # Read with the participant row on every page, so the safety protocol costs a page no query of its own.
    safety_flagged = models.BooleanField(
        default=False,
        db_default=False,
        editable=False,
        help_text="The safety screen has flagged this participant at least once (see the study's safety log).",
    )
    safety_hold = models.BooleanField(
        default=False,
        db_default=False,
        editable=False,
        help_text="An urgent support panel waits for the participant's choice; the questions about that reply "
        "come after it.",
    )
    stopped_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When the participant chose to stop for their wellbeing after a safety message; their data is "
        "kept (unless they withdraw) and they get the study's wellbeing completion code.",
    )
    pending_pre_panas = models.JSONField(
        default=dict,
        blank=True,
        help_text="Pre-chat PANAS ratings, held here only until the topic is chosen and the conversation "
        "exists; then moved into that conversation's PanasSurvey and cleared.",
    )
    # --- Quality control: the researcher's current decision (log: QualityDecision) ---
    quality_excluded_at = models.DateTimeField(
        null=True, blank=True, help_text="Set while a researcher's current decision excludes this participant."
    )
    quality_exclusion_reason = models.CharField(max_length=40, blank=True)

    # --- Study set-up: preview participants and groups ---
    is_test = models.BooleanField(
        default=False,
        help_text="A researcher's preview participant: walks the real flow but never enters the data "
        "(exports, dataset versions, scores, statistics and monitoring leave it out).",
    )
    group = models.CharField(max_length=40, blank=True, help_text="Participant group within the study, if any.")

    objects = ParticipantQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["withdrawn_at"])]
        constraints = [
            # One participant per platform id per study: a returning id resumes, never enrols twice.
            models.UniqueConstraint(
                fields=["study", "platform_id_hash"],
                condition=~Q(platform_id_hash=""),
                name="participant_platform_id_once_per_study",
            )
        ]

    #: The study-link token, known only on an instance that issued or was reached by it; never stored.
    token: str = ""

    def __str__(self) -> str:
        return self.pseudonym

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.token_hash:
            self.issue_link()
        super().save(*args, **kwargs)

    def issue_link(self) -> str:
        """A new token for this participant (the old link stops working once saved); returns the token."""
        self.token = new_token()
        self.token_hash = hash_token(self.token)
        self.link_issued_at = timezone.now()
        self.link_revoked_at = None
        return self.token

    def link_usable(self, now: Any = None) -> bool:
        """False once revoked, or once the study's link lifetime has passed since it was issued."""
        if self.link_revoked_at is not None:
            return False
        days = self.study.link_valid_days if self.study is not None else 0
        return not days or (now or timezone.now()) < self.link_issued_at + timedelta(days=days)

    @property
    def is_withdrawn(self) -> bool:
        return self.withdrawn_at is not None

    @property
    def from_platform(self) -> bool:
        return bool(self.platform_id_hash)


class Consent(models.Model):
    participant = models.ForeignKey(Participant, on_delete=models.PROTECT, related_name="consents")
    version = models.CharField(max_length=40)
    consented_at = models.DateTimeField(default=timezone.now)
    sensitive_data_consent = models.BooleanField(
        default=False, help_text="Explicit consent to store self-reported mental-health information."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["participant", "version"], name="consent_once_per_version")]

    def __str__(self) -> str:
        return f"consent {self.version} by participant {self.participant_id}"


class ParticipantProfile(models.Model):
    participant = models.OneToOneField(Participant, on_delete=models.PROTECT, related_name="profile")
    age_band = models.CharField(max_length=40, blank=True)
    traits = models.JSONField(default=list, blank=True)
    goals = models.JSONField(default=list, blank=True)
    topic_attitude = models.CharField(max_length=120, blank=True)
    responses = models.JSONField(default=dict, blank=True)
    extra = models.JSONField(default=dict, blank=True, help_text="Further profile keys from imported files.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"profile of participant {self.participant_id}"


class SensitiveProfile(models.Model):
    """Self-reported diagnoses, kept apart from the rest of the profile and only with explicit consent."""

    participant = models.OneToOneField(Participant, on_delete=models.PROTECT, related_name="sensitive_profile")
    diagnoses = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"sensitive profile of participant {self.participant_id}"


class OriginalModel(models.Model):
    """A model participants chat with. Its real identity never reaches a participant's browser."""

    name = models.CharField(max_length=200, blank=True, help_text="Real identity (blank when imported redacted).")
    provider = models.CharField(max_length=100, blank=True)
    alias = models.CharField(max_length=32, unique=True, default=new_alias)
    litellm_model = models.CharField(
        max_length=200, blank=True, help_text="litellm model string; blank means the offline scripted model."
    )
    api_base = models.CharField(max_length=300, blank=True)
    active = models.BooleanField(default=True, help_text="In the pool that new conversations are assigned from.")
    # --- Live original models ---
    fallback_litellm_model = models.CharField(
        max_length=200, blank=True, help_text="litellm model that answers when this one's provider fails; blank = none."
    )
    fallback_api_base = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name"], condition=~Q(name=""), name="original_model_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.alias} ({self.name or 'redacted'})"

    @property
    def is_offline(self) -> bool:
        return not self.litellm_model

    @property
    def exported_identity(self) -> str:
        return self.name or self.alias


class Topic(models.Model):
    category = models.CharField(max_length=100)
    subtopic = models.CharField(max_length=200)
    order = models.PositiveIntegerField(default=0)
    in_catalogue = models.BooleanField(default=True)

    class Meta:
        ordering = ["order", "category", "subtopic"]
        constraints = [models.UniqueConstraint(fields=["category", "subtopic"], name="topic_unique")]

    def __str__(self) -> str:
        return f"{self.category}: {self.subtopic}"


class Conversation(models.Model):
    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", "In progress"
        ANNOTATING = "annotating", "Annotating"
        COMPLETE = "complete", "Complete"
        WITHDRAWN = "withdrawn", "Withdrawn"

    class Source(models.TextChoices):
        COLLECTED = "collected", "Collected in this app"
        IMPORTED = "imported", "Imported from canonical files"

    conversation_id = models.CharField(max_length=200, unique=True)
    participant = models.ForeignKey(
        Participant, on_delete=models.PROTECT, related_name="conversations", null=True, blank=True
    )
    original_model = models.ForeignKey(OriginalModel, on_delete=models.PROTECT, related_name="conversations")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="conversations")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.IN_PROGRESS)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.COLLECTED)
    provider = models.CharField(max_length=100, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    metadata_extra = models.JSONField(default=dict, blank=True, help_text="Further metadata keys, kept on round trip.")
    comment = models.TextField(blank=True, help_text="Participant's optional closing comment.")
    completeness = models.CharField(
        max_length=20,
        choices=_choices(cat.CONVERSATION_COMPLETENESS),
        default=cat.CONVERSATION_EMPTY,
        help_text="complete: finished by the participant with every turn complete (the default export); "
        "unfinished: started but not finished; empty: no turn with a reply. Withdrawal is the status, not this.",
    )

    objects = ConversationQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["started_at"]),
            models.Index(fields=["completeness"], name="conversation_completeness_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(completeness__in=list(cat.CONVERSATION_COMPLETENESS)),
                name="conversation_completeness_valid",
            ),
            # Never more complete than the collection: a complete conversation's participant has finished it.
            models.CheckConstraint(
                condition=~Q(completeness=cat.CONVERSATION_COMPLETE) | Q(status__in=["complete", "withdrawn"]),
                name="conversation_complete_only_when_finished",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["in_progress", "annotating", "complete", "withdrawn"]),
                name="conversation_status_valid",
            ),
            models.CheckConstraint(condition=Q(source__in=["collected", "imported"]), name="conversation_source_valid"),
        ]

    def __str__(self) -> str:
        return self.conversation_id


class Turn(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="turns")
    turn_number = models.PositiveIntegerField()
    user_message = models.TextField()
    llm_response = models.TextField(blank=True)
    selected_pairwise_questions = models.JSONField(default=list, blank=True)
    skipped_comparisons = models.JSONField(
        default=list,
        blank=True,
        help_text="Comparisons never asked because both replies had the same text: "
        '[{"questionId", "responseA", "responseB", "reason": "identical"}].',
    )
    created_at = models.DateTimeField(default=timezone.now)
    responded_at = models.DateTimeField(null=True, blank=True)
    annotation_started_at = models.DateTimeField(null=True, blank=True)
    annotation_completed_at = models.DateTimeField(null=True, blank=True)
    completeness = models.CharField(
        max_length=24,
        choices=_choices(cat.TURN_COMPLETENESS),
        default=cat.TURN_NO_REPLY,
        help_text="complete: every annotation step answered; annotation_unfinished: reply stored, annotation "
        "not finished; no_reply: the message has no stored reply.",
    )
    mood_answered = models.BooleanField(
        default=False,
        help_text="The mood step was answered (no tags then means 'no change'); until then it exports as null.",
    )
    identity_screen = models.CharField(
        max_length=12,
        choices=_choices(IDENTITY_SCREEN_OUTCOMES),
        default=IDENTITY_UNSCREENED,
        help_text="What the identity screen did to the reply before the participant saw it: clean, regenerated "
        "(a reply naming a model, provider or product was discarded and asked again), masked (names replaced), "
        "or unscreened (stored before screening existed, or imported).",
    )
    identity_leaks = models.JSONField(
        default=list, blank=True, help_text="Names the screen caught in discarded or masked replies (never shown)."
    )
    skipped_for_wellbeing = models.BooleanField(
        default=False,
        db_default=False,
        help_text="The participant chose, on the support panel under this message, to go on without the questions "
        "about this reply: the turn needs no annotation, and quality control does not count it.",
    )
    # --- Live original models ---
    answered_by = models.CharField(
        max_length=200,
        blank=True,
        help_text="litellm model whose reply was stored (the fallback's when the provider failed); blank for the "
        "offline scripted model or replies stored before this was recorded. Never shown to participants.",
    )

    class Meta:
        ordering = ["conversation_id", "turn_number"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "turn_number"], name="turn_number_unique_per_conversation"),
            models.CheckConstraint(condition=Q(turn_number__gte=1), name="turn_number_positive"),
            models.CheckConstraint(
                condition=Q(completeness__in=list(cat.TURN_COMPLETENESS)), name="turn_completeness_valid"
            ),
            # The state never claims more than the data holds: no reply means no_reply, and a turn
            # whose annotation was finished is complete.
            models.CheckConstraint(
                condition=~Q(llm_response="") | Q(completeness=cat.TURN_NO_REPLY), name="turn_without_reply_is_no_reply"
            ),
            models.CheckConstraint(
                condition=Q(annotation_completed_at__isnull=True) | Q(completeness=cat.TURN_COMPLETE),
                name="turn_annotated_is_complete",
            ),
            models.CheckConstraint(
                condition=~Q(completeness=cat.TURN_COMPLETE) | Q(mood_answered=True), name="turn_complete_has_mood"
            ),
            models.CheckConstraint(
                condition=Q(identity_screen__in=list(IDENTITY_SCREEN_OUTCOMES)), name="turn_identity_screen_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} turn {self.turn_number}"

    @property
    def awaits_annotation(self) -> bool:
        """Its reply is stored and its questions are neither finished nor skipped for the participant's
        wellbeing: the next message waits for them."""
        return bool(self.llm_response) and self.annotation_completed_at is None and not self.skipped_for_wellbeing


class PanasSurvey(models.Model):
    class Kind(models.TextChoices):
        PRE = "pre", "Before the chat"
        POST = "post", "After the chat"

    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="panas_surveys")
    kind = models.CharField(max_length=4, choices=Kind.choices)
    total_positive = models.PositiveSmallIntegerField(null=True, blank=True)
    total_negative = models.PositiveSmallIntegerField(null=True, blank=True)
    completed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "kind"], name="panas_once_per_kind"),
            models.CheckConstraint(condition=Q(kind__in=["pre", "post"]), name="panas_kind_valid"),
            models.CheckConstraint(
                condition=Q(total_positive__isnull=True)
                | Q(total_positive__gte=cat.PANAS_TOTAL_MIN, total_positive__lte=cat.PANAS_TOTAL_MAX),
                name="panas_total_positive_range",
            ),
            models.CheckConstraint(
                condition=Q(total_negative__isnull=True)
                | Q(total_negative__gte=cat.PANAS_TOTAL_MIN, total_negative__lte=cat.PANAS_TOTAL_MAX),
                name="panas_total_negative_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} PANAS of conversation {self.conversation_id}"


class PanasItemResponse(models.Model):
    survey = models.ForeignKey(PanasSurvey, on_delete=models.CASCADE, related_name="item_responses")
    item = models.CharField(max_length=20, choices=_choices(cat.PANAS_ITEMS))
    rating = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["survey", "item"], name="panas_item_once"),
            models.CheckConstraint(condition=Q(item__in=list(cat.PANAS_ITEMS)), name="panas_item_valid"),
            models.CheckConstraint(
                condition=Q(rating__gte=cat.PANAS_SCALE_MIN, rating__lte=cat.PANAS_SCALE_MAX), name="panas_rating_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.item}: {self.rating}"


class ConversationWideAnswers(models.Model):
    conversation = models.OneToOneField(Conversation, on_delete=models.PROTECT, related_name="wide_answers")
    looking_for = models.JSONField(default=list, blank=True)
    emotion_clarity = models.CharField(max_length=100, blank=True, choices=_choices(cat.Q2_OPTIONS))
    model_fit = models.CharField(max_length=100, blank=True, choices=_choices(cat.Q3_OPTIONS))
    what_felt_off = models.JSONField(default=list, blank=True)
    completed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(emotion_clarity="") | Q(emotion_clarity__in=list(cat.Q2_OPTIONS)),
                name="wide_q2_valid",
            ),
            models.CheckConstraint(
                condition=Q(model_fit="") | Q(model_fit__in=list(cat.Q3_OPTIONS)), name="wide_q3_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"post-chat answers of conversation {self.conversation_id}"


class FourBranchRating(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="four_branch_ratings")
    branch = models.CharField(max_length=20, choices=_choices(cat.FOUR_BRANCHES))
    rating = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "branch"], name="four_branch_once"),
            models.CheckConstraint(condition=Q(branch__in=list(cat.FOUR_BRANCHES)), name="four_branch_valid"),
            models.CheckConstraint(
                condition=Q(rating__gte=cat.FOUR_BRANCH_MIN, rating__lte=cat.FOUR_BRANCH_MAX),
                name="four_branch_rating_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.branch}: {self.rating}"


# ---------------------------------------------------------------------------
# Study set-up: the original-model pool and quotas of a study
# ---------------------------------------------------------------------------


class StudyModel(models.Model):
    """One original model in a study's pool, with its assignment weight.

    A study with a pool assigns new conversations only among these models, in
    proportion to their weights (``collection.assignment``); a study without one
    uses every active original model equally, as before.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="model_pool")
    original_model = models.ForeignKey(OriginalModel, on_delete=models.PROTECT, related_name="study_pools")
    weight = models.PositiveSmallIntegerField(
        default=1, help_text="Relative share of new conversations (2 gets twice the conversations of 1)."
    )

    class Meta:
        ordering = ["study_id", "original_model__alias"]
        constraints = [
            models.UniqueConstraint(fields=["study", "original_model"], name="study_model_once"),
            models.CheckConstraint(condition=Q(weight__gte=1), name="study_model_weight_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.original_model.alias} x{self.weight} in {self.study_id}"


class StudyQuota(models.Model):
    """A cap on a study's data: conversations on one topic, or participants in one group.

    Withdrawn and preview data do not count. A full topic is no longer offered;
    a full group refuses new participants with a calm page.
    """

    class Kind(models.TextChoices):
        TOPIC = "topic", "Conversations on a topic"
        GROUP = "group", "Participants in a group"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="quotas")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, null=True, blank=True, related_name="quotas")
    group = models.CharField(max_length=40, blank=True)
    cap = models.PositiveIntegerField(help_text="Most conversations (topic) or participants (group).")

    class Meta:
        ordering = ["study_id", "kind", "topic_id", "group"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["topic", "group"]), name="study_quota_kind_valid"),
            models.CheckConstraint(condition=Q(cap__gte=1), name="study_quota_cap_positive"),
            models.CheckConstraint(
                condition=(Q(kind="topic", topic__isnull=False, group=""))
                | (Q(kind="group", topic__isnull=True) & ~Q(group="")),
                name="study_quota_target_matches_kind",
            ),
            models.UniqueConstraint(
                fields=["study", "topic"], condition=Q(kind="topic"), name="study_quota_topic_once"
            ),
            models.UniqueConstraint(
                fields=["study", "group"], condition=Q(kind="group"), name="study_quota_group_once"
            ),
        ]

    def __str__(self) -> str:
        target = str(self.topic) if self.kind == self.Kind.TOPIC else f"group {self.group}"
        return f"{target}: at most {self.cap}"


class LiveCall(models.Model):
    """One call to a live original model, for the study's dollar spend (collection.live_spend).

    ``cost_usd`` is litellm's price of the call; null when litellm has no price
    for the model (counted apart as unpriced). Failed calls are kept with no cost.
    """

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="live_calls")
    turn = models.ForeignKey(Turn, on_delete=models.SET_NULL, null=True, blank=True, related_name="live_calls")
    litellm_model = models.CharField(max_length=200)
    succeeded = models.BooleanField(default=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["study", "created_at"])]
        constraints = [
            models.CheckConstraint(condition=Q(cost_usd__isnull=True) | Q(cost_usd__gte=0), name="live_call_cost_ok")
        ]

    def __str__(self) -> str:
        return f"live call of study {self.study_id} ({self.litellm_model})"


# ---------------------------------------------------------------------------
# Quality control
# ---------------------------------------------------------------------------


class AttentionCheck(models.Model):
    """One instructed-response item ("For this question, choose 'X'") and what was answered.

    Kept apart from every answer table so it can never be scored or exported as data.
    """

    class Place(models.TextChoices):
        ANSWERS = "answers", "behaviour questions"
        SURVEY = "survey", "closing survey"

    participant = models.ForeignKey(Participant, on_delete=models.PROTECT, related_name="attention_checks")
    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="attention_checks", null=True, blank=True)
    place = models.CharField(max_length=10, choices=Place.choices)
    instructed = models.CharField(max_length=40)
    given = models.CharField(max_length=40, blank=True)
    passed = models.BooleanField(default=False)
    answered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["participant_id", "answered_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(passed=True, given=models.F("instructed"))
                | (Q(passed=False) & ~Q(given=models.F("instructed"))),
                name="attention_check_passed_iff_instructed",
            ),
            models.CheckConstraint(
                condition=Q(place="survey", turn__isnull=True) | Q(place="answers", turn__isnull=False),
                name="attention_check_place_matches_turn",
            ),
            models.UniqueConstraint(fields=["turn"], name="attention_check_once_per_turn"),
            models.UniqueConstraint(
                fields=["participant"], condition=Q(place="survey"), name="attention_check_one_survey_check"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.place}: asked {self.instructed!r}, got {self.given or '-'!r}"


class QualityDecision(models.Model):
    """One researcher decision about a participant's data (append-only log; the latest one is current)."""

    class Decision(models.TextChoices):
        INCLUDE = "include", "include"
        EXCLUDE = "exclude", "exclude"

    participant = models.ForeignKey(Participant, on_delete=models.PROTECT, related_name="quality_decisions")
    decision = models.CharField(max_length=10, choices=Decision.choices)
    reason = models.CharField(max_length=40, blank=True)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        "auth.User", on_delete=models.PROTECT, related_name="quality_decisions", null=True, blank=True
    )
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["participant_id", "decided_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(decision__in=["include", "exclude"]), name="quality_decision_valid"),
            models.CheckConstraint(
                condition=Q(decision="include") | ~Q(reason=""), name="quality_exclusion_has_reason"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.participant_id} ({self.reason or '-'})"


class SafetyEvent(models.Model):
    """One time the platform saw that a participant may be at risk: the signal, what it showed, their choice.

    The study's safety log (research pages, API, export for the ethics report). It keeps which rules fired,
    never the participant's words: those stay in the turn. A flagged conversation is never excluded for it.
    """

    class Level(models.TextChoices):
        CONCERN = "concern", "concern"
        URGENT = "urgent", "urgent"

    class Source(models.TextChoices):
        MESSAGE = "message", "chat message"
        FREE_TEXT = "free_text", "free-text answer"
        ANNOTATION = "annotation", "their own annotation (mood tag, wish for safety help)"

    class Shown(models.TextChoices):
        PANEL = "panel", "support panel with the choices to pause, stop or continue"
        RESOURCES = "resources", "support resources under the message"

    class Choice(models.TextChoices):
        PAUSE = "pause", "pause"
        STOP = "stop", "stop"
        CONTINUE = "continue", "continue"
        SKIP = "skip", "continue, skipping the questions about that reply"

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="safety_events", null=True, blank=True)
    participant = models.ForeignKey(Participant, on_delete=models.PROTECT, related_name="safety_events")
    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="safety_events", null=True, blank=True)
    level = models.CharField(max_length=10, choices=Level.choices)
    source = models.CharField(max_length=12, choices=Source.choices)
    signals = models.JSONField(default=list, help_text='The screen\'s rule ids that fired, e.g. ["plan", "means"].')
    shown = models.CharField(max_length=12, choices=Shown.choices)
    choice = models.CharField(max_length=10, choices=Choice.choices, blank=True)
    chosen_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True, help_text="When the safety contact was emailed.")
    notify_error = models.CharField(max_length=300, blank=True, help_text="Why the email could not be sent.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["study", "-created_at"])]
        constraints = [
            models.CheckConstraint(condition=Q(level__in=["concern", "urgent"]), name="safety_event_level_valid"),
            models.CheckConstraint(
                condition=Q(choice="") | Q(choice__in=["pause", "stop", "continue", "skip"]),
                name="safety_event_choice_valid",
            ),
            models.CheckConstraint(condition=Q(choice="") | Q(chosen_at__isnull=False), name="safety_choice_has_time"),
        ]

    def __str__(self) -> str:
        return f"{self.level} {self.source} ({', '.join(self.signals)})"


class PendingTask(models.Model):
    """A task the broker could not take when it was queued, kept until a worker's sweeper sends it.

    Written only while Redis (the broker) is unreachable (``collection.task_queue``), so work a participant's
    action needs (the safety contact's email, a suggested rewrite, a re-score after a withdrawal) is never
    lost. Holds a task name and row ids, nothing a participant wrote.
    """

    task = models.CharField(max_length=200, help_text="The Celery task's name, e.g. collection.notify_safety_contact.")
    args = models.JSONField(default=list, help_text="The task's positional arguments (row ids).")
    kept_at = models.DateTimeField(default=timezone.now)
    error = models.CharField(max_length=300, blank=True, help_text="Why the broker could not take it.")

    class Meta:
        ordering = ["kept_at", "id"]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)}"
