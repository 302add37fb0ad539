"""Study links never reach a log: ``/s/<token>/`` is written as ``/s/[link]/``.

A participant's study link is their only credential, so whoever reads a log
line holding one could continue (or withdraw) as them. Two places could write
one: gunicorn's access log, which is off by default (attune_site/gunicorn_conf.py)
but an operator may switch on with ``--access-logfile`` or ``GUNICORN_CMD_ARGS``,
and Django's request log ("Not Found: /s/…", "Forbidden (CSRF …): /s/…"). The
gunicorn logger class below and the logging filter used by the settings redact
both; the path, query, referrer and header values all pass through ``redact``.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from gunicorn.glogging import Logger  # type: ignore[import-untyped]

STUDY_LINK = re.compile(r"/s/[^/?#\s\"'<>]+")
REDACTED = "/s/[link]"


def redact(text: str) -> str:
    """``text`` with every study-link token replaced (the rest of the path is kept)."""
    return STUDY_LINK.sub(REDACTED, text)


class RedactStudyLinks(logging.Filter):
    """A logging filter that rewrites a record's message without its study links (the record is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class StudyLinkRedactingLogger(Logger):
    """gunicorn's logger, with every access-log atom (request line, path, referrer, headers…) redacted.

    An access log an operator switches on is written where they asked (``--access-logfile``), in the
    ``--access-logformat`` they gave, and only there: not also through the root handler in the general line
    format (attune_site/log_format.py leaves ``gunicorn.access`` out of the loggers it adopts).
    """

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        self.access_log.propagate = cfg.accesslog is None
        self._asked_for_access_log = asked_for_access_log(cfg)

    @property
    def access_log_enabled(self) -> bool:
        """Read by gunicorn before it builds a request's access line: on only when an operator asked for one."""
        return self._asked_for_access_log

    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: timedelta) -> dict[str, Any]:
        atoms = super().atoms(resp, req, environ, request_time)
        return {key: redact(value) if isinstance(value, str) else value for key, value in atoms.items()}


def asked_for_access_log(cfg: Any) -> bool:
    """Whether gunicorn's settings ask for an access log: a file (``--access-logfile``), syslog, a logging
    configuration file of the operator's own, or a logging dictionary that configures ``gunicorn.access``.

    gunicorn also counts any ``logconfig_dict`` as asking, and Attune's own (attune_site/log_format.py, which
    leaves ``gunicorn.access`` out) would then make every request build its log line and write it to the
    server's error stream: a line per request that nobody asked for, and CPU on every request.
    """
    configured = "gunicorn.access" in ((cfg.logconfig_dict or {}).get("loggers") or {})
    return bool(
        cfg.accesslog
        or cfg.logconfig
        or cfg.logconfig_json
        or configured
        or (cfg.syslog and not cfg.disable_redirect_access_to_syslog)
    )
