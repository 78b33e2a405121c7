"""Django settings for the Tidemark console.

Every value can be overridden by an environment variable; `.env.example` lists them
with their defaults.
"""

import ipaddress
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue
from whitenoise.compress import Compressor

from console.api.names import PATH_NAME_PATTERN
from console.env import (
    database_config,
    env_bool,
    env_int,
    env_list,
    env_mapping,
    env_path,
    env_str,
    load_env_file,
    project_dir,
    secret_key,
)
from console.logs import logging_config
from storeadapter.reset_modes import MODE_NAMES, UNDO
from storeadapter.store_env import StoreSettingError, store_options

#: Where the code is; PROJECT_DIR is where relative paths and var/ are taken from (the
#: source checkout, or the current folder for an installed package).
BASE_DIR = Path(__file__).resolve().parent.parent
PROJECT_DIR = project_dir(BASE_DIR)
# Before anything reads the environment: .env fills in what is not set.
load_env_file(PROJECT_DIR)
VAR_DIR = PROJECT_DIR / "var"
#: The pages and assets, inside the package (links to the top-level folders in a checkout).
SITE_DIR = Path(__file__).resolve().parent / "site"

# Off unless DEBUG is set on (`make run` sets it for development): Django's debug pages,
# which list every URL pattern and show tracebacks, are never shown by default.
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key(DEBUG)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "testserver"])

# HTTPS hardening: on by default when DEBUG is off, each overridable. `make run` serves plain
# HTTP with DEBUG on (set explicitly), where all of these default to off.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
# Load balancers probe over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^healthz/background$", r"^metrics$"]
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
    # First: its createsuperuser (refusing a name another user has in any spelling) replaces
    # django.contrib.auth's.
    "console.accounts",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    # Optional TOTP for local accounts (console/accounts/totp.py).
    "django_otp",
    "django_otp.plugins.otp_totp",
    "console.core",
    "console.health",
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
    # Hashed, compressed static files with long cache headers (collectstatic writes them).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request.user.is_verified() (django-otp's OTPMiddleware, subclassed); a session of a
    # user with TOTP that did not give a code is logged out (console/accounts/totp.py).
    "console.accounts.totp.SecondFactorMiddleware",
    # Login for every page except views marked login_not_required and paths under /api/
    # (the API authenticates its own requests); see console/accounts/middleware.py.
    "console.accounts.middleware.LoginRequiredMiddleware",
    # What each page needs, from one table (console/accounts/permissions.py).
    "console.accounts.permissions.PermissionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.core.middleware.FreezeStartupObjectsMiddleware",
    # No-store on /api/ answers and on the pages carrying message data.
    "console.api.middleware.NoStoreMiddleware",
    "console.api.middleware.JsonServerErrorMiddleware",
    # Audited reads, when TIDEMARK_AUDIT_READS is on (console/audit/reads.py).
    "console.audit.reads.ReadAuditMiddleware",
    # Last, as django-axes asks: it answers a locked-out login.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [SITE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.accounts.context_processors.roles",
                "console.accounts.context_processors.navigation",
                "console.core.context_processors.spark",
            ],
        },
    },
]

DATABASES = {"default": database_config(env_str("DATABASE_URL", ""), PROJECT_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login throttling (django-axes): after TIDEMARK_LOGIN_FAILURE_LIMIT wrong passwords for one
# user name from one client address, that pair's logins are refused (429) for
# TIDEMARK_LOGIN_LOCKOUT_MINUTES; console/accounts/lockouts.py answers them and lifts them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # A name paused after many failures from many addresses: console/accounts/login_delay.py.
    "console.accounts.backends.PausedNameBackend",
    # Django's ModelBackend, finding the user by the name in any spelling ("ＡＤＭＩＮ" is admin).
    "console.accounts.backends.SameNameBackend",
    # OpenID Connect (console/accounts/sso.py); answers nothing unless OIDC_RP_CLIENT_ID is set.
    "console.accounts.sso.SsoBackend",
]
AXES_FAILURE_LIMIT = env_int("TIDEMARK_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("TIDEMARK_LOGIN_LOCKOUT_MINUTES", 15))
# The pair locks: one person's typos behind a shared address (NAT) lock nobody else out.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "console.accounts.throttle.client_ip"
AXES_RESET_ON_SUCCESS = True
# A refused login (locked pair, paused name) is not counted: it neither extends the pause
# nor lets a guesser keep the real user waiting by hammering the refusal.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "console.accounts.lockouts.lockout_response"
AXES_VERBOSE = False
# Besides axes' defaults: the TOTP code a failed login step posted is not kept either.
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "code"]
# Failures are counted per name in its canonical form (NFKC casefold): "VERA" is "vera".
AXES_USERNAME_CALLABLE = "console.accounts.login_delay.axes_username"
# Progressive delay per name, from any address (console/accounts/login_delay.py): past
# TIDEMARK_LOGIN_FREE_FAILURES wrong passwords for a name within the cool-off, each further one
# pauses the name's logins for BASE seconds, doubling, at most MAX; a browser that logged in
# as that user before (a signed cookie kept TIDEMARK_KNOWN_BROWSER_DAYS) is not paused.
# Twice the pair's limit by default: one address alone is locked before it can slow the name.
TIDEMARK_LOGIN_FREE_FAILURES = env_int("TIDEMARK_LOGIN_FREE_FAILURES", 2 * AXES_FAILURE_LIMIT)
TIDEMARK_LOGIN_DELAY_BASE_SECONDS = env_int("TIDEMARK_LOGIN_DELAY_BASE_SECONDS", 2)
TIDEMARK_LOGIN_DELAY_MAX_SECONDS = env_int("TIDEMARK_LOGIN_DELAY_MAX_SECONDS", 900)
TIDEMARK_KNOWN_BROWSER_DAYS = env_int("TIDEMARK_KNOWN_BROWSER_DAYS", 90)
# Wrong current passwords on the password-change form, per user, within the window; then 429.
TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT = env_int("TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT", 5)
TIDEMARK_PASSWORD_CHANGE_WINDOW_MINUTES = env_int("TIDEMARK_PASSWORD_CHANGE_WINDOW_MINUTES", 15)
#: Password-reset mails per address (and per client address) per hour.
TIDEMARK_PASSWORD_RESETS_PER_HOUR = env_int("TIDEMARK_PASSWORD_RESETS_PER_HOUR", 3)
#: A login lasts this long (hours), whatever the activity.
SESSION_COOKIE_AGE = env_int("TIDEMARK_SESSION_HOURS", 12) * 3600

# Optional TOTP for local accounts (django-otp; console/accounts/totp.py): a user enrols on
# /accounts/account/, then every login asks for a code. Wrong codes count as wrong passwords
# (the lockout and pause above), so django-otp's own per-device delay is off: one owner.
OTP_TOTP_THROTTLE_FACTOR = 0
#: The name authenticator apps show beside the user's name.
OTP_TOTP_ISSUER = env_str("TIDEMARK_TOTP_ISSUER", "Tidemark")
#: Seconds between a right password and its code before the login starts again.
TIDEMARK_TOTP_STEP_SECONDS = env_int("TIDEMARK_TOTP_STEP_SECONDS", 300)

# Single sign-on with OpenID Connect (mozilla-django-oidc; console/accounts/sso.py), beside
# local passwords. Off unless OIDC_RP_CLIENT_ID is set; then the endpoints below are required
# (the provider's discovery document lists them) and the login page offers the provider.
# The callback to register at the provider: <console>/accounts/sso/callback/.
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_RP_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT", "")
#: The provider's issuer (its ID tokens' ``iss``); users are told apart by (issuer, sub).
TIDEMARK_SSO_ISSUER = env_str("TIDEMARK_SSO_ISSUER", "")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_int("TIDEMARK_SSO_TIMEOUT_S", 10)
OIDC_AUTHENTICATION_CALLBACK_URL = "sso_callback"
#: IdP group -> console role, e.g. "tidemark-admins=admin,sre=operator,dev=viewer"; a user
#: in several mapped groups gets the strongest role, one in none is refused (and a user it
#: made before loses their role).
TIDEMARK_SSO_ROLE_MAP = env_mapping("TIDEMARK_SSO_ROLE_MAP")
#: The claims holding the user's groups (a list) and the console user name.
TIDEMARK_SSO_GROUPS_CLAIM = env_str("TIDEMARK_SSO_GROUPS_CLAIM", "groups")
TIDEMARK_SSO_USERNAME_CLAIM = env_str("TIDEMARK_SSO_USERNAME_CLAIM", "preferred_username")
#: The provider's name on the login page's button.
TIDEMARK_SSO_PROVIDER_NAME = env_str("TIDEMARK_SSO_PROVIDER_NAME", "single sign-on")

# Content-Security-Policy (django-csp): scripts only from the console itself. Styles may be
# inline: Plotly and Swagger UI set them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [SITE_DIR / "static"]
# plotly.min.js comes from the plotly package itself (no CDN): {% static 'plotly.min.js' %}.
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "console.assets.PlotlyFinder",
]
#: Where `manage.py collectstatic` writes (a deploy step); whitenoise serves it.
STATIC_ROOT = env_path("TIDEMARK_STATIC_ROOT", VAR_DIR / "static", PROJECT_DIR)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names (cached for a year) and gzip + brotli copies, made by collectstatic.
    "staticfiles": {"BACKEND": "console.assets.StaticStorage"},
}
# Source maps (the API docs' bundles ship 10 MB of them) are fetched only by a developer's
# browser tools: compressing them with brotli took most of collectstatic's time.
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")

# Request errors, Celery task failures and the store's recovery and retention reports go to
# stderr; TIDEMARK_LOG_FORMAT=json writes one JSON object a line.
LOGGING = logging_config(
    env_str("TIDEMARK_LOG_FORMAT", "plain"), env_str("TIDEMARK_LOG_LEVEL", "INFO")
)

# Tidemark services.
TIDEMARK_STORE_DIR = env_path("TIDEMARK_STORE_DIR", VAR_DIR / "store", PROJECT_DIR)
#: StoreConfig fields from the environment (storeadapter/store_env.py lists them).
try:
    TIDEMARK_STORE_OPTIONS = store_options()
except StoreSettingError as error:
    raise ImproperlyConfigured(str(error)) from None
TIDEMARK_FLUSH_MODE = TIDEMARK_STORE_OPTIONS.get("flush_mode", "async")
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
#: Django's cache, where DRF counts the API's rate per user (console.accounts.throttle):
#: Redis, so that every server process and host counts the same requests. A Redis that does
#: not answer within a second fails no request (the throttle lets it through).
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "tidemark",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
}
SPARK_MASTER = env_str("SPARK_MASTER", "local[*]")
#: /healthz/background: seconds within which some background task must have finished (a
#: worker is alive), and the timeout of its checks.
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
    "DEFAULT_RENDERER_CLASSES": ["console.api.renderers.SafeJSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "console.api.pagination.Pagination",
    "DEFAULT_SCHEMA_CLASS": "console.api.rules.RulesSchema",
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
    # DRF's UserRateThrottle, whose every 429 has a Retry-After of at least 1 second.
    "DEFAULT_THROTTLE_CLASSES": ["console.accounts.throttle.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": env_str("TIDEMARK_API_RATE", "20000/min")},
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
#: Long polls (pulls with wait > 0) waiting at once, per process and per token: each holds a
#: server thread, so keep TIDEMARK_LONG_POLLS below the threads of a process (default 8).
TIDEMARK_LONG_POLLS = env_int("TIDEMARK_LONG_POLLS", 4)
TIDEMARK_LONG_POLLS_PER_TOKEN = env_int("TIDEMARK_LONG_POLLS_PER_TOKEN", 2)
SPECTACULAR_SETTINGS = {
    "TITLE": "Tidemark API",
    "DESCRIPTION": "Topics, queues, messages, consumer groups and storage of a Tidemark store.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema needs a login (a viewer's session or token), as every page does.
    "SERVE_PERMISSIONS": ["console.api.permissions.RolePermission"],
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
        "NotificationStateEnum": "console.alerts.models.Notification.STATES",
        "AlertEventStateEnum": "console.alerts.models.AlertEvent.STATES",
        "KindEnum": "console.alerts.models.AlertRule.KINDS",
        "NewRuleKindEnum": "console.api.views.alerts.NEW_RULE_KINDS",
        "RoleRuleKindEnum": "console.accounts.permissions.KINDS",
        "ConsumptionStateEnum": "storeadapter.message_track.STATES",
        "ResetModeEnum": [*MODE_NAMES, UNDO],
        **{f"{name.capitalize()}ResetModeEnum": [name] for name in MODE_NAMES},
        "AppendStatusEnum": "console.api.read_models.APPEND_STATUSES",
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
#: The alert tasks (evaluation, delivery, heartbeat) have a queue of their own, consumed by
#: a worker of their own (`celery -A console worker -Q alerts`; scripts/run.sh and
#: docs/deploy/tidemark-alerts-worker.service), so an hourly job never delays a page. A
#: worker started without -Q consumes both.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = (Queue("celery"), Queue("alerts"))
CELERY_TASK_ROUTES = {"console.alerts.tasks.*": {"queue": "alerts"}}
#: Seconds between metric samples; each sample is followed by an alert evaluation.
TIDEMARK_SAMPLE_INTERVAL_S = env_int("TIDEMARK_SAMPLE_INTERVAL_S", 10)
TIDEMARK_STATUS_WINDOW = env_int("TIDEMARK_STATUS_WINDOW", 10)  # commits per queue, Burrow status
#: Rates (and so drain time) are measured over this many seconds of samples.
TIDEMARK_RATE_WINDOW_S = env_int("TIDEMARK_RATE_WINDOW_S", 300)
#: Seconds between alert evaluations (their own schedule, whether or not a sample came).
TIDEMARK_ALERT_INTERVAL_S = env_int("TIDEMARK_ALERT_INTERVAL_S", TIDEMARK_SAMPLE_INTERVAL_S)
#: Delivery of a notification: attempts (for one that tells of nothing firing; one that
#: does is retried until delivered), the first retry's delay (doubling, at most 10
#: minutes), and a webhook's timeout.
TIDEMARK_ALERT_MAX_ATTEMPTS = env_int("TIDEMARK_ALERT_MAX_ATTEMPTS", 8)
TIDEMARK_ALERT_RETRY_BASE_S = env_int("TIDEMARK_ALERT_RETRY_BASE_S", 10)
TIDEMARK_WEBHOOK_TIMEOUT_S = env_int("TIDEMARK_WEBHOOK_TIMEOUT_S", 10)
#: The heartbeat: an always-firing alert POSTed to this URL every interval while the
#: monitoring is fresh, for an external dead-man service (empty: none;
#: console/alerts/heartbeat.py).
TIDEMARK_HEARTBEAT_URL = env_str("TIDEMARK_HEARTBEAT_URL", "")
TIDEMARK_HEARTBEAT_INTERVAL_S = env_int("TIDEMARK_HEARTBEAT_INTERVAL_S", 60)
#: Topics with more queues than this are "big": pages page their queues and show their
#: totals from the latest sample; the sampler reads them in chunks of
#: TIDEMARK_SAMPLE_CHUNK_QUEUES queues, at most TIDEMARK_SAMPLE_QUEUE_BUDGET per sample.
TIDEMARK_BIG_TOPIC_QUEUES = env_int("TIDEMARK_BIG_TOPIC_QUEUES", 10_000)
TIDEMARK_SAMPLE_QUEUE_BUDGET = env_int("TIDEMARK_SAMPLE_QUEUE_BUDGET", 250_000)
TIDEMARK_SAMPLE_CHUNK_QUEUES = env_int("TIDEMARK_SAMPLE_CHUNK_QUEUES", 10_000)
#: Topic sizes (console/monitoring/sizes.py): a sample counts the consume-queue entries
#: appended since once every TIDEMARK_SIZE_EVERY_S, within a budget of this many entries
#: (a queue read costs 64 at least).
TIDEMARK_SIZE_EVERY_S = env_int("TIDEMARK_SIZE_EVERY_S", 60)
#: Audited reads (console/audit/reads.py): also record message reads, exports, pulls and
#: API produces in the audit log, kept this many days and at most this many rows.
TIDEMARK_AUDIT_READS = env_bool("TIDEMARK_AUDIT_READS", False)
TIDEMARK_AUDIT_READS_KEEP_DAYS = env_int("TIDEMARK_AUDIT_READS_KEEP_DAYS", 30)
TIDEMARK_AUDIT_READS_MAX_ROWS = env_int("TIDEMARK_AUDIT_READS_MAX_ROWS", 100_000)
TIDEMARK_SIZE_ENTRY_BUDGET = env_int("TIDEMARK_SIZE_ENTRY_BUDGET", 1_000_000)
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
TIDEMARK_ARCHIVE_DIR = env_path("TIDEMARK_ARCHIVE_DIR", None, PROJECT_DIR)
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
    "evaluate-alerts": {
        "task": "console.alerts.tasks.evaluate_alerts",
        "schedule": TIDEMARK_ALERT_INTERVAL_S,
    },
    "alert-heartbeat": {
        "task": "console.alerts.tasks.send_heartbeat",
        "schedule": TIDEMARK_HEARTBEAT_INTERVAL_S,
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
#: Seconds an SMTP connection may block before an alert mail's attempt fails (and is retried).
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tidemark@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
#: The console's address as people reach it, for full links in alert emails.
TIDEMARK_CONSOLE_URL = env_str("TIDEMARK_CONSOLE_URL", "http://127.0.0.1:8000")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)

# /metrics (Prometheus): scrapers send `Authorization: Bearer <TIDEMARK_METRICS_TOKEN>`, or
# come from an address in TIDEMARK_METRICS_ALLOW (addresses or networks).
TIDEMARK_METRICS_TOKEN = env_str("TIDEMARK_METRICS_TOKEN", "")
TIDEMARK_METRICS_ALLOW = env_list("TIDEMARK_METRICS_ALLOW", ["127.0.0.1", "::1"])
try:
    [ipaddress.ip_network(entry, strict=False) for entry in TIDEMARK_METRICS_ALLOW]
except ValueError as error:
    raise ImproperlyConfigured(f"TIDEMARK_METRICS_ALLOW: {error}.") from None
