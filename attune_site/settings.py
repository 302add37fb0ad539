"""Django settings: embedded defaults with no configuration, real services from the environment.

No variables set: SQLite under ATTUNE_DATA_DIR (default ./data), Celery tasks run
in-process, offline models only. DATABASE_URL selects a real database and
REDIS_URL a real Celery broker and result backend. Secrets and API keys are read
from the environment only.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from datetime import timedelta

import dj_database_url
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from attune_site import log_format, queues
from attune_site.datadir import PSEUDONYM_KEY_FILE, STATIC_SUBDIR, data_dir, resource_dir, stored_secret_key
from attune_site.env import env_bool, env_float, env_int, env_list, env_str
from attune_site.object_store import EXPORTS, export_storage, forget_blank_aws_variables
from attune_site.serving import db_pool_size, stream_slots, web_threads
from attunebench.replay.llm import DEFAULT_PROVIDER_KEY_ENV, never_a_key_env

# Nothing here writes a file or creates a folder: the entry points prepare the
# data directory and its secret key first (attune_site/datadir.py).
DATA_DIR = data_dir()

DEBUG = env_bool("ATTUNE_DEBUG", False)

# From the environment; else the key generated into the data dir by the entry point;
# else (a process started without one) a key that lives as long as this process.
SECRET_KEY = env_str("ATTUNE_SECRET_KEY") or stored_secret_key(DATA_DIR) or secrets.token_urlsafe(50)
# The key of participant pseudonyms in every export (datasets/pseudonyms.py): from the environment, else
# generated into the data dir beside the secret key, else (an unprepared process) derived from SECRET_KEY.
ATTUNE_PSEUDONYM_KEY = (
    env_str("ATTUNE_PSEUDONYM_KEY")
    or stored_secret_key(DATA_DIR, PSEUDONYM_KEY_FILE)
    or hashlib.sha256(("attune-pseudonym-key:" + SECRET_KEY).encode("utf-8")).hexdigest()
)
ALLOWED_HOSTS = env_list("ATTUNE_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("ATTUNE_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    # API tokens kept as digests, with an expiry (research.access.api_tokens); DRF's plain-text tokens are gone.
    "knox",
    "drf_spectacular",
    "django_htmx",
    "axes",
    "csp",
    "attune_site",
    "collection",
    "annotation",
    "datasets",
    "scoring",
    "research",
]

MIDDLEWARE = [
    # First: every line logged while a request is served carries its id (attune_site/log_format.py).
    "attune_site.log_format.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy header on every response (policy below).
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Participant request latency for /metrics (attune_site/request_metrics.py).
    "attune_site.request_metrics.ParticipantLatencyMiddleware",
    # A body over ATTUNE_MAX_REQUEST_BYTES is a 413 before it is read (attune_site/request_limits.py).
    "attune_site.request_limits.RequestSizeLimitMiddleware",
    # A %00 in a path, parameter or field is a 400 here, not a database error later.
    "attune_site.nul_bytes.RejectNulBytesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# django-axes checks every password login (the research login and the admin's) before Django's own backend.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "attune_site.urls"
WSGI_APPLICATION = "attune_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Top level in a checkout, inside the package when installed (attune_site/datadir.py).
        "DIRS": [resource_dir("templates")],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "attune_site.context.site",
            ],
        },
    }
]

SQLITE_PATH = DATA_DIR / "attune.sqlite3"
DATABASE_URL = env_str("DATABASE_URL")
# Connections shared by the threads of one process (Postgres only; the web server turns it on, see
# attune_site/serving.py); 0 keeps one connection per thread for 60 s.
ATTUNE_DB_POOL_SIZE = db_pool_size()


def _database_from_url(url: str) -> dj_database_url.DBConfig:
    if not ATTUNE_DB_POOL_SIZE or not url.startswith(("postgres://", "postgresql://", "pgsql://")):
        return dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    # A pooled connection goes back to the pool at the end of each request (the pool checks it on the
    # way out): Django refuses persistent connections beside a pool.
    database = dj_database_url.parse(url, conn_max_age=0)
    pool = {"min_size": min(2, ATTUNE_DB_POOL_SIZE), "max_size": ATTUNE_DB_POOL_SIZE, "timeout": 30}
    database["OPTIONS"] = {**database.get("OPTIONS", {}), "pool": pool}
    return database


DATABASES = {
    "default": _database_from_url(DATABASE_URL)
    if DATABASE_URL
    else {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": SQLITE_PATH,
        # Several participants press "Next" at once: WAL lets readers run beside the one writer, every
        # transaction takes the write lock when it begins (IMMEDIATE, so a reader never fails upgrading
        # to a writer) and a writer waits up to 30 s for its turn instead of failing with "locked".
        "OPTIONS": {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Checked wherever a password is chosen: the admin's forms and ``attune create_researcher --password``.
# A password like the username, shorter than 12 characters, common or all digits is refused.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [resource_dir("static")]
STATIC_ROOT = DATA_DIR / STATIC_SUBDIR
WHITENOISE_USE_FINDERS = True
# Hashed, compressed names once collectstatic has run; the files as they are before (attune_site/static_storage.py).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "attune_site.static_storage.HashedCompressedStaticFiles"},
}
MEDIA_ROOT = DATA_DIR / "media"
MEDIA_URL = "/media/"

# --- Content-Security-Policy (django-csp) ----------------------------------------------
# Scripts and style sheets come from this site only; an inline <script> or <style> runs only with the
# per-response nonce ({{ request.csp_nonce }}; Attune's pages have none, the API docs load their start-up
# script as a file). Style *attributes* are allowed: the research pages draw progress bars and charts
# with computed widths, and CSS in an attribute cannot run script. Nothing may frame a page, post a
# form elsewhere or load plugins.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

LOGIN_URL = "/research/login/"
LOGIN_REDIRECT_URL = "/research/"

SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# A refused form post gets the calm error page, not Django's developer text.
CSRF_FAILURE_VIEW = "attune_site.errors.csrf_failure"

# --- Production: HTTPS behind a TLS proxy, and no start without a real key ----------
# ATTUNE_PRODUCTION=1 is the switch an operator running a real study turns on; off, the demo is unchanged.
ATTUNE_PRODUCTION = env_bool("ATTUNE_PRODUCTION", False)
# Keys Attune itself has ever shipped or suggested: never a production secret.
KNOWN_PLACEHOLDER_KEYS = frozenset({"collectstatic-only", "change-me", "changeme", "secret", "dev"})
if ATTUNE_PRODUCTION:
    # Both keys from the environment, the same on every host (a key generated into one host's data directory
    # is that host's alone: docs/several-machines.md). Django's own deploy check wants at least 50 characters,
    # 5 of them distinct, and no insecure prefix.
    for _variable in ("ATTUNE_SECRET_KEY", "ATTUNE_PSEUDONYM_KEY"):
        _key = env_str(_variable)
        if not _key:
            raise ImproperlyConfigured(
                f"ATTUNE_PRODUCTION=1 needs {_variable}: set it to a random value of at least 50 characters, the "
                "same on every host, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
            )
        if _key in KNOWN_PLACEHOLDER_KEYS or _key.startswith("django-insecure") or len(_key) < 50 or len(set(_key)) < 5:
            raise ImproperlyConfigured(
                f"ATTUNE_PRODUCTION=1 refuses this {_variable}: it is a placeholder or too weak; use a random "
                "value of at least 50 characters, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
            )
    if not env_list("ATTUNE_ALLOWED_HOSTS"):
        raise ImproperlyConfigured("ATTUNE_PRODUCTION=1 needs ATTUNE_ALLOWED_HOSTS: the study's host name(s)")
    if DEBUG:
        raise ImproperlyConfigured("ATTUNE_PRODUCTION=1 refuses ATTUNE_DEBUG=1: debug pages show settings and code")
# Cookies only over HTTPS: always in production, else on request (behind TLS without the full switch).
SESSION_COOKIE_SECURE = ATTUNE_PRODUCTION or env_bool("ATTUNE_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if ATTUNE_PRODUCTION:
    SECURE_SSL_REDIRECT = True
    # The container health check probes over plain HTTP from inside; it must not be sent to HTTPS.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
    # The TLS proxy terminates HTTPS and says so in this header; it must set (overwrite) it on every request.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = 31_536_000  # one year
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# --- Client addresses behind the TLS proxy ------------------------------------------
# How many proxies in front of Attune append to X-Forwarded-For (production: the one TLS proxy). The
# client is the address the outermost trusted proxy saw; 0 uses the connection's own address. Used by
# the enrolment throttle, the login lockout and the API throttles alike (collection/client_ip.py).
ATTUNE_TRUSTED_PROXIES = env_int("ATTUNE_TRUSTED_PROXIES", 1 if ATTUNE_PRODUCTION else 0, minimum=0, maximum=5)

# --- Login lockout (django-axes) ------------------------------------------------------
# After ATTUNE_LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, that pair is locked
# for ATTUNE_LOGIN_COOLOFF_MINUTES; each further try while locked starts the wait again. Locking the pair
# (not the username alone) means nobody can lock a researcher out from elsewhere; attempts and lockouts
# are in the database (admin: Axes) and work the same on SQLite and PostgreSQL.
AXES_FAILURE_LIMIT = env_int("ATTUNE_LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=100)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("ATTUNE_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "collection.client_ip.client_ip"
AXES_LOCKOUT_CALLABLE = "research.access.lockout.lockout_response"  # 429, Retry-After, a calm page
AXES_DISABLE_ACCESS_LOG = True  # successful logins are not recorded; failures are
AXES_VERBOSE = False

# --- Celery: in-process unless a broker is configured -----------------------
REDIS_URL = env_str("REDIS_URL")
# The in-memory broker named with a host: without one kombu warns "No hostname was supplied" on every run.
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Nothing reads a task's result. Keeping none also means queueing a task never connects to the result
# store: with Redis away, that connection was retried for about 20 s inside the participant's request and
# then left the process unable to queue anything until restarted.
CELERY_TASK_IGNORE_RESULT = True
# Crash safety: a task is acknowledged only when it has finished (acks_late) and put back
# when its worker process dies (reject_on_worker_lost). Redis hands an unacknowledged message out again
# after the visibility timeout; a replayed conversation does not wait for it: its lease (below) lapses
# and the workers' sweeper requeues it, so the timeout is only the broker's own backstop.
ATTUNE_VISIBILITY_TIMEOUT = env_int("ATTUNE_VISIBILITY_TIMEOUT", 900, minimum=1, maximum=86_400)
# A broker that accepts connections but does not answer costs a queueing request seconds, not forever: the
# task is then kept in the database (collection.task_queue) and sent when the broker is back.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": ATTUNE_VISIBILITY_TIMEOUT,
    "socket_connect_timeout": 2,
    "socket_timeout": 10,
}
# Queues by who waits (attune_site/queues.py): what a participant waits on goes to `interactive`, which
# `attune worker` serves with a pool of its own; replays and exports to `bulk`; run scoring to `finalize`.
CELERY_TASK_DEFAULT_QUEUE = queues.DEFAULT
CELERY_TASK_ROUTES = queues.task_routes()
CELERY_TASK_QUEUES = queues.task_queues()

CACHES = {
    # Redis away: reads are misses, writes dropped, a warning logged (attune_site.resilient_cache); pages go on.
    "default": {
        "BACKEND": "attune_site.resilient_cache.ResilientRedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
    if REDIS_URL
    # Per process and bounded: at most 300 entries (reply locks, chat rate counters, dashboard
    # analyses); when full, a third is dropped, so a long-lived web process cannot grow it.
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "OPTIONS": {"MAX_ENTRIES": 300}}
}

# Sessions (a joined participant's browser keeps its study link in one) are read from the shared cache and
# written through to the database: with Redis, a participant page reads no session row (one query fewer on
# every page at a hundred participants), and a flushed cache loses nothing. Without Redis the cache is per
# process, so sessions stay in the database alone.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db" if REDIS_URL else "django.contrib.sessions.backends.db"

# --- REST API ------------------------------------------------------------------


def _rate(name: str, default: str) -> str:
    """A DRF rate such as ``600/minute``: a positive count, a slash, second, minute, hour or day."""
    value = env_str(name, default)
    if not re.fullmatch(r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(
            f"environment variable {name}={value!r} is not a rate: use COUNT/PERIOD with PERIOD second, "
            "minute, hour or day, e.g. 600/minute"
        )
    return value


# API tokens (django-rest-knox): a SHA-512 digest and a lookup prefix are stored, never the key; each token
# expires after the days its researcher chose (research.access.api_tokens.EXPIRY_DAYS), and is not renewed by use.
REST_KNOX = {
    "TOKEN_PREFIX": "attune_",  # says what a leaked key is, to its reader and to secret scanners
    "AUTO_REFRESH": False,
    "TOKEN_TTL": timedelta(days=90),  # a token made without a lifetime; the token page and the API always ask
}
ATTUNE_API_RATE = _rate("ATTUNE_API_RATE", "600/minute")
ATTUNE_API_ANON_RATE = _rate("ATTUNE_API_ANON_RATE", "60/minute")
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "research.access.api_tokens.DigestTokenAuthentication",
    ],
    # The research role, not bare is_staff: views that name no permission (the API root) follow it too.
    "DEFAULT_PERMISSION_CLASSES": ["research.access.checks.IsResearcher"],
    "DEFAULT_PAGINATION_CLASS": "research.api.pagination.CappedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Requests per researcher (per address when not signed in); over it a 429 JSON with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": [
        "research.api.throttles.ResearcherRateThrottle",
        "research.api.throttles.AnonymousRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {"user": ATTUNE_API_RATE, "anon": ATTUNE_API_ANON_RATE},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Attune API",
    "DESCRIPTION": (
        "Research API of the Attune platform (AttuneBench). "
        "Scores are research diagnostics, never clinical certificates."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- Attune ---------------------------------------------------------------------
# --- Email: the safety contact's alerts. Without ATTUNE_EMAIL_HOST they go to the log (the embedded demo). ---
EMAIL_HOST = env_str("ATTUNE_EMAIL_HOST")
EMAIL_PORT = env_int("ATTUNE_EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("ATTUNE_EMAIL_USER")
EMAIL_HOST_PASSWORD = env_str("ATTUNE_EMAIL_PASSWORD")
EMAIL_USE_TLS = env_bool("ATTUNE_EMAIL_TLS", False)
EMAIL_TIMEOUT = 10
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = env_str("ATTUNE_EMAIL_FROM", "attune@localhost")
# Where the site is reached, for links in emails (the safety log).
ATTUNE_SITE_URL = env_str("ATTUNE_SITE_URL", "http://127.0.0.1:8000")

# Offline models only unless explicitly allowed: a demo never spends money.
ATTUNE_ALLOW_LIVE_MODELS = env_bool("ATTUNE_ALLOW_LIVE_MODELS", False)
# An optional moderation model that screens participants' words beside Attune's own offline screen (only when
# live models are allowed): it may add detections, never removes one, and its failures never hold up the chat.
ATTUNE_SAFETY_MODEL = env_str("ATTUNE_SAFETY_MODEL", "")
ATTUNE_SAFETY_MODEL_API_BASE = env_str("ATTUNE_SAFETY_MODEL_API_BASE", "")
ATTUNE_SAFETY_MODEL_TIMEOUT = env_float("ATTUNE_SAFETY_MODEL_TIMEOUT", 4.0, minimum=0.5, maximum=30.0)
# The hand-written example conversations ``attune demo`` loads.
ATTUNE_SAMPLE_DATA_DIR = resource_dir("sample_data")
# Environment variables an evaluated model may name as its key (params.api_key_env); the
# application's own secrets are refused here even when listed, so a typo cannot expose them.
ATTUNE_PROVIDER_KEY_ENV = env_list("ATTUNE_PROVIDER_KEY_ENV", DEFAULT_PROVIDER_KEY_ENV)
if _own_secrets := [name for name in ATTUNE_PROVIDER_KEY_ENV if never_a_key_env(name)]:
    raise ImproperlyConfigured(
        f"environment variable ATTUNE_PROVIDER_KEY_ENV lists {', '.join(_own_secrets)}: the application's own "
        "secrets (ATTUNE_*, SECRET*, DATABASE_URL, REDIS_URL) are never sent to a model"
    )
# Hosts an evaluated model's api_base may name when live models are allowed (empty: none, so
# only the providers' default endpoints are called); loopback needs no entry while live calls are off.
ATTUNE_PROVIDER_HOSTS = [host.lower() for host in env_list("ATTUNE_PROVIDER_HOSTS")]
# --- Request sizes -----------------------------------------------------------------
# The largest legitimate body is an annotation page or a chat message (4,000 characters, at most
# 16 KB in UTF-8) or an API request naming a dataset's conversations: 2.5 MiB holds any of them
# many times over. Attune takes no file uploads, so a file part is refused whatever its size.
ATTUNE_MAX_REQUEST_BYTES = env_int("ATTUNE_MAX_REQUEST_BYTES", 2_621_440, minimum=65_536)
DATA_UPLOAD_MAX_MEMORY_SIZE = ATTUNE_MAX_REQUEST_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = ATTUNE_MAX_REQUEST_BYTES
DATA_UPLOAD_MAX_NUMBER_FIELDS = env_int("ATTUNE_MAX_FORM_FIELDS", 1000, minimum=100)
DATA_UPLOAD_MAX_NUMBER_FILES = 0
ATTUNE_EXPORT_DIR = DATA_DIR / "exports"
# The one store of every file kept for later (attune_site/object_store.py): the data directory's exports
# folder, or an S3-compatible bucket shared by every host (s3://BUCKET[/PREFIX]; boto3's own AWS_* variables).
ATTUNE_STORAGE_URL = env_str("ATTUNE_STORAGE_URL")
forget_blank_aws_variables()
STORAGES = {**STORAGES, EXPORTS: export_storage(ATTUNE_STORAGE_URL, ATTUNE_EXPORT_DIR)}
ATTUNE_RUNS_DIR = DATA_DIR / "runs"
ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE = env_int("ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE", 12, minimum=1)
# Open enrolment (/join/<study>/): new participants per address per hour and per study per hour, over
# a sliding window shared through Redis when configured; a study can also cap its participants (admin).
ATTUNE_ENROL_PER_ADDRESS_PER_HOUR = env_int("ATTUNE_ENROL_PER_ADDRESS_PER_HOUR", 10, minimum=1)
ATTUNE_ENROL_PER_STUDY_PER_HOUR = env_int("ATTUNE_ENROL_PER_STUDY_PER_HOUR", 120, minimum=1)
ATTUNE_CHAT_TIMEOUT_SECONDS = env_float("ATTUNE_CHAT_TIMEOUT_SECONDS", 60.0, minimum=1)
# Streaming replies one process holds at once; the rest of its threads stay free for page loads.
ATTUNE_STREAMS_PER_PROCESS = stream_slots(web_threads())
# Seconds between streamed lines of the offline scripted model (0 in tests that need speed).
ATTUNE_OFFLINE_STREAM_DELAY = env_float("ATTUNE_OFFLINE_STREAM_DELAY", 0.03, minimum=0)
# Test switch: the offline model fails on purpose, to exercise the participant's retry path.
ATTUNE_OFFLINE_MODEL_FAILS = False
# Model for the "improved reply" rewrite; blank uses the conversation's own model when live.
ATTUNE_ALTERNATE_MODEL = env_str("ATTUNE_ALTERNATE_MODEL")
ATTUNE_ALTERNATE_API_BASE = env_str("ATTUNE_ALTERNATE_API_BASE")
# When the live participant chat calls a provider a replay also calls, the replay takes at most this share of
# that model's max_concurrency and requests per minute, leaving the rest to participants (scoring/replay_service.py).
ATTUNE_REPLAY_PROVIDER_SHARE = env_float("ATTUNE_REPLAY_PROVIDER_SHARE", 0.8, minimum=0.05, maximum=1.0)
# Model calls in flight at once in one worker process, across every conversation it replays.
ATTUNE_REPLAY_CONCURRENCY = env_int("ATTUNE_REPLAY_CONCURRENCY", 32, minimum=1, maximum=1024)
# Without a Celery worker (tasks run eagerly, in the process that sends them), a run started from the
# launcher or the API is replayed by background threads of the web process (scoring/embedded_runs.py), so
# the request returns at once. The test suite turns it off, as it turns Celery's eager mode on.
ATTUNE_EMBEDDED_RUNS_IN_BACKGROUND = True
# A worker holds a lease on each conversation it replays and renews it every quarter of this time;
# a conversation whose lease has lapsed (its worker died) is requeued by any live worker's sweeper.
ATTUNE_REPLAY_LEASE_SECONDS = env_int("ATTUNE_REPLAY_LEASE_SECONDS", 60, minimum=2, maximum=3600)
# A Celery worker's provider calls go through its call courier (scoring/call_courier.py), a process that
# outlives the worker: a crash then loses no answer already paid for. Needs Redis (the journal).
ATTUNE_CALL_COURIER = env_bool("ATTUNE_CALL_COURIER", True) and bool(REDIS_URL)
# /metrics answers this machine, or a request with "Authorization: Bearer <this token>" (attune_site/metrics.py).
ATTUNE_METRICS_TOKEN = env_str("ATTUNE_METRICS_TOKEN")
ATTUNE_LOG_LEVEL = log_format.level_from_env()

# Plain lines, or one JSON object per line; the same format in gunicorn, Django, Celery and litellm, each line
# with the request id of the work it belongs to (attune_site/log_format.py).
ATTUNE_LOG_FORMAT = log_format.format_from_env()
LOGGING = log_format.logging_config(ATTUNE_LOG_LEVEL, ATTUNE_LOG_FORMAT)
# Celery keeps this configuration instead of installing its own handler and format on the root logger.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
