"""How the web server is sized: read by the gunicorn config and by the settings, so both agree.

Why gunicorn with threaded workers (``gthread``), not ASGI or gevent:

- A streaming reply spends seconds waiting on the provider and little CPU: the chat
  loop hands it to its thread in 50 ms batches, so the thread wakes about 20 times a
  second whatever the provider's token rate. A thread that waits costs a small stack
  and no CPU, so a worker process with 200 threads (the default) holds 160 streams,
  and four workers hold a panel of 300 participants replying at once even when one
  worker takes more than its share, while the other threads serve page loads
  (docs/deployment.md has the measurements).
- Two processes per core rather than one: every thread of a process shares one
  interpreter lock, and a page request that waits on Postgres a dozen times queues
  for that lock after each wait behind the process's other busy threads. Spread over
  more processes, the operating system's scheduler shares the cores instead, and a
  measured panel of 200 participants saw its slowest annotation submits (p95) take
  about a third less time with 4 × 200 threads than with 2 × 400.
- Under ASGI, Django runs every *sync* view in one thread per process
  (``thread_sensitive``), so all participant pages, which are sync, would queue
  behind one another; making them async would mean rewriting every view and the ORM
  calls under them.
- gevent needs monkeypatching, which psycopg 3 does not support, and Attune patches
  nothing in Python's runtime (README).

A streaming reply gives its database connection back before it waits on the
provider and takes one again only to save the reply (collection/views.py), and
the web workers share a bounded pool of connections per process, so the number
of Postgres connections stays at workers × pool size however many streams are
in flight. Each process keeps some threads for page loads: replies beyond
:func:`stream_slots` get the participant's calm "try again" message at once
instead of taking the last free thread, so a hung provider can never block
other participants' page loads.
"""

from __future__ import annotations

from attune_site.env import env_int, env_str
from attunebench.machine import usable_cores

#: Database connections shared by all the web processes of a host when no pool size is set.
WEB_CONNECTIONS = 48


def web_workers() -> int:
    """Worker processes. With Redis, two per core (at least 2, at most 8); one without, because the reply
    locks and chat rate limits then live in a per-process cache and must be seen by every request."""
    default = min(8, max(2, 2 * usable_cores())) if env_str("REDIS_URL") else 1
    return env_int("ATTUNE_WEB_WORKERS", default, minimum=1, maximum=64)


def web_threads() -> int:
    """Threads per worker process: each holds one request (a streaming reply holds it for the reply)."""
    return env_int("ATTUNE_WEB_THREADS", 200, minimum=4, maximum=1000)


def web_pool_size(workers: int) -> int:
    """The web server's default pool per process: :data:`WEB_CONNECTIONS` shared out, 5 to 20 each, so more
    processes do not open more connections than Postgres's default ``max_connections`` (100) allows."""
    return min(20, max(5, WEB_CONNECTIONS // workers))


def reserved_threads(threads: int) -> int:
    """Threads per process that a streaming reply may never take: they serve page loads and form posts."""
    return max(2, threads // 5)


def stream_slots(threads: int) -> int:
    """Streaming replies one process holds at once."""
    return threads - reserved_threads(threads)


def db_pool_size() -> int:
    """Postgres connections one process shares between its threads (0: a connection per thread, kept 60 s).

    The web server turns the pool on (attune_site/gunicorn_conf.py): with a connection per thread, 2 workers
    × 100 threads could open 200 connections, twice Postgres's default ``max_connections``.
    """
    return env_int("ATTUNE_DB_POOL_SIZE", 0, minimum=0, maximum=500)
