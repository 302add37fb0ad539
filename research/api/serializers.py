"""DRF serializers of the research API: request bodies, database rows and the view-built bodies around them.

Responses that are pydantic result models are not here: the schema is built from the models themselves
(research.api.responses, research.api.schema), never from a serializer that copies their fields.
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import NotFound

from attunebench import catalogue as cat
from attunebench.names import NAME_PATTERN, NAME_RULE
from attunebench.replay.llm import scrub_params
from collection.models import Conversation
from datasets.exchange import EXPORT_FORMATS
from datasets.models import DatasetVersion, ExportJob
from datasets.pseudonyms import export_pseudonym
from research.access.api_tokens import DEFAULT_EXPIRY_DAYS, EXPIRY_DAYS
from research.models import ResultSnapshot
from research.runs.launcher import MAX_REPEAT
from scoring.models import ConversationScore, EvaluatedModel, EvaluationRun, RunConversation

# Names: no control characters (C0, DEL, C1) and at least one visible character. Free text (descriptions) may
# also hold tabs and line breaks. The schema states exactly these patterns, so clients see what is accepted.
TEXT_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
NAME_INVALID = NAME_RULE
TEXT_INVALID = "must not contain control characters (tabs and line breaks are fine)."


class ConversationSummarySerializer(serializers.ModelSerializer):
    category = serializers.CharField(source="topic.category")
    subtopic = serializers.CharField(source="topic.subtopic")
    original_model_alias = serializers.CharField(source="original_model.alias")
    original_model = serializers.SerializerMethodField(
        help_text="The real name with include_model_identity=true, else the alias (the default)."
    )
    participant = serializers.SerializerMethodField(help_text="The participant's pseudonym, as exports write it.")
    turn_count = serializers.IntegerField(source="n_turns")
    quality_excluded = serializers.SerializerMethodField(
        help_text="True when a researcher has excluded the participant for quality: listed only with "
        "include_excluded=true, and left out of exports, dataset versions and scores."
    )

    def get_quality_excluded(self, conversation: Conversation) -> bool:
        participant = conversation.participant
        return participant is not None and participant.quality_excluded_at is not None

    def get_original_model(self, conversation: Conversation) -> str:
        om = conversation.original_model
        return om.exported_identity if self.context.get("include_model_identity") else om.alias

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_participant(self, conversation: Conversation) -> str | None:
        participant = conversation.participant
        return export_pseudonym(participant.pseudonym) if participant is not None else None

    class Meta:
        model = Conversation
        fields = [
            "conversation_id",
            "status",
            "source",
            "category",
            "subtopic",
            "original_model_alias",
            "original_model",
            "participant",
            "turn_count",
            "quality_excluded",
            "completeness",
            "started_at",
            "completed_at",
        ]


class CanonicalConversationSerializer(serializers.Serializer):
    """The SPEC 3.1 conversation file, exactly as exports write it."""

    conversationId = serializers.CharField()
    metadata = serializers.DictField()
    participant_profile = serializers.DictField(allow_null=True)
    prePanas = serializers.DictField(allow_null=True)
    postPanas = serializers.DictField(allow_null=True)
    conversationWideQuestions = serializers.DictField(allow_null=True)
    turns = serializers.ListField(child=serializers.DictField())


class EvaluatedModelSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvaluatedModel
        fields = [
            "id",
            "name",
            "kind",
            "litellm_model",
            "api_base",
            "params",
            "max_concurrency",
            "requests_per_minute",
            "input_cost_per_million",
            "output_cost_per_million",
            "active",
            "notes",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]

    def to_representation(self, instance: EvaluatedModel) -> dict[str, Any]:
        """Never shows a stored secret, even one saved before the registry refused them."""
        data = super().to_representation(instance)
        data["params"] = scrub_params(data.get("params") or {})
        return data


class DatasetVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.get_username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = DatasetVersion
        fields = [
            "id",
            "name",
            "description",
            "content_hash",
            "content_hash_with_model_identity",
            "conversation_count",
            "frozen",
            "includes_unfinished",
            "created_at",
            "created_by",
        ]
        read_only_fields = fields


class DatasetVersionCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=200,
        error_messages={"invalid": NAME_INVALID},
        help_text="Unique; a visible character and no control or invisible formatting characters.",
    )
    description = serializers.RegexField(
        TEXT_PATTERN, required=False, allow_blank=True, default="", error_messages={"invalid": TEXT_INVALID}
    )
    topic_categories = serializers.ListField(
        child=serializers.ChoiceField(choices=list(cat.TOPIC_CATEGORIES)), required=False, default=list
    )
    include_unfinished = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also freeze unfinished and empty conversations (flagged in their records); default: complete only.",
    )


class ExportJobSerializer(serializers.ModelSerializer):
    dataset_version: serializers.PrimaryKeyRelatedField[DatasetVersion] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )
    progress_percent = serializers.IntegerField(read_only=True)
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = ExportJob
        fields = [
            "id",
            "dataset_version",
            "fmt",
            "include_model_identity",
            "status",
            "progress_done",
            "progress_total",
            "progress_percent",
            "file_size",
            "file_sha256",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "withdrawn_at",
            "replaced_by",
            "download_url",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_download_url(self, job: ExportJob) -> str | None:
        if job.status != ExportJob.Status.DONE:
            return None
        path = reverse("api:export-download", args=[job.pk])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path


class ExportRequestSerializer(serializers.Serializer):
    fmt = serializers.ChoiceField(choices=list(EXPORT_FORMATS))
    include_model_identity = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Write original models' real names; by default (as in the UI and `attune export`) their aliases.",
    )


class RunSerializer(serializers.ModelSerializer):
    evaluated_model: serializers.SlugRelatedField[EvaluatedModel] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    judge_model: serializers.SlugRelatedField[EvaluatedModel] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    progress_percent = serializers.IntegerField(read_only=True)
    status_label = serializers.CharField(
        read_only=True, help_text="The status as shown: 'Done with gaps' for a done run with gaps."
    )
    composite_score = serializers.SerializerMethodField()
    coverage = serializers.SerializerMethodField(help_text="Mean share of turns the model answered.")
    post_coverage = serializers.SerializerMethodField(
        help_text="Share of conversations with a usable post-conversation prediction; null if not scored or "
        "scored before this was recorded."
    )
    cost_total_usd = serializers.FloatField(
        read_only=True,
        help_text="What every call the run's results rest on cost, judge calls included: cost_usd (paid in this "
        "run) plus cost_reused_usd (answers reused from other runs' cache, at what they cost when paid).",
    )

    class Meta:
        model = EvaluationRun
        fields = [
            "id",
            "evaluated_model",
            "judge_model",
            "mode",
            "panas_strategy",
            "dataset_version",
            "selection",
            "prompt_version",
            "fresh_calls",
            "repeat",
            "status",
            "status_label",
            "gaps",
            "conversations_total",
            "conversations_done",
            "conversations_failed",
            "calls_made",
            "calls_cached",
            "calls_recovered",
            "calls_reused",
            "calls_failed",
            "cost_usd",
            "cost_reused_usd",
            "cost_total_usd",
            "progress_percent",
            "composite_score",
            "coverage",
            "post_coverage",
            "error",
            "origin",
            "provenance",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_composite_score(self, run: EvaluationRun) -> float | None:
        score = getattr(run, "score", None)
        return score.composite_score if score is not None else None

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_coverage(self, run: EvaluationRun) -> float | None:
        score = getattr(run, "score", None)
        return (score.metrics or {}).get("coverage") if score is not None else None

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_post_coverage(self, run: EvaluationRun) -> float | None:
        score = getattr(run, "score", None)
        return (score.metrics or {}).get("post_coverage") if score is not None else None


class RunConversationStateSerializer(serializers.ModelSerializer):
    """Where one conversation of a run stands: its lease, attempts and, when it failed, why."""

    conversation_id = serializers.CharField(source="conversation.conversation_id", read_only=True)
    stalled = serializers.BooleanField(
        source="is_stalled",
        read_only=True,
        help_text="Running, but its worker stopped renewing the lease (it died or hangs): requeue it.",
    )
    cost_usd = serializers.FloatField(
        read_only=True,
        help_text="What this run paid the provider for this conversation, over all its attempts; these add up "
        "to the run's cost_usd (answers reused from another run's cache are free here, unlike the output's "
        "api_cost, which prices every answer it holds).",
    )

    class Meta:
        model = RunConversation
        fields = [
            "conversation_id",
            "status",
            "stalled",
            "attempts",
            "requeued",
            "lease_owner",
            "lease_expires_at",
            "heartbeat_at",
            "calls_made",
            "calls_cached",
            "calls_recovered",
            "calls_reused",
            "calls_failed",
            "cost_usd",
            "error",
        ]
        read_only_fields = fields


class RequeueSerializer(serializers.Serializer):
    requeued = serializers.ListField(
        child=serializers.CharField(), help_text="Conversation ids sent to the queue again."
    )
    run = RunSerializer()


@extend_schema_field({"type": "array", "items": {"$ref": "#/components/schemas/ModeEnum"}, "minItems": 1})
class ModesField(serializers.ListField):
    """Replay modes; the schema points at the run's own ModeEnum so modes have one name in the schema."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.ChoiceField(choices=list(cat.MODES)), min_length=1, **kwargs)


class RunCreateSerializer(serializers.Serializer):
    models = serializers.ListField(
        child=serializers.RegexField(NAME_PATTERN, trim_whitespace=False, error_messages={"invalid": NAME_INVALID}),
        min_length=1,
        help_text="Evaluated-model names.",
    )
    modes = ModesField()
    panas_strategy = serializers.ChoiceField(choices=list(cat.PANAS_STRATEGIES), default="absolute")
    judge = serializers.RegexField(
        NAME_PATTERN,
        trim_whitespace=False,
        required=False,
        allow_null=True,
        default=None,
        error_messages={"invalid": NAME_INVALID},
    )
    dataset_version = serializers.IntegerField(required=False, allow_null=True, default=None)
    topic_categories = serializers.ListField(
        child=serializers.ChoiceField(choices=list(cat.TOPIC_CATEGORIES)), required=False, default=list
    )
    fresh_calls = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Ask the models again instead of reusing answers other runs paid for (a model updated behind "
        "its name); the new answers are cached, and a resumed run reuses its own.",
    )
    repeat = serializers.IntegerField(
        required=False,
        default=0,
        min_value=0,
        max_value=MAX_REPEAT,
        help_text="Which repeat of this configuration (0 the first): each repeat gets answers of its own, cached "
        "under its number, to measure sampling variance; launching the same number again reuses them.",
    )
    dry_run = serializers.BooleanField(
        required=False, default=False, help_text="Only estimate calls and cost; nothing is started."
    )
    preflight = serializers.BooleanField(
        required=False,
        default=True,
        help_text="Before starting, make one real call to each model and the judge; a model that cannot answer "
        "(connection, key, model name, answer format) fails the launch with 409 and says what and where.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        names = list(dict.fromkeys(attrs["models"]))
        found = {m.name: m for m in EvaluatedModel.objects.filter(name__in=names, active=True)}
        missing = [n for n in names if n not in found]
        if missing:
            raise NotFound(f"unknown or inactive evaluated models: {', '.join(missing)}")
        attrs["models"] = [found[n] for n in names]
        attrs["modes"] = list(dict.fromkeys(attrs["modes"]))
        if attrs.get("judge"):
            judge = EvaluatedModel.objects.filter(name=attrs["judge"], active=True).first()
            if judge is None:
                raise NotFound(f"unknown or inactive judge model: {attrs['judge']}")
            attrs["judge"] = judge
        if attrs.get("dataset_version") is not None:
            version = DatasetVersion.objects.filter(pk=attrs["dataset_version"], frozen=True).first()
            if version is None:
                raise NotFound(f"no frozen dataset version with id {attrs['dataset_version']}")
            attrs["dataset_version"] = version
        return attrs


class RunLaunchSerializer(serializers.Serializer):
    """What launching returns: the runs created, one per (model, mode), in the order asked."""

    runs = RunSerializer(many=True)


class EstimateSerializer(serializers.Serializer):
    conversations = serializers.IntegerField()
    turns = serializers.IntegerField()
    runs = serializers.IntegerField()
    calls = serializers.IntegerField()
    cost_usd = serializers.FloatField()
    per_run = serializers.ListField(child=serializers.DictField())
    notes = serializers.ListField(child=serializers.CharField())


class ConversationScoreSerializer(serializers.ModelSerializer):
    conversation: serializers.SlugRelatedField[Conversation] = serializers.SlugRelatedField(
        slug_field="conversation_id", read_only=True
    )
    coverage = serializers.FloatField(read_only=True, help_text="Share of ground-truth turns the model answered (0-1).")
    post_coverage = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="1 if the model gave a usable post-conversation prediction, 0 if not; null for a score stored "
        "before this was recorded (re-score the run).",
    )
    holistic_imputed = serializers.SerializerMethodField(
        help_text="True when the holistic score rests on the scorer's defaults for a missing post-conversation "
        "answer rather than on a prediction; null when the stored score predates this flag."
    )

    class Meta:
        model = ConversationScore
        fields = ["conversation", "composite_score", "coverage", "post_coverage", "holistic_imputed", "metrics"]
        read_only_fields = fields

    def get_holistic_imputed(self, score: ConversationScore) -> bool | None:
        value = (score.metrics or {}).get("holistic_imputed")
        return None if value is None else bool(value)


class TokenRequestSerializer(serializers.Serializer):
    expires_in_days = serializers.ChoiceField(
        choices=sorted(EXPIRY_DAYS),
        default=DEFAULT_EXPIRY_DAYS,
        help_text="How many days the new token works; after that it is refused.",
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField(
        help_text="Send as the header 'Authorization: Token <token>'. Shown only here: Attune keeps only its digest."
    )
    username = serializers.CharField()
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(help_text="When the token stops working.")


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


class SnapshotSummarySerializer(serializers.ModelSerializer):
    """A frozen result snapshot in a list (no leaderboard or analyses: fetch one for those)."""

    created_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = ResultSnapshot
        fields = ["id", "name", "description", "created_at", "created_by", "content_sha256"]
        read_only_fields = fields


class SnapshotSerializer(SnapshotSummarySerializer):
    """A frozen result snapshot: the citable document (research.results.snapshots.snapshot_json)."""

    manifest = serializers.DictField(help_text="Runs, conversation ids and set, dataset versions, bootstrap, code.")
    leaderboard = serializers.DictField(help_text="rows, apart, apart_reasons, human_pairings as frozen.")
    analysis = serializers.DictField(allow_null=True, help_text="The SPEC 6 analyses of the compared rows.")

    class Meta(SnapshotSummarySerializer.Meta):
        fields = [*SnapshotSummarySerializer.Meta.fields, "manifest", "leaderboard", "analysis"]
        read_only_fields = fields


class SnapshotCreateSerializer(serializers.Serializer):
    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=200,
        error_messages={"invalid": NAME_INVALID},
        help_text="Unique (a snapshot is never renamed); a visible character and no control characters.",
    )
    description = serializers.RegexField(
        TEXT_PATTERN,
        required=False,
        allow_blank=True,
        default="",
        max_length=2000,
        error_messages={"invalid": TEXT_INVALID},
    )
    set = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Comparison set key; one with no scored runs is a 404."
    )
    runs = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, default=list)
    weighting = serializers.ChoiceField(choices=["spec", "equal"], default="spec")


class CallMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True)


class CallRecordSerializer(serializers.Serializer):
    """One model call of a run-conversation: the same fields the transcript page shows."""

    sequence = serializers.IntegerField(help_text="Order in which the conversation's calls started (0-based).")
    call_type = serializers.CharField(help_text="draft, analysis, hp_binary, pairwise, judge or post.")
    turn_number = serializers.IntegerField(allow_null=True, help_text="Null for the post-conversation call.")
    role = serializers.ChoiceField(choices=["em", "judge"])
    model = serializers.CharField()
    attempt = serializers.IntegerField(help_text="1 for the first ask; 2.. for re-asks after an unusable reply.")
    messages = CallMessageSerializer(many=True, help_text="Exactly what the model received.")
    raw_reply = serializers.CharField(allow_null=True, allow_blank=True)
    parsed = serializers.DictField(allow_null=True, help_text="The validated answer; null when the reply was unusable.")
    parse_error = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_blank=True, help_text="Why no reply came (transport or permanent error).")
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(allow_null=True, help_text="Null when the model's price is unknown.")
    latency_s = serializers.FloatField(allow_null=True, help_text="Null for answers from the call cache.")
    transport_attempts = serializers.IntegerField(help_text="Requests sent for this attempt; >1 means retried.")
    cached = serializers.BooleanField(help_text="Reused from the call cache: nothing was sent or paid.")


class TranscriptTotalsSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    sent = serializers.IntegerField()
    cached = serializers.IntegerField()
    retried = serializers.IntegerField()
    failed = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(allow_null=True)
    latency_s = serializers.FloatField()


class TranscriptSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    conversation_id = serializers.CharField()
    status = serializers.CharField(allow_null=True, help_text="The run-conversation's status; null: no output.")
    totals = TranscriptTotalsSerializer()
    calls = CallRecordSerializer(many=True)
