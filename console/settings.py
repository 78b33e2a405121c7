"""Django settings for the Tidemark console.

Every value can be overridden by an environment variable; `.env.example` lists them
with their defaults.
"""

from pathlib import Path

from console.api.names import PATH_NAME_PATTERN
from console.assets import plotly_static_dir
from console.env import (
    database_config,
    env_bool,
    env_int,
    env_list,
    env_path,
    env_str,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = secret_key(DEBUG)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "testserver"])

# HTTPS hardening: on by default when DEBUG is off, each overridable. `make run` serves plain
# HTTP with DEBUG on, where all of these default to off.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
# Load balancers probe over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
if not SECURE_HSTS_PRELOAD:
    # Preloading asks browser vendors to hard-code HTTPS for the whole domain: opt-in only.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and strips it from clients).
TIDEMARK_BEHIND_TLS_PROXY = env_bool("TIDEMARK_BEHIND_TLS_PROXY", False)
if TIDEMARK_BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "console.core",
    "console.health",
    "console.accounts",
    "console.audit",
    "console.topics",
    "console.messages",
    "console.streams",
    "console.storage",
    "console.groups",
    "console.api",
    "console.background",
    "console.monitoring",
    "console.alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Login for every page except views marked login_not_required and paths under /api/
    # (the API authenticates its own requests); see console/accounts/middleware.py.
    "console.accounts.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.core.middleware.FreezeStartupObjectsMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

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
                "console.accounts.context_processors.roles",
                "console.accounts.context_processors.navigation",
            ],
        },
    },
]

DATABASES = {"default": database_config(env_str("DATABASE_URL", ""), BASE_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# plotly.min.js comes from the plotly package itself (no CDN): {% static 'plotly.min.js' %}.
STATICFILES_DIRS = [BASE_DIR / "static", plotly_static_dir()]
STATIC_ROOT = VAR_DIR / "static"

# Tidemark services.
TIDEMARK_STORE_DIR = env_path("TIDEMARK_STORE_DIR", VAR_DIR / "store", BASE_DIR)
TIDEMARK_FLUSH_MODE = env_str("TIDEMARK_FLUSH_MODE", "async")
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
SPARK_MASTER = env_str("SPARK_MASTER", "local[*]")
#: /readyz: seconds within which some background task must have finished (a worker is
#: alive), and the timeout of its Redis ping.
TIDEMARK_READY_WORKER_WINDOW_S = env_int("TIDEMARK_READY_WORKER_WINDOW_S", 120)
TIDEMARK_READY_TIMEOUT_S = 2

# REST API (console/api): the console's roles, one error shape, paginated lists.
TIDEMARK_API_MAX_BODY_BYTES = env_int("TIDEMARK_API_MAX_BODY_BYTES", 8 << 20)
# Django reads a JSON body whole before the API's parser sees it: the same limit for both.
DATA_UPLOAD_MAX_MEMORY_SIZE = TIDEMARK_API_MAX_BODY_BYTES
TIDEMARK_API_MAX_BATCH = env_int("TIDEMARK_API_MAX_BATCH", 1000)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["console.api.permissions.RolePermission"],
    "DEFAULT_PARSER_CLASSES": ["console.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "console.api.pagination.Pagination",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": env_str("TIDEMARK_API_RATE", "20000/min")},
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tidemark API",
    "DESCRIPTION": "Topics, queues, messages, consumer groups and storage of a Tidemark store.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "console.api.schema.add_error_responses",
    ],
    "ENUM_NAME_OVERRIDES": {
        "GroupStatusEnum": "console.monitoring.metrics.GROUP_STATUSES",
        "QueueStatusEnum": "console.monitoring.metrics.QUEUE_STATUSES",
        "AppendStatusEnum": "console.api.views.messages.APPEND_STATUSES",
    },
    "PATH_CONVERTER_OVERRIDES": {
        "name": {"type": "string", "pattern": PATH_NAME_PATTERN},
    },
}

# Background work (console/celery.py): Celery with Redis; the beat schedule is below.
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
#: Seconds between metric samples; each sample is followed by an alert evaluation.
TIDEMARK_SAMPLE_INTERVAL_S = env_int("TIDEMARK_SAMPLE_INTERVAL_S", 10)
TIDEMARK_STATUS_WINDOW = env_int("TIDEMARK_STATUS_WINDOW", 10)  # commits per queue, Burrow status
#: Topics with more queues than this are "big": pages page their queues and show their
#: totals from the latest sample; the sampler reads them in chunks of
#: TIDEMARK_SAMPLE_CHUNK_QUEUES queues, at most TIDEMARK_SAMPLE_QUEUE_BUDGET per sample.
TIDEMARK_BIG_TOPIC_QUEUES = env_int("TIDEMARK_BIG_TOPIC_QUEUES", 10_000)
TIDEMARK_SAMPLE_QUEUE_BUDGET = env_int("TIDEMARK_SAMPLE_QUEUE_BUDGET", 250_000)
TIDEMARK_SAMPLE_CHUNK_QUEUES = env_int("TIDEMARK_SAMPLE_CHUNK_QUEUES", 10_000)
#: Freeze the objects alive after a web process's first response out of the garbage
#: collector's full collections (console/core/middleware.py).
TIDEMARK_GC_FREEZE = env_bool("TIDEMARK_GC_FREEZE", True)
#: Seconds between the flush task's fsync-and-checkpoint runs (async flush mode).
TIDEMARK_FLUSH_INTERVAL_S = env_int("TIDEMARK_FLUSH_INTERVAL_S", 5)
#: Seconds between expiry checks; deletion runs at TIDEMARK_RETENTION_HOUR (UTC, like
#: RocketMQ's deleteWhen "04"), or at once when disk use passes the warning ratio.
TIDEMARK_EXPIRY_CHECK_S = env_int("TIDEMARK_EXPIRY_CHECK_S", 3600)
TIDEMARK_RETENTION_HOUR = env_int("TIDEMARK_RETENTION_HOUR", 4)
#: Archive each commit-log segment to Parquet (under this directory, through Spark) before
#: retention deletes it; empty means no archive. A segment whose archive failed is kept.
TIDEMARK_ARCHIVE_DIR = env_path("TIDEMARK_ARCHIVE_DIR", None, BASE_DIR)
#: Seconds between downsampling runs of the metric history.
TIDEMARK_DOWNSAMPLE_INTERVAL_S = env_int("TIDEMARK_DOWNSAMPLE_INTERVAL_S", 600)
CELERY_BEAT_SCHEDULE = {
    "flush-store": {
        "task": "console.background.tasks.flush_store",
        "schedule": TIDEMARK_FLUSH_INTERVAL_S,
    },
    "expire-segments": {
        "task": "console.background.tasks.expire_segments",
        "schedule": TIDEMARK_EXPIRY_CHECK_S,
    },
    "sample-metrics": {
        "task": "console.monitoring.tasks.sample_metrics",
        "schedule": TIDEMARK_SAMPLE_INTERVAL_S,
    },
    "downsample-metrics": {
        "task": "console.monitoring.tasks.downsample_metrics",
        "schedule": TIDEMARK_DOWNSAMPLE_INTERVAL_S,
    },
    "topic-statistics": {
        "task": "console.monitoring.tasks.topic_statistics",
        "schedule": 3600,
    },
}

# Mail: printed to the console unless an SMTP host is configured.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tidemark@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
#: The console's address as people reach it, for full links in alert emails.
TIDEMARK_CONSOLE_URL = env_str("TIDEMARK_CONSOLE_URL", "http://127.0.0.1:8000")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
