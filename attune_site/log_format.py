"""One log format for every process of a deployment, and a request id that follows the work.

gunicorn, Django, Celery and litellm each used to write their own format (litellm every line twice: once
through its own handler, once through the root logger's). Now every logger hands its records to one
handler on the root logger: plain lines, or with ``ATTUNE_LOG_FORMAT=json`` one JSON object per line
(python-json-logger). The same configuration is given to Django (settings.LOGGING), to gunicorn
(``logconfig_dict``) and kept by Celery (it does not take the root logger over).

Each line carries a request id: the web request's (its ``X-Request-ID`` when a proxy sent a sane one,
else a new one, echoed in the response), handed to every task the request queues in the message's
headers, and set again while the worker runs that task, so the task's lines and the provider calls it
makes carry it too. Lines outside any request or task carry ``-``.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from attune_site.env import env_str

if TYPE_CHECKING:  # the settings import this module: it imports nothing of Django's at run time
    from django.http import HttpRequest, HttpResponseBase

NO_REQUEST = "-"
request_id: ContextVar[str] = ContextVar("attune_request_id", default=NO_REQUEST)
# What a proxy may hand in: short, and nothing a log reader could mistake for another field.
_SANE_ID = re.compile(r"[A-Za-z0-9._-]{8,64}")
HEADER = "X-Request-ID"
TASK_HEADER = "attune_request_id"

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"
LOG_FORMATS = ("plain", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def level_from_env() -> str:
    return env_str("ATTUNE_LOG_LEVEL", "WARNING", choices=LOG_LEVELS)


def format_from_env() -> str:
    return env_str("ATTUNE_LOG_FORMAT", "plain", choices=LOG_FORMATS)


class RequestIdFilter(logging.Filter):
    """Stamps each record with the request id of the work it was logged in."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


def logging_config(level: str, fmt: str) -> dict[str, Any]:
    """The ``dictConfig`` every process uses (``fmt``: plain or json)."""
    formatter: dict[str, Any] = (
        {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
        if fmt == "json"
        else {"format": PLAIN_FORMAT}
    )
    # Loggers that come with handlers of their own give them up and pass their records to the root's one.
    adopted = {"handlers": [], "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"attune": formatter},
        "filters": {
            "request_id": {"()": "attune_site.log_format.RequestIdFilter"},
            # Django's request log names the path ("Not Found: /s/…"): study links are redacted.
            "redact_study_links": {"()": "attune_site.log_redaction.RedactStudyLinks"},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "attune",
                "filters": ["request_id", "redact_study_links"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "attune": {"level": level},
            "gunicorn.error": {**adopted, "level": "INFO"},
            # Not gunicorn.access: it logs only when an operator names a file (--access-logfile), and its
            # lines go there in the operator's --access-logformat (attune_site/log_redaction.py).
            "celery": dict(adopted),
        },
    }


def task_request_id(headers: dict[str, Any] | None) -> str | None:
    """The request id a queued task's message carries, if it is one this module wrote."""
    value = (headers or {}).get(TASK_HEADER)
    return value if isinstance(value, str) and _SANE_ID.fullmatch(value) else None


class RequestIdMiddleware:
    """Gives each request its id for the lines logged while it is served, and echoes it to the client."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        given = request.headers.get(HEADER, "")
        current = given if _SANE_ID.fullmatch(given) else uuid.uuid4().hex
        token = request_id.set(current)
        try:
            response = self.get_response(request)
        finally:
            request_id.reset(token)
        response[HEADER] = current
        if _generated_stream(response):
            # A participant's reply is stored (and its rewrite queued) while the stream is read, after this returns.
            response.streaming_content = _carrying(response.streaming_content, current)  # type: ignore[attr-defined]
        return response


def _generated_stream(response: HttpResponseBase) -> bool:
    """A stream made while it is read (not a file, whose bytes are only copied, nor an async one)."""
    from django.http import FileResponse

    return response.streaming and not isinstance(response, FileResponse) and not getattr(response, "is_async", False)


def _carrying(chunks: Iterable[Any], current: str) -> Iterator[Any]:
    """The stream, with ``current`` as the request id while each chunk is made."""
    source = iter(chunks)
    while True:
        token = request_id.set(current)
        try:
            chunk = next(source)
        except StopIteration:
            return
        finally:
            request_id.reset(token)
        yield chunk
