"""Evaluation side: the evaluated-model registry, runs, per-conversation outputs, scores and the call cache.

Runs and their outputs are derived data and may be deleted with their run;
collected conversations are protected (PROTECT) from anything here.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Final

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from attunebench import catalogue as cat
from attunebench.names import name_problem
from attunebench.replay import cache as replay_cache
from collection.models import Conversation
from datasets.models import DatasetVersion
from scoring.provider_access import registry_problem


class EvaluatedModel(models.Model):
    """A model (or offline baseline, or human rater) that can take the EM's seat."""

    class Kind(models.TextChoices):
        OFFLINE = "offline", "Offline baseline"
        LLM = "llm", "LLM through litellm"
        HUMAN = "human", "Human rater"

    name = models.CharField(
        max_length=200, unique=True, help_text="e.g. baseline:lexicon, openai/gpt-4o-mini, human:alex"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.LLM)
    litellm_model = models.CharField(max_length=200, blank=True)
    api_base = models.CharField(max_length=300, blank=True)
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="temperature, max_tokens, seed, ...; never a key: api_key_env names a provider key variable "
        "(ATTUNE_PROVIDER_KEY_ENV) read at call time.",
    )
    max_concurrency = models.PositiveIntegerField(
        default=8,
        help_text="Requests in flight at once to this model's provider (litellm prefix and API base), "
        "summed over all workers when Redis is configured. Models at one provider share one cap, "
        "so give them the same value: an EM with its judge there gets the lower one, and when runs "
        "of different models overlap, the conversation started last sets it. A change applies to "
        "conversations replayed after it; no worker restart is needed.",
    )
    requests_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Requests per minute to this model's provider, shared like the in-flight cap. Empty: no limit.",
    )
    input_cost_per_million = models.FloatField(null=True, blank=True, help_text="Overrides litellm's price list.")
    output_cost_per_million = models.FloatField(null=True, blank=True)
    active = models.BooleanField(default=True)
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=["offline", "llm", "human"]), name="em_kind_valid"),
            models.CheckConstraint(condition=Q(max_concurrency__gte=1), name="em_concurrency_positive"),
            # Keys live in the environment only (scoring.provider_access checks every other name).
            models.CheckConstraint(condition=~Q(params__has_key="api_key"), name="em_params_hold_no_key"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Refuse a name that displays as another, a stored key, a key variable off the allow-list and an
        api_base on an unlisted host."""
        super().clean()
        errors = registry_problem(self.api_base, self.params) or {}
        if problem := name_problem(self.name or ""):
            errors = {**errors, "name": problem}
        if errors:
            raise ValidationError(errors)


class EvaluationRun(models.Model):
    """One (EM, mode, PANAS strategy, judge, dataset selection) replay and its progress."""

    class Origin(models.TextChoices):
        LAUNCHER = "launcher", "Run launcher"
        API = "api", "REST API"
        CLI = "cli", "attune eval"
        UNRECORDED = "", "Not recorded"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SCORING = "scoring", "Scoring"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    evaluated_model = models.ForeignKey(EvaluatedModel, on_delete=models.PROTECT, related_name="runs")
    judge_model = models.ForeignKey(
        EvaluatedModel, on_delete=models.PROTECT, related_name="judged_runs", null=True, blank=True
    )
    mode = models.CharField(max_length=24, choices=[(m, m) for m in cat.MODES], default="default")
    panas_strategy = models.CharField(max_length=16, choices=[(s, s) for s in cat.PANAS_STRATEGIES], default="absolute")
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, null=True, blank=True)
    selection = models.JSONField(default=dict, blank=True, help_text="Filter used when no dataset version is given.")
    prompt_version = models.CharField(max_length=40, blank=True)
    fresh_calls = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Ask the models again instead of reusing answers other runs paid for (a model updated behind "
        "its name); the run's own answers are still reused when it resumes.",
    )
    repeat = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Which repeat of this configuration (0 the first): each repeat gets answers of its own, cached "
        "under its number, so sampling variance can be measured across repeats.",
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    conversations_total = models.PositiveIntegerField(default=0)
    conversations_done = models.PositiveIntegerField(default=0)
    conversations_failed = models.PositiveIntegerField(default=0)
    calls_made = models.PositiveIntegerField(default=0, help_text="Requests sent to the models: what they saw.")
    calls_cached = models.PositiveIntegerField(
        default=0, help_text="Answers reused from the cache that this run did not pay for."
    )
    calls_recovered = models.PositiveIntegerField(
        default=0,
        help_text="Answers this run paid for in an interrupted attempt (a worker died), reused from the cache; "
        "their requests and cost are counted in calls_made and cost_usd.",
    )
    calls_reused = models.PositiveIntegerField(
        default=0,
        help_text="Answers this run paid for in an earlier, already counted attempt of the same conversation "
        "(a failed conversation resumed), reused from the cache: not paid again, not another run's cache.",
    )
    calls_failed = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0, help_text="What this run paid the providers (USD).")
    cost_reused_usd = models.FloatField(
        default=0.0,
        db_default=0.0,
        help_text="What the answers it reused from other runs' cache cost when they were paid (USD): with "
        "cost_usd, the cost of every call the model's results rest on, whichever run paid it.",
    )
    gaps = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Conversations left with failed or defaulted turns when the run was last scored (a failed call, "
        "a missing turn or post-conversation answer, no output at all): a done run with gaps is 'done with gaps', "
        "and 'Retry failed turns' replays only those.",
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    origin = models.CharField(
        max_length=10,
        choices=Origin.choices,
        blank=True,
        default="",
        db_default="",
        help_text="Where the run was started; empty for runs made before this was recorded.",
    )
    provenance = models.JSONField(
        null=True,
        blank=True,
        help_text="Who started it and how: user, code version, host and the settings it ran with "
        "(scoring.run_provenance); never a key.",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(origin__in=["", "launcher", "api", "cli"]), name="run_origin_valid"),
            models.CheckConstraint(condition=Q(mode__in=list(cat.MODES)), name="run_mode_valid"),
            models.CheckConstraint(
                condition=Q(panas_strategy__in=list(cat.PANAS_STRATEGIES)), name="run_panas_strategy_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "scoring", "done", "failed", "cancelled"]),
                name="run_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(conversations_done__lte=models.F("conversations_total")), name="run_done_le_total"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}: {self.evaluated_model} / {self.mode}"

    @property
    def cost_total_usd(self) -> float:
        """What every call the run's results rest on cost: paid in this run plus reused from the cache
        (independent of which run, of several sharing answers, happened to pay first)."""
        return self.cost_usd + self.cost_reused_usd

    @property
    def status_label(self) -> str:
        """The status as shown: a done run that left conversations with failed or defaulted turns is 'done with
        gaps', so its numbers are not read as the model's full result."""
        if self.status == self.Status.DONE and self.gaps:
            return "Done with gaps"
        return str(self.get_status_display())

    @property
    def progress_percent(self) -> int:
        if not self.conversations_total:
            return 100 if self.status == self.Status.DONE else 0
        finished = self.conversations_done + self.conversations_failed
        return min(100, round(100 * finished / self.conversations_total))


#: A human rater's conversation in progress holds this lease: it never lapses, so no sweeper requeues it
#: (a person rates at their own pace) and it never shows as stalled; it is cleared when the rating is stored.
HUMAN_LEASE_OWNER = "human-rater"
HUMAN_LEASE_EXPIRES = datetime(9999, 1, 1, tzinfo=UTC)


#: The ``paid_key`` of run-conversations created before it existed (migration 0010): their attempts keep
#: the tags they were paid under.
LEGACY_PAID_KEY: Final = uuid.UUID(int=0)


class RunConversation(models.Model):
    """The EM's canonical output (SPEC 3.2) for one conversation of a run."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="conversation_outputs")
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="run_outputs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    output = models.JSONField(null=True, blank=True)
    calls_made = models.PositiveIntegerField(default=0)
    calls_cached = models.PositiveIntegerField(default=0)
    calls_recovered = models.PositiveIntegerField(default=0)
    calls_reused = models.PositiveIntegerField(default=0)
    calls_failed = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    cost_reused_usd = models.FloatField(default=0.0, db_default=0.0)
    error = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Paid requests, counted before each goes out: an attempt killed mid-way still counts
    # what it sent. ``paid_sent_counted`` is how many of them the run's totals already hold, and
    # ``counted_attempt`` the last attempt whose accounting was stored.
    paid_sent = models.PositiveIntegerField(default=0)
    paid_sent_counted = models.PositiveIntegerField(default=0)
    counted_attempt = models.PositiveIntegerField(default=0)
    # The lease of the worker replaying it: only the holder may store the output, and a
    # conversation is claimed again only once its lease has lapsed, so it is never replayed twice at once.
    lease_owner = models.CharField(
        max_length=200, blank=True, help_text="The worker (host:pid:token) replaying it while it runs."
    )
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Renewed while the worker lives; past it, the conversation is stalled."
    )
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="When its worker last renewed the lease.")
    attempts = models.PositiveIntegerField(default=0, help_text="Times a worker has claimed it.")
    # Names its attempts in the call cache and the call journal (``replay_service.paid_tag``). Both live in
    # Redis, which outlives a database: ids restart in a recreated one, this key does not repeat. Rows
    # from before it hold ``LEGACY_PAID_KEY``.
    paid_key = models.UUIDField(default=uuid.uuid4, editable=False)
    requeued = models.PositiveIntegerField(default=0, help_text="Times it was requeued after its lease lapsed.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "conversation"], name="run_conversation_unique"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "running", "done", "failed"]), name="run_conversation_status_valid"
            ),
            # Running <=> held under a lease by exactly one worker.
            models.CheckConstraint(
                condition=(Q(status="running") & Q(lease_expires_at__isnull=False) & ~Q(lease_owner=""))
                | (~Q(status="running") & Q(lease_expires_at__isnull=True) & Q(lease_owner="")),
                name="run_conversation_running_iff_leased",
            ),
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="run_conversation_lease_idx")]

    def __str__(self) -> str:
        return f"run {self.run_id} / conversation {self.conversation_id} ({self.status})"


class ConversationScore(models.Model):
    """Per-conversation metrics of one run (the scorer's conversation row)."""

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="conversation_scores")
    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="scores")
    composite_score = models.FloatField()
    coverage = models.FloatField(help_text="Share of ground-truth turns the model answered (0-1).")
    post_coverage = models.FloatField(
        null=True,
        blank=True,
        help_text="1 if the model gave a usable post-conversation prediction, else 0; its holistic score then "
        "rests on defaults. Empty for scores stored before this was recorded: re-score the run to fill it.",
    )
    metrics = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "conversation"], name="conversation_score_unique"),
            models.CheckConstraint(
                condition=Q(coverage__gte=0, coverage__lte=1), name="conversation_score_coverage_range"
            ),
            models.CheckConstraint(
                condition=Q(post_coverage__isnull=True) | Q(post_coverage__gte=0, post_coverage__lte=1),
                name="conversation_score_post_coverage_range",
            ),
        ]

    def __str__(self) -> str:
        return f"score of run {self.run_id} / conversation {self.conversation_id}"


class RunScore(models.Model):
    """The aggregate row of a run (SPEC 5.4)."""

    run = models.OneToOneField(EvaluationRun, on_delete=models.CASCADE, related_name="score")
    composite_score = models.FloatField(null=True)
    metrics = models.JSONField()
    scored_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"score of run {self.run_id}"


class ModelCallCache(models.Model):
    """A finished model call, so that re-runs and resumed workers never pay twice."""

    key = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=40, blank=True)
    response = models.TextField()
    usage = models.JSONField(default=dict, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    paid_by = models.CharField(
        max_length=100, blank=True, help_text="The run conversation attempt that paid for it (rc<id>.a<attempt>)."
    )
    requests = models.PositiveIntegerField(default=1, help_text="Requests it took, parse retries included.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["model"])]

    def __str__(self) -> str:
        return f"{self.model} call {self.key[:12]}"

    # The key formula is the replay core's, so rows written here and the pure caches agree.
    make_key = staticmethod(replay_cache.make_key)


class CallTranscript(models.Model):
    """One model call of a run-conversation: the prompt sent, the raw reply, the parsed answer and its cost.

    One row per request sent (a re-ask after an unusable reply is its own row)
    and per answer reused from the call cache; written when the conversation's
    output is stored and replaced when it is replayed again, so a run holds at
    most one replay's calls per conversation. Texts are capped by the replay
    core (``attunebench.replay.transcript.MAX_TEXT_CHARS``).
    """

    run_conversation = models.ForeignKey(RunConversation, on_delete=models.CASCADE, related_name="calls")
    sequence = models.PositiveIntegerField(help_text="Order in which the conversation's calls started.")
    call_type = models.CharField(max_length=20)
    turn_number = models.PositiveIntegerField(null=True, blank=True)
    role = models.CharField(max_length=10, help_text="em or judge")
    model = models.CharField(max_length=200)
    attempt = models.PositiveSmallIntegerField(default=1, help_text="2.. are re-asks after an unusable reply.")
    messages = models.JSONField(default=list, help_text="The exact messages sent: [{role, content}, ...].")
    raw_reply = models.TextField(null=True, blank=True)
    parsed = models.JSONField(null=True, blank=True)
    parse_error = models.TextField(blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    latency_s = models.FloatField(null=True, blank=True)
    transport_attempts = models.PositiveSmallIntegerField(default=0)
    cached = models.BooleanField(default=False)

    class Meta:
        ordering = ["run_conversation", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["run_conversation", "sequence"], name="call_transcript_sequence_unique"),
            models.CheckConstraint(condition=Q(role__in=["em", "judge"]), name="call_transcript_role_valid"),
        ]

    def __str__(self) -> str:
        return f"call {self.sequence} ({self.call_type}) of {self.run_conversation_id}"
