"""gunicorn's configuration for every real serving of Attune: ``attune serve``, the Docker image and compose.

``gunicorn -c python:attune_site.gunicorn_conf`` (plus ``--bind``) serves the WSGI
application with threaded workers; attune_site/serving.py says why, and reads the
sizes from ``ATTUNE_WEB_WORKERS`` and ``ATTUNE_WEB_THREADS``.
"""

import os

from attune_site.serving import web_threads, web_workers

wsgi_app = "attune_site.wsgi:application"
worker_class = "gthread"
workers = web_workers()
threads = web_threads()
# Idle keep-alive connections wait in each worker's poller and take no thread; allow plenty beside the threads.
worker_connections = threads + 1000
# A gthread worker's heartbeat comes from its main loop, not from requests, so a long stream is never
# mistaken for a hung worker; this only catches a worker whose main loop is stuck (generous: on a busy
# machine a worker importing litellm at boot can take a minute).
timeout = 120
# How long a connection may wait for its (next) request. gunicorn also closes a new connection whose request
# has not been read within this time, which a CPU-starved worker can take longer than the default 2 s to do
# ("server disconnected without a response" under load); an idle connection takes no thread.
keepalive = 10
# On restart, replies still streaming get this long to finish (the participant's message is saved either way).
graceful_timeout = 30
# Each worker shares a bounded pool of database connections between its threads (settings read this before
# the workers load the application; an operator's own value wins, blank means this default as everywhere).
if not os.environ.get("ATTUNE_DB_POOL_SIZE", "").strip():
    os.environ["ATTUNE_DB_POOL_SIZE"] = "20"
# No runtime control socket (gunicorn 25.1+): Attune does not use ``gunicornc``, and every server on a machine
# would otherwise share one socket path in the home directory.
control_socket_disable = True
# No access log unless an operator asks for one (gunicorn's default, kept on purpose: a study link is a
# participant's credential); if one is switched on, this logger writes ``/s/<token>/`` as ``/s/[link]/``.
accesslog = None
logger_class = "attune_site.log_redaction.StudyLinkRedactingLogger"


def post_worker_init(worker: object) -> None:
    """With live models on, load litellm before the worker takes requests (it takes seconds to import):
    otherwise the first participants' replies in each worker would wait for the import."""
    from django.conf import settings

    if settings.ATTUNE_ALLOW_LIVE_MODELS:
        import litellm  # noqa: F401
