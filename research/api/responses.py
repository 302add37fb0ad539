"""The API's result responses as pydantic models: the core's results plus the few keys the API adds.

A response is a result model, dumped by ``attunebench.metrics.results.to_json``; the OpenAPI schema is
built from the same model (research.api.schema), so a shape is described once and the schema cannot
drift from what the API sends. No serializer copies these models field by field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from attunebench.metrics.results import Analysis, ApartRow, HumanPairing, Result
from research.results.evaluation import DashboardRow


class ComparisonSet(Result):
    """A conversation set runs were compared on: a dataset version (or the live data) and a topic selection."""

    key: str = Field(description="Pass as `set` to show this comparison (e.g. `v3`, `v3:Work`, `live`).")
    label: str
    n_rows: int = Field(description="(model, mode) rows with a scored run on this set.")


class Leaderboard(Result):
    """The leaderboard of the rows compared on one conversation set, with skill, 95% CIs and the rows apart."""

    weighting: Literal["spec", "equal"]
    research_only_statement: str
    conversation_set: str | None = Field(description="Key of the comparison set shown.")
    conversation_set_label: str | None
    compared_set: str | None = Field(description="Fingerprint of the compared conversation ids.")
    n_compared_conversations: int
    min_conversations_for_ci: int
    n_bootstrap: int
    seed: int
    prior_baseline: str | None = Field(description="The row skill is measured against.")
    sets: list[ComparisonSet]
    rows: list[DashboardRow] = Field(description="Ranked rows, all scored on the compared set.")
    apart: list[DashboardRow] = Field(description="Rows on another conversation set: not ranked, rank 0.")
    apart_reasons: list[ApartRow]
    human_pairings: list[HumanPairing]


class Analyses(Result):
    """The SPEC 6 analyses over the rows compared on one conversation set."""

    research_only_statement: str
    runs: list[int] = Field(description="Primary keys of the runs analysed.")
    analysis: Analysis | None = Field(description="What `attune analyze --json` writes; null with no scored run.")


class ErasureOutcome(Result):
    """What erasing a participant through the API did; the same audit record as the command and the admin."""

    participant: str = Field(description="The pseudonym the request named.")
    erased: bool = Field(
        description="true: this request erased them. false: nothing was stored under the pseudonym any more "
        "(erased before), so the request changed nothing: asking again is safe."
    )
    detail: str
    audit_record: int | None = Field(description="The erasure's audit record (no personal data); null if none.")
    rows_deleted: dict[str, int] = Field(description="Model label -> rows deleted.")
    runs_rescored: list[int] = Field(description="Evaluation runs re-scored without the participant.")
    exports_withdrawn: list[int] = Field(description="Export jobs whose files were withdrawn and regenerated.")
