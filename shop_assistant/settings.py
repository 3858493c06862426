"""Django settings, read from the environment.

Embedded defaults (nothing set): SQLite in ``var/``, in-memory channel layer, Celery tasks run eagerly,
the bundled model on the CPU. Set ``DATABASE_URL`` and ``REDIS_URL`` for the full stack.
With ``DEBUG`` off, a missing ``SECRET_KEY`` (or ``SECRET_KEY_FILE``) stops the process instead of running with a
guessable key; what is missing is said in one line (``environment.MissingSetting``).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

from catalog import outbound as _outbound  # plain module: checks the catalog's outbound settings below
from shop_assistant.environment import MissingSetting, secret_key_from_file
from shop_assistant.runtime.proxy import parse_networks

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SHOP_ASSISTANT_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else default
    except ValueError:
        raise MissingSetting(f"{name} must be a whole number, not {value!r}") from None


def env_float(name: str, default: float | None) -> float | None:
    value = os.environ.get(name, "").strip()
    try:
        return float(value) if value else default
    except ValueError:
        raise MissingSetting(f"{name} must be a number, not {value!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name, "").strip()
    return [item.strip() for item in value.split(",") if item.strip()] if value else default


DEBUG = env_bool("DEBUG", False)
# SECRET_KEY, or SECRET_KEY_FILE: a file holding it, made once (random, mode 0600) when missing; scripts/run.sh
# keeps one in var/. With DEBUG on, var/secret_key. Kept in a file so that sessions survive a restart.
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY and os.environ.get("SECRET_KEY_FILE"):
    SECRET_KEY = secret_key_from_file(BASE_DIR / os.environ["SECRET_KEY_FILE"])
if not SECRET_KEY:
    if not DEBUG:
        raise MissingSetting(
            "SECRET_KEY is not set: set SECRET_KEY (a long random string) or SECRET_KEY_FILE (a file to keep one "
            "in), or DEBUG=1 for development."
        )
    SECRET_KEY = secret_key_from_file(VAR_DIR / "secret_key")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Sites (scheme://host[:port]) that embed the chat widget; the websocket refuses other origins.
WIDGET_ALLOWED_ORIGINS = env_list("WIDGET_ALLOWED_ORIGINS", [])
# The reverse proxies whose X-Forwarded-For is believed (addresses or networks, comma-separated): a request from
# any other peer keeps its own address, whatever headers it sends (shop_assistant/runtime/proxy.py). Loopback by
# default: an nginx on the same host; docker-compose.yml names its private network; `none`: no proxy is trusted.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", ["127.0.0.1/32", "::1/128"])
if os.environ.get("TRUSTED_PROXIES", "").strip().lower() == "none":
    TRUSTED_PROXIES = []
try:
    parse_networks(TRUSTED_PROXIES)  # a typo stops the start, not every request
except ValueError as error:
    raise MissingSetting(f"TRUSTED_PROXIES: {error}") from None

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "catalog",
    "shop_assistant.chat",
    "shop_assistant.console",
    "shop_assistant.prompts",
    "shop_assistant.studio",
    "shop_assistant.api",
    "shop_assistant.ops",
    "shop_assistant.evaluation",
    "shop_assistant.demo",
    "shop_assistant.orders",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Cache-Control: no-store on the console, studio, admin and login pages, on every answer they give.
    "shop_assistant.ops.middleware.StaffPagesNoStoreMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # A read-only or unreachable database: a 503 page, not a 500 traceback (its process_exception only).
    "shop_assistant.ops.middleware.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into a 429 page.
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out login before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "shop_assistant.urls"
ASGI_APPLICATION = "shop_assistant.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # Channels consumers and Celery eager tasks write from several threads at once. WAL lets readers go on
    # while one writes; IMMEDIATE transactions take the write lock up front, so a writer waits its turn (busy
    # timeout) instead of failing with "database is locked" when a read lock cannot be upgraded.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": env_int("SQLITE_BUSY_TIMEOUT", 30),
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# The languages the chat answers in (catalog.language detects them in the shopper's message; the answer is composed
# under translation.override, shop_assistant/chat/guard/pipeline.py). No LocaleMiddleware: the site's pages stay in
# LANGUAGE_CODE, only the chat's answers are translated.
LANGUAGES = [("en", "English"), ("es", "Spanish"), ("fr", "French"), ("de", "German")]
LOCALE_PATHS = [BASE_DIR / "shop_assistant" / "locale"]
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
# In development WhiteNoise serves straight from the finders, so no collectstatic is needed.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/console/"  # agents and owners alike; the console links owners to the studio
LOGOUT_REDIRECT_URL = "login"

# --- Redis: channel layer and Celery broker --------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # channels-redis, but a Redis outage degrades agent features instead of closing every socket.
            "BACKEND": "shop_assistant.runtime.layers.ResilientRedisChannelLayer",
            # redis-py 8 reads with a 5 s timeout by default, the same as channels-redis's blocking receive:
            # without a longer one, every websocket idle for 5 s dies.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
# The studio scores every version it publishes on the store's evaluation questions, after the publish, on the web
# process's scoring thread (studio.tasks), and holds back a draft whose score is worse than the published one's.
# STUDIO_SCORE_BEFORE_PUBLISH is this setting's earlier name, still read.
STUDIO_SCORE_ON_PUBLISH = env_bool("STUDIO_SCORE_ON_PUBLISH", env_bool("STUDIO_SCORE_BEFORE_PUBLISH", True))
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_TRACK_STARTED = True
CELERY_TASK_ACKS_LATE = True
# A worker child killed mid-task (OOM, SIGKILL) puts its message back on the queue instead of acking it.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Fail fast when the broker is down so callers can fall back instead of hanging a websocket.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}
# celery -A shop_assistant beat: delete conversations older than their store's retention_days, every night.
CELERY_BEAT_SCHEDULE = {
    "console-retention": {"task": "console.apply_retention", "schedule": 24 * 3600.0},
    # The studio's scheduled catalog syncs: every check queues the sources whose next sync is due.
    "catalog-scheduled-syncs": {
        "task": "catalog.run_scheduled_syncs",
        "schedule": float(os.environ.get("CATALOG_SYNC_CHECK_SECONDS", "60")),
    },
    # The studio's scheduled order imports, by the same check (shop_assistant/orders/tasks.py).
    "orders-scheduled-imports": {
        "task": "orders.run_scheduled_imports",
        "schedule": float(os.environ.get("CATALOG_SYNC_CHECK_SECONDS", "60")),
    },
}
# Orders (shop_assistant/orders; docs/operations.md, "Orders: the owner's webhook and the shopper's email"): an
# owner's webhook gets ORDERS_WEBHOOK_ATTEMPTS tries, waits doubling from ORDERS_WEBHOOK_RETRY_WAIT seconds, each
# POST cut after ORDERS_WEBHOOK_TIMEOUT seconds; where it may connect is CATALOG_FEED_ALLOWED_NETWORKS' decision.
# With eager tasks (no REDIS_URL) the orders' tasks run on a background thread of the web process, not in the
# agent's request (ORDERS_TASKS_IN_THREAD).
ORDERS_WEBHOOK_ATTEMPTS = env_int("ORDERS_WEBHOOK_ATTEMPTS", 5)
ORDERS_WEBHOOK_RETRY_WAIT = env_float("ORDERS_WEBHOOK_RETRY_WAIT", 2.0)
ORDERS_WEBHOOK_TIMEOUT = env_float("ORDERS_WEBHOOK_TIMEOUT", 10.0)
ORDERS_TASKS_IN_THREAD = env_bool("ORDERS_TASKS_IN_THREAD", True)
# The outcome of a request mailed to a shopper who left the chat: Django's email settings, from the environment
# (the console backend, which prints the email to the log, unless EMAIL_BACKEND says otherwise).
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "shop-assistant@localhost")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 30)

# Where catalog imports started from the studio may connect: the operator's decision, not a store owner's
# (catalog/outbound.py; docs/operations.md, "Outbound connections"). CATALOG_SQL_HOSTS: the database servers
# SQL sources may read, host[:port][/database] each (empty: SQL sources are off). CATALOG_FEED_ALLOWED_NETWORKS:
# networks (CIDR) feed URLs may reach besides the public internet (empty: public addresses only).
CATALOG_SQL_HOSTS = env_list("CATALOG_SQL_HOSTS", [])
CATALOG_FEED_ALLOWED_NETWORKS = env_list("CATALOG_FEED_ALLOWED_NETWORKS", [])
try:
    _outbound.parse_sql_hosts(CATALOG_SQL_HOSTS)
    _outbound.parse_networks(CATALOG_FEED_ALLOWED_NETWORKS)
except ValueError as exc:
    raise MissingSetting(str(exc)) from None

# --- Engine (inference/) -------------------------------------------------------------------
# Keys are inference.EngineConfig fields. Only what the environment sets is passed: every default is the
# engine's own (inference/core/config.py), so there is one set of defaults.
def _env_flag(name: str) -> bool | None:
    return env_bool(name) if os.environ.get(name, "").strip() else None


ENGINE = {
    "model": os.environ.get("ENGINE_MODEL") or None,
    "device": os.environ.get("ENGINE_DEVICE") or None,
    "dtype": os.environ.get("ENGINE_DTYPE") or None,
    "quantization": os.environ.get("ENGINE_QUANTIZATION", "").strip().lower() or None,
    "attention_backend": os.environ.get("ENGINE_ATTENTION_BACKEND") or None,
    "kv_cache_memory": env_int("ENGINE_KV_CACHE_MEMORY", None),
    "gpu_memory_utilization": env_float("ENGINE_GPU_MEMORY_UTILIZATION", None),
    "max_model_len": env_int("ENGINE_MAX_MODEL_LEN", None),
    "max_num_seqs": env_int("ENGINE_MAX_NUM_SEQS", None),
    "max_num_batched_tokens": env_int("ENGINE_MAX_NUM_BATCHED_TOKENS", None),
    "block_size": env_int("ENGINE_BLOCK_SIZE", None),
    "enable_prefix_caching": _env_flag("ENGINE_ENABLE_PREFIX_CACHING"),
    "tensor_parallel_size": env_int("ENGINE_TENSOR_PARALLEL_SIZE", None),
}
# Start loading the engine when the web process starts (shop_assistant.startup; off in tests that do not chat).
ENGINE_AUTOSTART = env_bool("ENGINE_AUTOSTART", True)

# --- Nodes: several daphne processes behind nginx (deploy/nginx.conf, docs/operations.md) ------------------
# This node's name in /metrics (the `node` label), the chat's `ready` frame and the studio's pre-warm status;
# empty: the host's name (a container's id under compose unless set).
NODE_NAME = os.environ.get("NODE_NAME", "").strip()
# How often a node says it is alive; one silent for three beats no longer counts in "pre-warmed on n of m nodes".
NODE_HEARTBEAT_SECONDS = env_float("NODE_HEARTBEAT_SECONDS", 10.0)
# Whether a process that serves chats (the ASGI app with the engine) joins the nodes: pre-warms the published
# prompts once its model is loaded and listens for publishes. Off in the test process, whose tests start and stop
# a node themselves (a listener thread left running would query the test database between tests).
NODE_LISTENER = env_bool("NODE_LISTENER", True)
# A node that starts pre-warms this many published prompts (the most recently published first); 0: none.
PREWARM_ON_START_MAX_STORES = env_int("PREWARM_ON_START_MAX_STORES", 50)

# --- Chat limits ---------------------------------------------------------------------------
# Who turns a shopper's message into tool calls (shop_assistant/chat/answers/understanding.py): "auto" asks the
# engine's model when it can plan (its chat template has a tools branch) and the patterns did not recognise the
# message; "model" asks it for every message; "rules" never.
ANSWER_PLANNER = os.environ.get("ANSWER_PLANNER", "auto").strip().lower()
if ANSWER_PLANNER not in {"auto", "model", "rules"}:
    raise MissingSetting(f"ANSWER_PLANNER must be auto, model or rules, not {ANSWER_PLANNER!r}")

CHAT = {
    "max_message_chars": env_int("CHAT_MAX_MESSAGE_CHARS", 2000),
    "messages_per_minute": env_int("CHAT_MESSAGES_PER_MINUTE", 20),
    # Decoding defaults for every store that leaves its own field empty (see shop_assistant/chat/guard/decoding.py
    # for how they were chosen); CHAT_SEED makes sampling reproducible.
    "max_tokens": env_int("CHAT_MAX_TOKENS", 120),
    "temperature": env_float("CHAT_TEMPERATURE", 0.2),
    "repetition_penalty": env_float("CHAT_REPETITION_PENALTY", 1.15),
    "frequency_penalty": env_float("CHAT_FREQUENCY_PENALTY", 0.3),
    "presence_penalty": env_float("CHAT_PRESENCE_PENALTY", 0.0),
    "seed": env_int("CHAT_SEED", None),
    # Continuations sampled per checked answer; the one with the most supported sentences is shown.
    "candidates": env_int("CHAT_CANDIDATES", 1),
}

# Abuse limits shared by every process through Redis when REDIS_URL is set (in-process otherwise), keyed by
# client IP and by store, so reconnecting does not reset them. 0 turns a limit off.
CHAT_LIMITS = {
    "messages_per_minute_per_ip": env_int("CHAT_MESSAGES_PER_MINUTE_PER_IP", 60),
    "messages_per_minute_per_store": env_int("CHAT_MESSAGES_PER_MINUTE_PER_STORE", 3000),
    "connections_per_ip": env_int("CHAT_CONNECTIONS_PER_IP", 20),
    "connections_per_store": env_int("CHAT_CONNECTIONS_PER_STORE", 2000),
}
# Messages that could not reach the database (after retries) wait in this file until it is back.
CHAT_SPOOL_DIR = Path(os.environ.get("CHAT_SPOOL_DIR", VAR_DIR / "spool"))
CHAT_WRITE_RETRIES = env_int("CHAT_WRITE_RETRIES", 4)  # direct-write attempts, backoff 0.1 s doubling
# How long a shopper's message (or an answer) waits for its database write before it goes to the spool instead and
# the chat goes on (a locked SQLite, a stuck PostgreSQL); the write is replayed from the spool later, once per id.
CHAT_WRITE_TIMEOUT = env_float("CHAT_WRITE_TIMEOUT", 2.0)
if not CHAT_WRITE_TIMEOUT or CHAT_WRITE_TIMEOUT <= 0:
    raise MissingSetting("CHAT_WRITE_TIMEOUT must be a number of seconds above 0")

# --- Operations: /metrics and the OpenAI-compatible API -------------------------------------
# /metrics answers staff sessions, or `Authorization: Bearer <METRICS_TOKEN>` when this is set.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
API = {
    # The name /v1/models lists and requests must use; defaults to the model folder's name.
    "model_name": os.environ.get("API_MODEL_NAME", ""),
    "requests_per_minute_per_key": env_int("API_REQUESTS_PER_MINUTE_PER_KEY", 60),
    "max_tokens": env_int("API_MAX_TOKENS", 512),
}

# --- Security (production) -----------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the console's JavaScript reads it for POSTs
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Every page: scripts, styles, images and connections from this site only (the widget's script and styles are
# files; product images come from the stores' CDNs over https). django-csp sets the header.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "https:", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}
# Login throttling (admin and staff pages): 5 wrong passwords for one username from one address lock it for
# 15 minutes; the lockout answers 429.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["ip_address", "username"]]
AXES_RESET_ON_SUCCESS = True
# HTTPS=0: the site is served over plain http (scripts/run.sh on a LAN). Then no redirect to https, no HSTS, and
# no Secure-only cookies: a browser would not send those back over http, and no one could log in.
HTTPS = env_bool("HTTPS", True)
if not DEBUG:
    # No SECURE_PROXY_SSL_HEADER: Django would believe X-Forwarded-Proto from any peer. The scheme comes from the
    # ASGI scope, which runtime.proxy sets from X-Forwarded-Proto only when the peer is one of TRUSTED_PROXIES.
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
    SESSION_COOKIE_SECURE = HTTPS
    CSRF_COOKIE_SECURE = HTTPS
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000) if HTTPS else 0
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}
