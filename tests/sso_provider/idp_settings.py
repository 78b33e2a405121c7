"""Settings of the test OpenID Connect provider (serve.py): django-oauth-toolkit with OIDC
on, RS256 ID tokens signed with the key the test generated, PKCE required, a session and
CSRF cookie of its own names (the console runs on the same machine)."""

import json
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = json.loads(Path(os.environ["IDP_CONFIG"]).read_text())

SECRET_KEY = "tidemark-test-identity-provider-" + CONFIG["client_secret"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "idp_urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": CONFIG["db_path"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
USE_TZ = True
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
LOGIN_URL = "/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # a test's users only
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(CONFIG["key_path"]).read_text(),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email"},
    "OAUTH2_VALIDATOR_CLASS": "idp_claims.GroupsValidator",
}
