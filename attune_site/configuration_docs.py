"""What each environment variable does, for the generated configuration reference.

The variable's type, default and accepted range are read from the code that parses it (the ``env_*``
calls in ``attune_site``), so only the meaning is written here; a test fails when a variable the code reads
has no entry, or an entry names a variable nothing reads.
"""

from __future__ import annotations

# A group of variables that share one meaning is listed under each name with the same text.
DESCRIPTIONS: dict[str, str] = {
    "DATABASE_URL": "Database to use, e.g. `postgresql://user@host:5432/attune` (Postgres in production). "
    "Unset: SQLite under the data directory, in WAL mode, each transaction waiting up to 30 s for the write lock.",
    "REDIS_URL": "Celery broker and result backend, the shared call cache, sessions, rate-limit windows and each "
    "evaluated model's requests-per-minute and in-flight caps shared by all workers; tasks then need "
    "`attune worker`. Unset: tasks run in-process.",
    "ATTUNE_DATA_DIR": "Where the SQLite file, keys, exports and run files live (default `data/`: beside the code "
    "in a checkout, in the working directory when installed). Folders are created 0700, files 0600.",
    "ATTUNE_PSEUDONYM_KEY": "Key of the participant pseudonyms every export writes (default: generated once into "
    "`pseudonym_key` in the data directory; keep it, or pseudonyms change between exports). Required, at least "
    "50 characters, with `ATTUNE_PRODUCTION`; every host of a deployment must have the same one, and a process "
    "whose key differs from the one the database recorded refuses to start.",
    "ATTUNE_SECRET_KEY": "Django secret key (default: generated once into `secret_key` in the data directory when "
    "`attune`, `manage.py` or the WSGI application starts). Required, at least 50 characters, with "
    "`ATTUNE_PRODUCTION`.",
    "ATTUNE_DEBUG": "Django debug pages. Never on in a deployment (`ATTUNE_PRODUCTION` refuses it).",
    "ATTUNE_PRODUCTION": "A real deployment behind a TLS proxy (on in `docker-compose.yml`): secure cookies, HSTS "
    "(one year, subdomains, preload), the redirect to HTTPS (except `/healthz`), `X-Forwarded-Proto` trusted "
    "from the proxy; refuses to start without `ATTUNE_SECRET_KEY`, without `ATTUNE_ALLOWED_HOSTS`, or with "
    "`ATTUNE_DEBUG` on. `attune check --deploy --fail-level WARNING` then passes.",
    "ATTUNE_SECURE_COOKIES": "Session and CSRF cookies only over HTTPS (always on with `ATTUNE_PRODUCTION`).",
    "ATTUNE_ALLOWED_HOSTS": "Host names the site answers to, comma-separated.",
    "ATTUNE_CSRF_TRUSTED_ORIGINS": "Origins (`https://host`) trusted for form posts, comma-separated.",
    "ATTUNE_ALLOW_LIVE_MODELS": "The participant chat, suggested rewrites and runs may call real providers through "
    "litellm. Off: offline models, and evaluated models on this machine, only.",
    "ATTUNE_SAFETY_MODEL": "A moderation model (OpenAI moderation API, e.g. `omni-moderation-latest`) that screens "
    "every participant message and free-text answer through litellm beside Attune's own offline screen, only when "
    "`ATTUNE_ALLOW_LIVE_MODELS` is on. It can add detections (self-harm intent: urgent; self-harm, violence: "
    "concern), never removes one; a timeout or error is logged, shown on the safety log page, and the chat goes "
    "on. Its key is `OPENAI_API_KEY`. Unset: the offline screen alone.",
    "ATTUNE_SAFETY_MODEL_API_BASE": "Address of the moderation endpoint for `ATTUNE_SAFETY_MODEL` (an "
    "OpenAI-compatible `/v1`); unset: OpenAI's.",
    "ATTUNE_SAFETY_MODEL_TIMEOUT": "Seconds a message waits for the moderation model before the chat goes on "
    "without it (no retries).",
    "ATTUNE_PROVIDER_KEY_ENV": "Environment variables an evaluated model may name as its key in "
    "`params.api_key_env`. Naming `ATTUNE_*`, `SECRET*`, `DATABASE_URL` or `REDIS_URL` stops start-up. Keys are "
    "never stored with a model.",
    "ATTUNE_PROVIDER_HOSTS": "Host names an evaluated model's `api_base` may point at when live models are allowed "
    "(default none: only the providers' own endpoints; a model on this machine is accepted while live models are "
    "off). A model with its own `api_base` is sent only the key its `api_key_env` names.",
    "ATTUNE_CHAT_RATE_LIMIT_PER_MINUTE": "Participant chat messages per minute.",
    "ATTUNE_ENROL_PER_ADDRESS_PER_HOUR": "New participants one address may start through a study's open enrolment "
    "link in any hour (a sliding window); over it the join page asks them to try again later (429 with "
    "`Retry-After`) and records nothing.",
    "ATTUNE_ENROL_PER_STUDY_PER_HOUR": "New participants one study takes through open enrolment in any hour (a "
    "sliding window, shared by every web worker through Redis). A study can also cap its participants.",
    "ATTUNE_TRUSTED_PROXIES": "Proxies in front of Attune that append to `X-Forwarded-For` (default 1 with "
    "`ATTUNE_PRODUCTION`, else 0): the client address the throttles and the login lockout count is the one the "
    "outermost of them saw.",
    "ATTUNE_LOGIN_FAILURE_LIMIT": "Wrong passwords for one username from one address before that pair is locked "
    "(research and admin logins alike); the locked page is a 429 with `Retry-After`.",
    "ATTUNE_LOGIN_COOLOFF_MINUTES": "How long a locked username and address wait; each try while locked starts the "
    "wait again.",
    "ATTUNE_API_RATE": "API requests per researcher account, as `COUNT/PERIOD` with `second`, `minute`, `hour` or "
    "`day`; over it the API answers 429 JSON with `Retry-After`.",
    "ATTUNE_API_ANON_RATE": "API requests per address without an account, as `COUNT/PERIOD`.",
    "ATTUNE_CHAT_TIMEOUT_SECONDS": "How long a participant waits for a live reply before the retry message: the "
    "whole reply must arrive within it, however slowly a provider trickles.",
    "ATTUNE_OFFLINE_STREAM_DELAY": "Seconds between streamed lines of the offline scripted model.",
    "ATTUNE_ALTERNATE_MODEL": "litellm model for the suggested rewrite a participant may edit (default: the "
    "conversation's own model).",
    "ATTUNE_ALTERNATE_API_BASE": "Endpoint of `ATTUNE_ALTERNATE_MODEL`.",
    "ATTUNE_REPLAY_CONCURRENCY": "Model calls in flight at once in one worker process.",
    "ATTUNE_CALL_COURIER": "With `REDIS_URL`, each worker process makes its provider calls through a call courier "
    "that outlives it: after a `kill -9` the courier finishes the calls in flight and journals their answers, "
    "and the replay that takes over uses them instead of paying again. `0` makes the calls in the worker.",
    "ATTUNE_REPLAY_LEASE_SECONDS": "A worker replaying a conversation holds a lease on it, renewed every quarter "
    "of this time; once it lapses, any live worker's sweeper requeues the conversation.",
    "ATTUNE_VISIBILITY_TIMEOUT": "Seconds before Redis hands an unacknowledged task to another worker; replayed "
    "conversations come back sooner through their leases, so this is only the broker's backstop.",
    "ATTUNE_MAX_REQUEST_BYTES": "Largest request body accepted; a larger one is refused with 413 before it is "
    "read. File uploads are refused whatever their size.",
    "ATTUNE_MAX_FORM_FIELDS": "Most fields one form or query string may carry; more is a 400.",
    "ATTUNE_WEB_WORKERS": "Web server processes (default with `REDIS_URL`: two per usable core, 2 to 8; else 1: "
    "without Redis the reply locks and chat rate limits live in one process's memory).",
    "ATTUNE_WEB_THREADS": "Threads per web process. A streaming reply holds one thread while it waits; a fifth of "
    "them (at least 2) are kept for page loads, and a reply beyond the rest gets the retry message at once "
    "([Serving many participants](../participant-load.md)).",
    "ATTUNE_DB_POOL_SIZE": "Postgres connections each process shares between its threads (the web server, "
    "`attune serve` and compose share 48 between their processes, 5 to 20 each; 0 is one connection per thread, "
    "kept 60 s).",
    "ATTUNE_LOG_LEVEL": "Log level of Attune's loggers.",
    "ATTUNE_EMAIL_HOST": "Mail server that emails a study's safety contact when a participant may be at risk; "
    "unset, the emails go to the log.",
    "ATTUNE_EMAIL_PORT": "Port of `ATTUNE_EMAIL_HOST`.",
    "ATTUNE_EMAIL_USER": "Login at `ATTUNE_EMAIL_HOST`.",
    "ATTUNE_EMAIL_PASSWORD": "Password at `ATTUNE_EMAIL_HOST`.",
    "ATTUNE_EMAIL_TLS": "STARTTLS to `ATTUNE_EMAIL_HOST`.",
    "ATTUNE_EMAIL_FROM": "Sender address of the safety emails.",
    "ATTUNE_SITE_URL": "The address the site is reached at, for links in emails.",
    "ATTUNE_REPLAY_PROVIDER_SHARE": "Share of an evaluated model's `max_concurrency` and requests per minute a "
    "replay may use when the live participant chat calls the same provider: the rest is the participants' "
    "headroom.",
    "ATTUNE_LOG_FORMAT": "`plain`, or `json`: one JSON object per line from gunicorn, Django, Celery and litellm "
    "alike, each with the request id of the work it belongs to ([Operations](../operations.md)).",
    "ATTUNE_METRICS_TOKEN": "Bearer token that lets a scraper elsewhere read `/metrics` (unset: only this "
    "machine, unproxied, may).",
    "ATTUNE_STORAGE_URL": "Where kept files (dataset exports) are stored: `s3://BUCKET[/PREFIX]` for an "
    "S3-compatible bucket every host shares, its credentials, address and region read by boto3 itself "
    "(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`, `AWS_DEFAULT_REGION`). Unset: the data "
    "directory's `exports/` folder ([Several machines](../several-machines.md)).",
}
