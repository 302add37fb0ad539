"""gunicorn's configuration for every real serving of Attune: ``attune serve``, the Docker image and compose.

``gunicorn -c python:attune_site.gunicorn_conf`` (plus ``--bind``) serves the WSGI
application with threaded workers; attune_site/serving.py says why, and reads the
sizes from ``ATTUNE_WEB_WORKERS`` and ``ATTUNE_WEB_THREADS``.
"""

import os
import shutil
import socket

from attune_site.datadir import data_dir
from attune_site.log_format import format_from_env, level_from_env, logging_config
from attune_site.serving import web_pool_size, web_threads, web_workers

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
    os.environ["ATTUNE_DB_POOL_SIZE"] = str(web_pool_size(workers))
# No runtime control socket (gunicorn 25.1+): Attune does not use ``gunicornc``, and every server on a machine
# would otherwise share one socket path in the home directory.
control_socket_disable = True
# No access log unless an operator asks for one (gunicorn's default, kept on purpose: a study link is a
# participant's credential); if one is switched on, this logger writes ``/s/<token>/`` as ``/s/[link]/``.
accesslog = None
logger_class = "attune_site.log_redaction.StudyLinkRedactingLogger"
# gunicorn's lines in the format of every other line (attune_site/log_format.py), through the root handler.
logconfig_dict = logging_config(level_from_env(), format_from_env())


def post_worker_init(worker: object) -> None:
    """With live models on, load litellm before the worker takes requests (it takes seconds to import):
    otherwise the first participants' replies in each worker would wait for the import."""
    from django.conf import settings

    if settings.ATTUNE_ALLOW_LIVE_MODELS:
        from attunebench.replay.llm import load_litellm

        load_litellm()


# The web processes' own metrics (participant request latency, open reply streams) are summed over the live
# workers of this host at scrape time: prometheus_client's multiprocess mode, one directory per host under
# the data directory (a compose volume shared with other containers holds one each). Set before any worker
# imports prometheus_client; emptied when the server starts, since the processes that wrote it are gone.
metrics_dir = data_dir() / "metrics" / f"web-{socket.gethostname()}"
metrics_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # a process that inherits the variable can write there
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)


def on_starting(server: object) -> None:
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(mode=0o700, parents=True, exist_ok=True)


def child_exit(server: object, worker: object) -> None:
    """A worker that exited no longer holds reply streams: its share of the live gauges goes."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(getattr(worker, "pid", 0))
