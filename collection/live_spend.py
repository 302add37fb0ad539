"""What a study's live original models have cost, against its dollar budget.

Every live call a reply makes (primary, fallback, identity-screen regenerations)
is stored as a :class:`~collection.models.LiveCall` priced by the one rule every
model call is priced by (``attunebench.pricing``: litellm's own cost calculation)
from the messages sent and the text received (a streamed reply carries no usage,
so litellm counts the tokens). A model litellm has no
price for is counted apart as *unpriced* rather than guessed; such calls are
still held by the study's call budget (``live_call_budget``). The dollar
budget (``Study.live_spend_budget_usd``) is checked before each call: once the
priced cost reaches it, no new live call starts. Calls already under way when
it is reached finish, so the spend can pass the budget by those calls only.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.db import connection
from django.db.models import Count, Field, Q, Sum

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
    """The price of one call in USD by the rule every model call is priced by (``attunebench.pricing``),
    or None when litellm has no price for the model. A streamed reply carries no usage, so its tokens are
    counted as litellm counts them."""
    from attunebench import pricing  # litellm is heavy: only when a live model was used

    if pricing.listed_name(litellm_model) is None:
        logger.info("no litellm price for %s; counted as unpriced", litellm_model)
        return None
    prompt_tokens, completion_tokens = pricing.count_tokens(litellm_model, messages, completion)
    cost = pricing.call_cost(litellm_model, prompt_tokens, completion_tokens)
    return None if cost is None else Decimal(str(cost)).quantize(_PLACES)


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


def _column(name: str) -> str:
    field = Study._meta.get_field(name)
    assert isinstance(field, Field) and field.column, f"Study.{name} is not a column"
    return field.column


@functools.cache
def _has_budget_sql() -> str:
    """Whether a study has a dollar budget: a fixed SQL string, since most studies have none and every live
    reply asks (the ORM rebuilt the query on each)."""
    q = connection.ops.quote_name
    budget = q(_column("live_spend_budget_usd"))
    return f"SELECT 1 FROM {q(Study._meta.db_table)} WHERE {q(_column('id'))} = %s AND {budget} IS NOT NULL"


def spend_allows_call(study: Study) -> bool:
    """False once the study's dollar budget is spent (read fresh, so a raised budget takes effect at once)."""
    with connection.cursor() as cursor:
        cursor.execute(_has_budget_sql(), [study.pk])
        if cursor.fetchone() is None:  # no dollar budget
            return True
    budget = Study.objects.filter(pk=study.pk).values_list("live_spend_budget_usd", flat=True).first()
    if budget is None:
        return True
    fresh = Study(pk=study.pk, live_spend_budget_usd=budget)
    return not study_spend(fresh).spent
