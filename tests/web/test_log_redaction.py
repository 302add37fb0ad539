"""Study links never reach a log: gunicorn's access log and Django's request log redact /s/<token>/."""

from __future__ import annotations

import importlib
import io
import logging
import logging.config
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.test import Client
from gunicorn.config import Config

from attune_site.log_redaction import RedactStudyLinks, StudyLinkRedactingLogger, redact
from collection import study_flow as flow

TOKEN = "Zq3-secret_token-Abc123"


def test_redact_keeps_the_rest_of_the_path():
    assert redact(f"GET /s/{TOKEN}/turn/2/answers/?x=1 HTTP/1.1") == "GET /s/[link]/turn/2/answers/?x=1 HTTP/1.1"
    assert redact(f"https://study.example.org/s/{TOKEN}") == "https://study.example.org/s/[link]"
    assert redact("/join/pilot/ /static/css/site.css /healthz") == "/join/pilot/ /static/css/site.css /healthz"


def test_gunicorn_writes_no_access_log_by_default_and_redacts_one_switched_on(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTUNE_DB_POOL_SIZE", "20")  # the module sets it when blank; keep the test's env as it was
    # It also points prometheus_client at this host's metrics folder: undone after the test, so the processes
    # later tests start do not inherit it.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    conf = importlib.import_module("attune_site.gunicorn_conf")
    assert conf.accesslog is None
    cfg = Config()
    for name in ("accesslog", "logger_class"):
        cfg.set(name, getattr(conf, name))
    assert cfg.accesslog is None and cfg.logger_class is StudyLinkRedactingLogger

    # an operator switches the access log on (--access-logfile): the study link is not in it
    log_file = tmp_path / "access.log"
    cfg.set("accesslog", str(log_file))
    cfg.set("access_log_format", '%(h)s "%(r)s" %(s)s "%(f)s" %(U)s %({referer}i)s')
    logger = cfg.logger_class(cfg)
    environ = {
        "REQUEST_METHOD": "POST",
        "RAW_URI": f"/s/{TOKEN}/consent/",
        "PATH_INFO": f"/s/{TOKEN}/consent/",
        "QUERY_STRING": "",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": f"https://study.example.org/s/{TOKEN}/consent/",
    }
    request = SimpleNamespace(headers=[("REFERER", environ["HTTP_REFERER"])])
    response = SimpleNamespace(status="302 Found", headers=[], sent=0)
    logger.access(response, request, environ, timedelta(milliseconds=5))
    logger.close_on_exec()
    for handler in logger.access_log.handlers:
        handler.flush()
    written = log_file.read_text()
    assert TOKEN not in written
    assert written.strip() == (
        '127.0.0.1 "POST /s/[link]/consent/ HTTP/1.1" 302 "https://study.example.org/s/[link]/consent/" '
        "/s/[link]/consent/ https://study.example.org/s/[link]/consent/"
    )


@pytest.fixture
def served_config(tmp_path, monkeypatch):
    """attune serve's gunicorn configuration, and the loggers it reconfigures put back afterwards."""
    monkeypatch.setenv("ATTUNE_DB_POOL_SIZE", "20")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    kept = {
        name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate)
        for name in ("", "gunicorn.access", "gunicorn.error")
    }
    conf = importlib.import_module("attune_site.gunicorn_conf")
    cfg = Config()
    cfg.set("logger_class", conf.logger_class)
    cfg.set("logconfig_dict", conf.logconfig_dict)
    yield cfg
    for name, (handlers, propagate) in kept.items():
        logging.getLogger(name).handlers[:] = handlers
        logging.getLogger(name).propagate = propagate


def error_stream_into(stream: io.StringIO) -> None:
    """Point the root logger's stream handlers (the error stream) at ``stream``."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)


def test_an_access_log_switched_on_is_written_to_its_file_in_its_format_beside_the_shared_logging(
    served_config, tmp_path
):
    # gunicorn, then each worker's Django, apply the shared logging configuration after the file is opened:
    # the lines must still land there, once, in the operator's format, and not in the error stream's format.
    served_config.set("accesslog", str(tmp_path / "access.log"))
    served_config.set("access_log_format", "%(m)s %(U)s %(s)s %(D)s")
    logger = served_config.logger_class(served_config)
    logging.config.dictConfig(settings.LOGGING)  # as each worker does when it loads the application
    stream = io.StringIO()
    error_stream_into(stream)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": f"/s/{TOKEN}/chat/",
        "PATH_INFO": f"/s/{TOKEN}/chat/",
        "QUERY_STRING": "",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
    }
    response = SimpleNamespace(status="200 OK", headers=[], sent=10)
    logger.access(response, SimpleNamespace(headers=[]), environ, timedelta(microseconds=12345))
    for handler in logger.access_log.handlers:
        handler.flush()
    assert (tmp_path / "access.log").read_text() == "GET /s/[link]/chat/ 200 12345\n"
    assert "/chat/" not in stream.getvalue()


def test_the_served_configuration_writes_no_access_line_unless_one_is_asked_for(served_config, tmp_path):
    # attune serve's configuration carries a logging dictionary (gunicorn counts any as asking for an access
    # log): without --access-logfile no request leaves a line anywhere, in the error stream or elsewhere.
    logger = served_config.logger_class(served_config)
    stream = io.StringIO()
    error_stream_into(stream)
    environ = {"REQUEST_METHOD": "GET", "RAW_URI": "/healthz", "PATH_INFO": "/healthz", "QUERY_STRING": ""}
    response = SimpleNamespace(status="200 OK", headers=[], sent=10)
    logger.access(response, SimpleNamespace(headers=[]), environ, timedelta(microseconds=100))
    enabled = logger.access_log_enabled
    served_config.set("accesslog", str(tmp_path / "access.log"))
    logger.setup(served_config)
    assert stream.getvalue() == ""
    assert not enabled and logger.access_log_enabled


@pytest.mark.django_db
def test_djangos_request_log_names_no_study_link(demo_defaults):
    console = next(h for h in logging.getLogger().handlers if any(isinstance(f, RedactStudyLinks) for f in h.filters))
    assert isinstance(console, logging.StreamHandler)
    stream = io.StringIO()
    previous = console.setStream(stream)
    try:
        participant = flow.do_enrol(demo_defaults.study)
        client = Client(enforce_csrf_checks=True)
        assert client.get(f"/s/{TOKEN}/").status_code == 404  # "Not Found: /s/…"
        assert client.post(f"/s/{participant.token}/consent/", {}).status_code == 403  # "Forbidden (CSRF …): /s/…"
    finally:
        console.setStream(previous)
    written = stream.getvalue()
    assert "Not Found: /s/[link]/" in written and "/s/[link]/consent/" in written
    assert TOKEN not in written and participant.token not in written
