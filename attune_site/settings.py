"""Django settings: embedded defaults with no configuration, real services from the environment.

No variables set: SQLite under ATTUNE_DATA_DIR (default ./data), Celery tasks run
in-process, offline models only. DATABASE_URL selects a real database and
REDIS_URL a real Celery broker and result backend. Secrets and API keys are read
from the environment only.
"""

from __future__ import annotations

import os
import secrets

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from attune_site.datadir import STATIC_SUBDIR, data_dir, resource_dir, stored_secret_key
from attune_site.env import env_bool, env_float, env_int, env_list, env_str
from attunebench.replay.llm import DEFAULT_PROVIDER_KEY_ENV, never_a_key_env

# Nothing here writes a file or creates a folder: the entry points prepare the
# data directory and its secret key first (attune_site/datadir.py).
DATA_DIR = data_dir()

DEBUG = env_bool("ATTUNE_DEBUG", False)

# From the environment; else the key generated into the data dir by the entry point;
# else (a process started without one) a key that lives as long as this process.
SECRET_KEY = env_str("ATTUNE_SECRET_KEY") or stored_secret_key(DATA_DIR) or secrets.token_urlsafe(50)
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
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_htmx",
    "attune_site",
    "collection",
    "annotation",
    "datasets",
    "scoring",
    "research",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
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
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
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
MEDIA_ROOT = DATA_DIR / "media"
MEDIA_URL = "/media/"

LOGIN_URL = "/research/login/"
LOGIN_REDIRECT_URL = "/research/"

SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# --- Production: HTTPS behind a TLS proxy, and no start without a real key ----------
# ATTUNE_PRODUCTION=1 is the switch an operator running a real study turns on; off, the demo is unchanged.
ATTUNE_PRODUCTION = env_bool("ATTUNE_PRODUCTION", False)
# Keys Attune itself has ever shipped or suggested: never a production secret.
KNOWN_PLACEHOLDER_KEYS = frozenset({"collectstatic-only", "change-me", "changeme", "secret", "dev"})
if ATTUNE_PRODUCTION:
    _key = env_str("ATTUNE_SECRET_KEY")
    # Django's own deploy check wants at least 50 characters, 5 of them distinct, and no insecure prefix.
    if not _key:
        raise ImproperlyConfigured(
            "ATTUNE_PRODUCTION=1 needs ATTUNE_SECRET_KEY: set it to a random value of at least 50 characters, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    if _key in KNOWN_PLACEHOLDER_KEYS or _key.startswith("django-insecure") or len(_key) < 50 or len(set(_key)) < 5:
        raise ImproperlyConfigured(
            "ATTUNE_PRODUCTION=1 refuses this ATTUNE_SECRET_KEY: it is a placeholder or too weak; use a random "
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
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    # The TLS proxy terminates HTTPS and says so in this header; it must set (overwrite) it on every request.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = 31_536_000  # one year
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# --- Celery: in-process unless a broker is configured -----------------------
REDIS_URL = env_str("REDIS_URL")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Crash safety (issue 16): a task is acknowledged only when it has finished (acks_late) and put back
# when its worker process dies (reject_on_worker_lost). Redis hands an unacknowledged message out again
# after the visibility timeout; a replayed conversation does not wait for it: its lease (below) lapses
# and the workers' sweeper requeues it, so the timeout is only the broker's own backstop.
ATTUNE_VISIBILITY_TIMEOUT = env_int("ATTUNE_VISIBILITY_TIMEOUT", 900, minimum=1, maximum=86_400)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": ATTUNE_VISIBILITY_TIMEOUT}
# Finishing a run (scoring it) has a queue of its own, so it never waits behind other runs' conversations;
# `attune worker` consumes both queues.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_ROUTES = {"scoring.finalize_run": {"queue": "finalize"}, "scoring.rescore_run": {"queue": "finalize"}}

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    # Per process and bounded: at most 300 entries (reply locks, chat rate counters, dashboard
    # analyses); when full, a third is dropped, so a long-lived web process cannot grow it.
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "OPTIONS": {"MAX_ENTRIES": 300}}
}

# --- REST API ------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    # The research role, not bare is_staff: views that name no permission (the API root) follow it too.
    "DEFAULT_PERMISSION_CLASSES": ["research.access.IsResearcher"],
    "DEFAULT_PAGINATION_CLASS": "research.pagination.CappedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
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
# Offline models only unless explicitly allowed: a demo never spends money.
ATTUNE_ALLOW_LIVE_MODELS = env_bool("ATTUNE_ALLOW_LIVE_MODELS", False)
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
ATTUNE_RUNS_DIR = DATA_DIR / "runs"
ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE = env_int("ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE", 12, minimum=1)
ATTUNE_CHAT_TIMEOUT_SECONDS = env_float("ATTUNE_CHAT_TIMEOUT_SECONDS", 60.0, minimum=1)
# Seconds between streamed lines of the offline scripted model (0 in tests that need speed).
ATTUNE_OFFLINE_STREAM_DELAY = env_float("ATTUNE_OFFLINE_STREAM_DELAY", 0.03, minimum=0)
# Test switch: the offline model fails on purpose, to exercise the participant's retry path.
ATTUNE_OFFLINE_MODEL_FAILS = False
# Model for the "improved reply" rewrite; blank uses the conversation's own model when live.
ATTUNE_ALTERNATE_MODEL = env_str("ATTUNE_ALTERNATE_MODEL")
ATTUNE_ALTERNATE_API_BASE = env_str("ATTUNE_ALTERNATE_API_BASE")
# Model calls in flight at once in one worker process, across every conversation it replays.
ATTUNE_REPLAY_CONCURRENCY = env_int("ATTUNE_REPLAY_CONCURRENCY", 32, minimum=1, maximum=1024)
# A worker holds a lease on each conversation it replays and renews it every quarter of this time;
# a conversation whose lease has lapsed (its worker died) is requeued by any live worker's sweeper.
ATTUNE_REPLAY_LEASE_SECONDS = env_int("ATTUNE_REPLAY_LEASE_SECONDS", 60, minimum=2, maximum=3600)
ATTUNE_LOG_LEVEL = env_str("ATTUNE_LOG_LEVEL", "WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": ATTUNE_LOG_LEVEL},
    "loggers": {"attune": {"level": ATTUNE_LOG_LEVEL}},
}

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
