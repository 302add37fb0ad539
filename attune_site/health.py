"""Liveness and readiness for deployments: answers 200 only when the database answers."""

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse


def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return JsonResponse({"status": "error", "database": str(exc.__class__.__name__)}, status=503)
    return JsonResponse({"status": "ok"})
