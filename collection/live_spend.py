"""What a study's live original models have cost, against its dollar budget.

Every live call a reply makes (primary, fallback, identity-screen regenerations)
is stored as a :class:`~collection.models.LiveCall` priced by litellm's public
``completion_cost`` from the messages sent and the text received (a streamed
reply carries no usage, so litellm counts the tokens). A model litellm has no
price for is counted apart as *unpriced* rather than guessed; such calls are
still held by the study's call budget (``live_call_budget``). The dollar
budget (``Study.live_spend_budget_usd``) is checked before each call: once the
priced cost reaches it, no new live call starts. Calls already under way when
it is reached finish, so the spend can pass the budget by those calls only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, Sum

from collection.chat_model import LiveAttempt
from collection.models import LiveCall, Study, Turn

logger = logging.getLogger("attune.chat")

_PLACES = Decimal("0.00000001")


@dataclass(frozen=True)
class StudySpend:
    """A study's live-model spend: priced cost in USD, its budget (None = no limit), calls, unpriced calls."""

    cost_usd: Decimal
    budget: Decimal | None
    calls: int
    calls_unpriced: int

    @property
    def spent(self) -> bool:
        """True once the priced cost has reached the budget: no new live call may start."""
        return self.budget is not None and self.cost_usd >= self.budget


def price_call(litellm_model: str, messages: list[dict[str, str]], completion: str) -> Decimal | None:
    """litellm's price of one call in USD, or None when litellm has no price for the model."""
    from attunebench.replay.llm import imported_litellm

    litellm = imported_litellm()  # heavy: imported only when a live model is used

    try:
        cost = litellm.completion_cost(model=litellm_model, messages=messages, completion=completion)
    except Exception as exc:  # litellm raises for a model missing from its price map
        logger.info("no litellm price for %s (%s); counted as unpriced", litellm_model, type(exc).__name__)
        return None
    return Decimal(str(cost)).quantize(_PLACES)


def do_record_calls(study: Study, turn: Turn | None, attempts: list[LiveAttempt]) -> list[LiveCall]:
    """Store every live call of one reply (finished ones priced; failed ones kept unpriced, as not billed text).

    A streamed reply's calls come from ``CallRecord.close()``, so that no call starts after they are counted."""
    rows = [
        LiveCall(
            study=study,
            turn=turn,
            litellm_model=attempt.litellm_model,
            succeeded=attempt.succeeded,
            cost_usd=price_call(attempt.litellm_model, attempt.messages, attempt.text) if attempt.succeeded else None,
        )
        for attempt in attempts
    ]
    return LiveCall.objects.bulk_create(rows)


def study_spend(study: Study) -> StudySpend:
    """The study's spend so far: one aggregate query."""
    totals = LiveCall.objects.filter(study=study).aggregate(
        cost=Sum("cost_usd"),
        calls=Count("pk"),
        unpriced=Count("pk", filter=Q(succeeded=True, cost_usd__isnull=True)),
    )
    return StudySpend(
        cost_usd=totals["cost"] or Decimal("0"),
        budget=study.live_spend_budget_usd,
        calls=int(totals["calls"]),
        calls_unpriced=int(totals["unpriced"]),
    )


def spend_allows_call(study: Study) -> bool:
    """False once the study's dollar budget is spent (read fresh, so a raised budget takes effect at once)."""
    budget = Study.objects.filter(pk=study.pk).values_list("live_spend_budget_usd", flat=True).first()
    if budget is None:
        return True
    fresh = Study(pk=study.pk, live_spend_budget_usd=budget)
    return not study_spend(fresh).spent
