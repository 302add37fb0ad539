"""Per-turn annotations a participant gives after each model reply (SPEC 2.1–2.3)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from attunebench import catalogue as cat
from collection.models import Turn

_YES_NO_NA = [(v, cat.YES_NO_NA_LABELS[v]) for v in cat.YES_NO_NA]
_RESPONSE_LABELS = [(v, v) for v in cat.RESPONSE_LABELS]


class MoodTag(models.Model):
    """One mood-shift tag; a turn with none recorded means "no change"."""

    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="mood_tags")
    position = models.PositiveSmallIntegerField()
    emotion = models.CharField(max_length=40)
    intensity = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["turn_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "position"], name="mood_tag_position_unique"),
            models.CheckConstraint(condition=~Q(emotion=""), name="mood_tag_emotion_not_empty"),
            models.CheckConstraint(
                condition=Q(intensity__isnull=True) | Q(intensity__gte=1, intensity__lte=7),
                name="mood_tag_intensity_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.emotion} ({self.intensity or '-'})"


class BinaryJudgement(models.Model):
    """One behaviour question answered twice: what the model did, and what the participant wanted."""

    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="binary_judgements")
    position = models.PositiveSmallIntegerField()
    question_id = models.CharField(max_length=8, choices=[(q, q) for q in cat.BINARY_QUESTION_IDS])
    observed = models.CharField(max_length=3, choices=_YES_NO_NA, null=True, blank=True)
    preferred = models.CharField(max_length=3, choices=_YES_NO_NA, null=True, blank=True)
    llm_value = models.CharField(max_length=3, choices=_YES_NO_NA, null=True, blank=True)

    class Meta:
        ordering = ["turn_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "question_id"], name="binary_question_once_per_turn"),
            models.CheckConstraint(
                condition=Q(question_id__in=list(cat.BINARY_QUESTION_IDS)), name="binary_question_id_valid"
            ),
            models.CheckConstraint(
                condition=Q(observed__isnull=True) | Q(observed__in=list(cat.YES_NO_NA)), name="binary_observed_valid"
            ),
            models.CheckConstraint(
                condition=Q(preferred__isnull=True) | Q(preferred__in=list(cat.YES_NO_NA)),
                name="binary_preferred_valid",
            ),
            models.CheckConstraint(
                condition=Q(llm_value__isnull=True) | Q(llm_value__in=list(cat.YES_NO_NA)),
                name="binary_llm_value_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question_id}: did {self.observed or '-'}, wanted {self.preferred or '-'}"


class AlternateResponses(models.Model):
    """The model-improved rewrite and the participant's own edited ("golden") reply."""

    turn = models.OneToOneField(Turn, on_delete=models.PROTECT, related_name="alternates")
    llm_improved = models.TextField(blank=True)
    human_edited = models.TextField(blank=True)
    improved_generated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"alternates of turn {self.turn_id}"


class PairwiseComparison(models.Model):
    """One preference question about two replies, as shown (positions A and B) and answered."""

    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="pairwise_comparisons")
    position = models.PositiveSmallIntegerField()
    question_id = models.CharField(max_length=300)
    response_a = models.CharField(max_length=10, choices=_RESPONSE_LABELS)
    response_b = models.CharField(max_length=10, choices=_RESPONSE_LABELS)
    winner = models.CharField(max_length=1, choices=[("A", "A"), ("B", "B")], null=True, blank=True)

    class Meta:
        ordering = ["turn_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "position"], name="pairwise_position_unique"),
            models.CheckConstraint(condition=Q(response_a__in=list(cat.RESPONSE_LABELS)), name="pairwise_a_valid"),
            models.CheckConstraint(condition=Q(response_b__in=list(cat.RESPONSE_LABELS)), name="pairwise_b_valid"),
            models.CheckConstraint(condition=~Q(response_a=models.F("response_b")), name="pairwise_distinct_replies"),
            models.CheckConstraint(
                condition=Q(winner__isnull=True) | Q(winner__in=["A", "B"]), name="pairwise_winner_valid"
            ),
            models.CheckConstraint(
                condition=Q(question_id__in=list(cat.PAIRWISE_QUESTION_IDS))
                | Q(question_id__startswith=cat.CUSTOM_PAIRWISE_PREFIX),
                name="pairwise_question_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question_id}: {self.response_a} vs {self.response_b} -> {self.winner or '-'}"


class PageTime(models.Model):
    """Seconds a participant spent on one annotation page of a turn (quality control: too fast to have read).

    Measured between the page being shown (a signed stamp in the form) and its
    submission; the last submission of the page is kept.
    """

    turn = models.ForeignKey(Turn, on_delete=models.PROTECT, related_name="page_times")
    page = models.CharField(
        max_length=10, choices=[("answers", "answers"), ("rewrite", "rewrite"), ("compare", "compare")]
    )
    seconds = models.FloatField()
    recorded_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["turn_id", "page"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "page"], name="page_time_once_per_turn_page"),
            models.CheckConstraint(condition=Q(seconds__gte=0), name="page_time_non_negative"),
            models.CheckConstraint(
                condition=Q(page__in=["answers", "rewrite", "compare"]), name="page_time_page_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.turn_id} {self.page}: {self.seconds:.1f}s"
