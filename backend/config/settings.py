"""All settings, read from the environment in this one place.

Development (``APP_ENV=development``, the default) has safe defaults: SQLite and
a data directory under ``./var``, a per-checkout generated secret key and node
token, the node on 127.0.0.1:7070. Production (``APP_ENV=production``) requires
``SECRET_KEY``, ``ALLOWED_HOSTS``, ``DATABASE_URL``, ``CELERY_BROKER_URL`` (or
``REDIS_URL``), ``NODE_URL`` and ``NODE_TOKEN``, and refuses to start without
them.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import overload

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from storage_engine.node_api.logs import LOG_FORMATS, logging_config

BASE_DIR = Path(__file__).resolve().parents[2]
APP_ENV = os.environ.get("APP_ENV", "development")
if APP_ENV not in {"development", "production", "test"}:
    raise ImproperlyConfigured("APP_ENV must be development, production or test")
PRODUCTION = APP_ENV == "production"
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))


@overload
def env(name: str, default: str) -> str: ...
@overload
def env(name: str, default: None = None) -> str | None: ...
def env(name: str, default: str | None = None) -> str | None:
    """A variable; in production, one without a default is required."""
    value = os.environ.get(name)
    if value not in (None, ""):
        return value
    if PRODUCTION and default is None:
        raise ImproperlyConfigured(f"{name} must be set when APP_ENV=production")
    return default


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value == "":
        return default
    if value not in {"1", "true", "yes", "on", "0", "false", "no", "off"}:
        raise ImproperlyConfigured(f"{name} must be true or false (1/0, yes/no, on/off), got {value!r}")
    return value in {"1", "true", "yes", "on"}


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    """An integer variable; a bad value names the variable instead of failing with a bare ValueError."""
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be ≥ {minimum}, got {value}")
    return value


def env_cron(name: str, default: str) -> str:
    """A crontab variable (five fields: minute hour day-of-month month day-of-week, in ``CELERY_TIMEZONE``);
    a bad one names the variable and the field."""
    raw = " ".join(os.environ.get(name, "").split()) or default
    fields = raw.split(" ")
    if len(fields) != 5:
        raise ImproperlyConfigured(f"{name} must have five crontab fields (minute hour day month weekday), got {raw!r}")

    try:
        crontab(*fields[:2], day_of_month=fields[2], month_of_year=fields[3], day_of_week=fields[4])
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not a valid crontab ({exc}), got {raw!r}") from None
    return raw


def env_float(name: str, default: float, minimum: float | None = None) -> float:
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be ≥ {minimum}, got {value}")
    return value


def dev_secret(name: str) -> str:
    """A random value kept in ``var/`` so development restarts keep sessions; never committed."""
    if PRODUCTION:
        raise ImproperlyConfigured(f"{name} must be set when APP_ENV=production")
    path = VAR_DIR / f"{name.lower()}"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env("SECRET_KEY") or dev_secret("SECRET_KEY")
DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = [
    h.strip() for h in (env("ALLOWED_HOSTS", None if PRODUCTION else "127.0.0.1,localhost") or "").split(",")
]
CSRF_TRUSTED_ORIGINS = [o for o in (env("CSRF_TRUSTED_ORIGINS", "") or "").split(",") if o]

DATA_DIR = Path(env("DATA_DIR", str(VAR_DIR / "data")))
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"), conn_max_age=60, conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, beat) share the file: wait for locks instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # Take the write lock at BEGIN: a read transaction that later writes cannot wait (SQLite fails it at once).
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("SQLITE_TEST_NAME", str(VAR_DIR / "test-db.sqlite3"))}
# django-prometheus's wrappers of the same backends count connections, queries, errors and query durations
# (django_db_* on the web's /metrics).
if DATABASES["default"]["ENGINE"] in ("django.db.backends.postgresql", "django.db.backends.sqlite3"):
    DATABASES["default"]["ENGINE"] = DATABASES["default"]["ENGINE"].replace("django.db.", "django_prometheus.db.")

# Storage node (the default node; more are registered through the API).
NODE_URL = env("NODE_URL", "http://127.0.0.1:7070")
NODE_TOKEN = env("NODE_TOKEN") or dev_secret("NODE_TOKEN")
# The token that may only GET the node's /metrics, for a Prometheus scraper (docs/metrics.md): `make up`
# starts its node with it; in production the node's own configuration sets it (optional there).
NODE_METRICS_TOKEN = env("NODE_METRICS_TOKEN", "") or (None if PRODUCTION else dev_secret("NODE_METRICS_TOKEN"))
NODE_TIMEOUT_S = env_float("NODE_TIMEOUT_S", 5.0, minimum=0.1)
# Where the control plane may send requests (node URLs, webhook and Alertmanager channels): comma-separated
# host names, *.suffixes, addresses and CIDR networks, and * (the default): every public address, and for node
# URLs loopback and private ones too; a channel reaches loopback and private addresses only when they are named.
# Link-local, cloud metadata and unspecified addresses and names are refused whatever this says, however written
# (backend/apps/core/outgoing.py).
OUTGOING_URL_ALLOW = env("OUTGOING_URL_ALLOW", "*")

# Celery: Redis in any real deployment; the filesystem transport for the embedded default.
REDIS_URL = env("REDIS_URL", "redis://127.0.0.1:6379/0" if APP_ENV == "test" else "")
CELERY_BROKER_URL = env("CELERY_BROKER_URL", None if PRODUCTION else (REDIS_URL or "filesystem://"))
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL and CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = Path(env("BROKER_DIR", str(DATA_DIR / "broker")))
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
# The cache holds state every web worker and host must share (the login throttle): Redis (``REDIS_URL``, or
# the broker when that is Redis) when there is one; local memory, i.e. per process, only without Redis.
# Keys are prefixed per deployment (from the secret key, which every worker of one system shares) so that
# separate systems on one Redis do not count each other's logins.
CACHE_REDIS_URL = REDIS_URL or (
    CELERY_BROKER_URL if CELERY_BROKER_URL and CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
)
CACHE_KEY_PREFIX = env("CACHE_KEY_PREFIX", "") or "lcs-" + hashlib.sha256(SECRET_KEY.encode()).hexdigest()[:12] + (
    f"-{os.getpid()}" if APP_ENV == "test" else ""  # concurrent test runs share var/secret_key, not counters
)
_LOCMEM = "django.core.cache.backends.locmem.LocMemCache"
CACHES: dict[str, dict[str, object]] = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CACHE_REDIS_URL,
        "KEY_PREFIX": CACHE_KEY_PREFIX,
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
    if CACHE_REDIS_URL
    else {"BACKEND": _LOCMEM, "LOCATION": "default", "KEY_PREFIX": CACHE_KEY_PREFIX},
    # Used when the shared cache fails: the throttle still holds per process rather than not at all.
    "local": {"BACKEND": _LOCMEM, "LOCATION": "local", "KEY_PREFIX": CACHE_KEY_PREFIX},
}
# Login attempts (API and /admin/login/) per client address, counted in the cache above.
LOGIN_THROTTLE_RATE = env("LOGIN_THROTTLE_RATE", "10/min")
# Reverse proxies in front of the app that append to X-Forwarded-For. 0: the client is REMOTE_ADDR and the
# header is ignored (it is the client's to forge); N: the client is the Nth address from the right.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
# Workers consume this queue; separate systems sharing one Redis use separate queues. The test suite has its
# own, so that a `make up` on the same Redis never takes its tasks or answers its worker pings, and each of its
# pytest-xdist workers (``gw0``, ``gw1``…) has one of its own too.
_TEST_QUEUE = "-".join(filter(None, ("celery-test", os.environ.get("PYTEST_XDIST_WORKER", ""))))
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_QUEUE", _TEST_QUEUE if APP_ENV == "test" else "celery")
# Worker pings and other broadcasts go to this system's workers only (Celery's default is "celery" for all).
CELERY_CONTROL_EXCHANGE = CELERY_TASK_DEFAULT_QUEUE
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = 300
CELERY_TASK_TIME_LIMIT = 360
# Task events on, so Flower or celery-exporter can watch the workers.
CELERY_WORKER_SEND_TASK_EVENTS = True
CELERY_TASK_SEND_SENT_EVENT = True
# The worker logs through LOGGING below (one format for every process), not Celery's own handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
BEAT_HEARTBEAT_INTERVAL_S = env_int("BEAT_HEARTBEAT_INTERVAL_S", 10, minimum=1)
BEAT_HEARTBEAT_STALE_S = env_int("BEAT_HEARTBEAT_STALE_S", 60, minimum=1)
# Seconds between metric collections and between alert evaluations (the e2e test shortens both).
METRICS_INTERVAL_S = env_int("METRICS_INTERVAL_S", 15, minimum=1)
ALERTS_EVAL_INTERVAL_S = env_int("ALERTS_EVAL_INTERVAL_S", 60, minimum=1)
# The run history: scheduled sweeps of one kind on one target fold into one row per window of this many seconds
# (windows start at multiples of it since the epoch, UTC: 3600 gives 10:00–10:59), see runs.services.fold_sweep.
RUN_FOLD_WINDOW_S = env_int("RUN_FOLD_WINDOW_S", 3600, minimum=1)

SPARK_MASTER = env("SPARK_MASTER", "local[*]")
LAKE_PATH = env("LAKE_PATH", str(VAR_DIR / "lake"))
# Spark jobs run by Celery (backend/apps/reports): the node's data dir they read, where the report job posts
# back to, their hard time limit, and how often beat starts the lake export and the lifecycle report.
NODE_DATA_DIR = Path(env("NODE_DATA_DIR", str(DATA_DIR / "node")) or DATA_DIR / "node")
CONTROL_PLANE_URL = env("CONTROL_PLANE_URL", f"http://127.0.0.1:{os.environ.get('WEB_PORT') or 8000}")
SPARK_JOB_TIME_LIMIT_S = env_int("SPARK_JOB_TIME_LIMIT_S", 3600, minimum=60)
# Redis redelivers a task not acknowledged within its visibility timeout (tasks ack late): longer than the
# longest task may run, so a Spark job is never started twice while the first still runs.
if CELERY_BROKER_URL and CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = max(SPARK_JOB_TIME_LIMIT_S, CELERY_TASK_TIME_LIMIT) + 600
SPARK_REPORT_SOURCE = env("SPARK_REPORT_SOURCE", "segments")  # lifecycle-report input: segments or lake
# The daily Spark jobs run at an off-peak hour (crontab, UTC), the report after the export it may read.
SPARK_LAKE_EXPORT_CRON = env_cron("SPARK_LAKE_EXPORT_CRON", "30 2 * * *")
SPARK_LIFECYCLE_REPORT_CRON = env_cron("SPARK_LIFECYCLE_REPORT_CRON", "30 3 * * *")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by the app (no CDN)
    "django_celery_beat",
    "django_prometheus",  # request and database metrics on the web's /metrics (docs/metrics.md)
    "backend.apps.core",
    "backend.apps.audit",
    "backend.apps.policies",
    "backend.apps.nodes",
    "backend.apps.namespaces",
    "backend.apps.catalog",
    "backend.apps.runs",
    "backend.apps.messages",
    "backend.apps.lifecycle",
    "backend.apps.metrics",
    "backend.apps.alerts",
    "backend.apps.reports",
]

MIDDLEWARE = [
    # First and last: django-prometheus times every request through the whole stack (django_http_*).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "backend.apps.core.request_ids.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "backend.config.urls"
WSGI_APPLICATION = "backend.config.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# Django's default hasher (PBKDF2, a million rounds: 0.18 s of CPU a password) everywhere but in the tests, which
# create users and try logins by the thousand: there it cost minutes of a run. MD5 there, as Django's testing
# docs advise (tests/backend/test_settings.py checks that no other APP_ENV gets it).
if APP_ENV == "test":
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The built UI (frontend/dist) is served by WhiteNoise under /static/.
FRONTEND_DIST = BASE_DIR / "frontend" / "dist"
STATIC_URL = "/static/"
STATIC_ROOT = Path(env("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [FRONTEND_DIST] if FRONTEND_DIST.exists() else []
WHITENOISE_USE_FINDERS = DEBUG

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", PRODUCTION)
X_FRAME_OPTIONS = "DENY"
CSRF_FAILURE_VIEW = "backend.apps.core.views.csrf_failure"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first so that an anonymous API call gets 401 with WWW-Authenticate.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["backend.apps.core.permissions.IsViewer"],
    "DEFAULT_SCHEMA_CLASS": "backend.apps.core.schema.ApiAutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,  # DRF's client address (throttles) follows the same rule
    "EXCEPTION_HANDLER": "backend.apps.core.exceptions.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Lifecycle Store control plane API",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema describes the API, not data: anyone may read it (every route still checks its caller).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "COMPONENT_SPLIT_REQUEST": True,
    # One name per choice set that more than one field uses (the frontend's generated types name them).
    "ENUM_NAME_OVERRIDES": {
        "SyncStateEnum": "backend.apps.core.models.SyncState",
        "RunKindEnum": "backend.apps.runs.models.Kind",
        "RunStateEnum": "backend.apps.runs.models.State",
        "ActionKindEnum": "backend.apps.lifecycle.serializers.ACTION_KINDS",
        "CursorActionEnum": "backend.apps.namespaces.subscriptions.CURSOR_ACTIONS",
        "SegmentStateEnum": "backend.apps.catalog.serializers.SEGMENT_STATES",
        "SegmentTierEnum": "backend.apps.catalog.figures.SEGMENT_TIERS",
        "RunOriginEnum": "backend.apps.runs.serializers.ORIGINS",
        "AuditResultEnum": "backend.apps.audit.serializers.RESULTS",
        "PolicyGroupEnum": "backend.apps.policies.serializers.POLICY_GROUPS",
        "PolicyUnitEnum": "backend.apps.policies.serializers.POLICY_UNITS",
        "PolicySourceEnum": "backend.apps.policies.serializers.POLICY_SOURCES",
        "AlertStateEnum": "backend.apps.alerts.models.AlertState",
        "AlertEventKindEnum": "backend.apps.alerts.models.EventKind",
        "ChannelKindEnum": "backend.apps.alerts.models.ChannelKind",
    },
    # /api/docs/ works offline: Swagger UI and Redoc come from drf-spectacular-sidecar under /static/.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# LOG_FORMAT=plain|json, LOG_LEVEL: one format for web, worker, beat and node (storage_engine.node_api.logs).
LOG_FORMAT = env("LOG_FORMAT", "plain")
if LOG_FORMAT not in LOG_FORMATS:
    raise ImproperlyConfigured(f"LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, got {LOG_FORMAT!r}")
LOG_LEVEL = env("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {LOG_LEVEL!r}")
# Tasks beat starts every few seconds: Celery's "received"/"succeeded"/"Sending due task" lines of them are
# routine and shown at LOG_LEVEL=DEBUG only (their warnings and errors always show).
ROUTINE_TASKS = (
    "tick_schedules",
    "tick lifecycle schedules",
    "poll_due_sweeps",
    "beat_heartbeat",
    "beat heartbeat",
    "push_pending_namespaces",
    "push pending namespaces",
)
LOGGING = logging_config(
    LOG_FORMAT,
    LOG_LEVEL,
    routine_loggers=("celery.app.trace", "celery.worker.strategy", "celery.beat"),
    routine_words=ROUTINE_TASKS,
)
