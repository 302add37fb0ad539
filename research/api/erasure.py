"""``DELETE /api/participants/<pseudonym>/``: erase a participant, as ``attune erase`` and the admin action do.

The participant is named by the pseudonym exports and the API show (``pp-…``), or the stored one the admin
shows. The same service (``research.privacy.erasure``) and the same right as the admin action
(``research.access.roles.may_erase``) apply, and the same audit record is kept, marked ``api``. Asking again
for a pseudonym already erased answers 200 with ``erased: false``, so a script that retries is safe.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attunebench.metrics.results import to_json
from research.access.checks import IsResearcher
from research.access.roles import may_erase
from research.api.responses import ErasureOutcome
from research.api.serializers import ErrorSerializer
from research.api.views import DENIED, ResearcherAPIMixin
from research.privacy.erasure import AlreadyErased, ErasureError, access_participant_to_erase, do_erase_participant


class MayErase(BasePermission):
    """The erasure right, checked after ``IsResearcher`` (so no credentials is still a 401)."""

    message = "Erasing participants needs the erasure right: the research group's or an administrator's."

    def has_permission(self, request: Any, view: Any) -> bool:
        return may_erase(request.user)


def _nothing_left(pseudonym: str, why: str) -> ErasureOutcome:
    return ErasureOutcome(
        participant=pseudonym,
        erased=False,
        detail=why,
        audit_record=None,
        rows_deleted={},
        runs_rescored=[],
        exports_withdrawn=[],
    )


class ParticipantErasureView(ResearcherAPIMixin, APIView):
    permission_classes = [IsResearcher, MayErase]

    @extend_schema(
        operation_id="participant_erase",
        summary="Erase a participant and everything stored about them (cannot be undone; idempotent)",
        description="Withdraws the participant first (out of scores, exports and every page at once), then "
        "deletes every row that leads to them, re-scores the runs that held them and regenerates the export "
        "files that held them. An audit record without personal data is kept. A pseudonym this deployment issued "
        "that no longer names anyone answers 200 with `erased: false`.",
        parameters=[
            OpenApiParameter(
                "pseudonym",
                str,
                OpenApiParameter.PATH,
                description="The participant's pseudonym as exports and the API show it (pp-…), or the admin's.",
            )
        ],
        request=None,
        responses={
            200: ErasureOutcome,
            404: OpenApiResponse(ErrorSerializer, description="No participant is known by that name."),
            **DENIED,
        },
    )
    def delete(self, request: Request, pseudonym: str) -> Response:
        try:
            participant = access_participant_to_erase(pseudonym)
            record = do_erase_participant(participant, erased_by=request.user, via="api")
        except AlreadyErased as exc:
            return Response(to_json(_nothing_left(pseudonym, str(exc))))
        except ErasureError as exc:
            raise NotFound(f"{exc} Name them by the pseudonym exports and the API show (pp-…).") from None
        outcome = ErasureOutcome(
            participant=pseudonym,
            erased=True,
            detail="Erased. Affected runs are re-scored and export files holding them withdrawn.",
            audit_record=record.pk,
            rows_deleted=record.rows_deleted,
            runs_rescored=record.runs_rescored,
            exports_withdrawn=record.exports_withdrawn,
        )
        return Response(to_json(outcome))
