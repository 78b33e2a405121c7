"""Production settings: a secret key from the environment, HTTPS hardening with DEBUG off.

Settings are read once at import, so each case imports them in a fresh interpreter with
the environment it needs; the in-process cases check what the middleware does with them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: Variables the developer's shell or CI may hold that would change what is tested here.
CLEARED = (
    "SECRET_KEY",
    "DEBUG",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "TIDEMARK_BEHIND_TLS_PROXY",
    "ALLOWED_HOSTS",
)

HARDENING = (
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_CONTENT_TYPE_NOSNIFF",
    "X_FRAME_OPTIONS",
    "SECURE_PROXY_SSL_HEADER",
)


def strong_key() -> str:
    return secrets.token_urlsafe(50)


def run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environ.pop("DJANGO_SETTINGS_MODULE", None)
    # Set by the browser tests (tests/browser/conftest.py), which may run first in the
    # same pytest process; never in a deployment, and `check --deploy` says so.
    environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return subprocess.run(
        args,
        env={**environ, **env},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_settings(**env: str) -> dict:
    """The hardening settings as console.settings computes them with `env`."""
    code = (
        "import json, console.settings as s; "
        f"print(json.dumps({{n: getattr(s, n, None) for n in {HARDENING!r}}}))"
    )
    result = run([sys.executable, "-c", code], **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_check_deploy_passes_with_debug_off_and_a_strong_key():
    result = run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        DEBUG="false",
        SECRET_KEY=strong_key(),
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_without_a_secret_key_and_debug_off_manage_py_refuses_with_a_sentence():
    result = run([sys.executable, "manage.py", "check"], DEBUG="false")

    assert result.returncode != 0
    assert "SECRET_KEY must be set in the environment when DEBUG is false" in result.stderr
    assert "Traceback" not in result.stderr


def test_debug_off_turns_every_https_protection_on():
    values = production_settings(DEBUG="false", SECRET_KEY=strong_key())

    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] >= 31_536_000
    assert values["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert values["SECURE_CONTENT_TYPE_NOSNIFF"] is True
    assert values["X_FRAME_OPTIONS"] == "DENY"


def test_debug_on_serves_plain_http_for_make_run():
    values = production_settings(DEBUG="true")

    assert values["SECURE_SSL_REDIRECT"] is False
    assert values["SESSION_COOKIE_SECURE"] is False
    assert values["CSRF_COOKIE_SECURE"] is False
    assert values["SECURE_HSTS_SECONDS"] == 0


def test_hsts_seconds_and_ssl_redirect_are_overridable():
    values = production_settings(
        DEBUG="false", SECRET_KEY=strong_key(), SECURE_HSTS_SECONDS="3600", SECURE_SSL_REDIRECT="0"
    )

    assert values["SECURE_HSTS_SECONDS"] == 3600
    assert values["SECURE_SSL_REDIRECT"] is False


def test_the_forwarded_proto_header_is_trusted_only_behind_a_tls_proxy():
    plain = production_settings(DEBUG="false", SECRET_KEY=strong_key())
    proxied = production_settings(
        DEBUG="false", SECRET_KEY=strong_key(), TIDEMARK_BEHIND_TLS_PROXY="true"
    )

    assert plain["SECURE_PROXY_SSL_HEADER"] is None
    assert proxied["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


# What the middleware does with those settings.


@pytest.fixture
def https_only(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    return settings


def test_plain_http_is_redirected_to_https(client, https_only, db):
    response = client.get("/topics/")

    assert response.status_code == 301
    assert response["Location"] == "https://testserver/topics/"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/healthz/background", "/metrics"])
def test_health_checks_are_not_redirected_to_https(client, https_only, path, store, db):
    assert client.get(path).status_code != 301


def test_https_answers_carry_hsts_nosniff_and_deny_framing(client, https_only, db):
    response = client.get("/accounts/login/", secure=True)

    assert response.status_code == 200
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"


def test_behind_a_tls_proxy_a_forwarded_https_request_is_not_redirected(
    client, https_only, settings, db
):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    response = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")

    assert response.status_code == 200
