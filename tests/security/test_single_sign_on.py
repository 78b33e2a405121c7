"""Single sign-on against a real OpenID Connect provider (issue 32, item 9).

The provider is a second Django process (tests/sso_provider/serve.py: django-oauth-toolkit,
RS256 ID tokens signed with a key made here, PKCE required), started and stopped by its PID.
The console is pytest-django's live server; a `requests` session is the browser. The whole
authorization-code flow goes over HTTP: the console's start URL, the provider's login form,
its redirect back with a code, and the console exchanging the code (with the PKCE verifier)
and reading the userinfo endpoint on its own.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from console.accounts.models import SsoIdentity
from console.accounts.roles import role_of
from console.audit.models import AuditEntry

SERVE = Path(__file__).resolve().parents[1] / "sso_provider" / "serve.py"
PASSWORD = "provider-password-1"
USERS = [
    {"username": "alice", "email": "alice@example.org", "groups": ["tidemark-admins", "staff"]},
    {"username": "oscar", "email": "oscar@example.org", "groups": ["sre"]},
    {"username": "mallory", "email": "mallory@example.org", "groups": ["contractors"]},
    # A name the console's local accounts already have (the `viewer` fixture's).
    {"username": "vera", "email": "vera@example.org", "groups": ["sre"]},
]
ROLE_MAP = {"tidemark-admins": "admin", "sre": "operator"}


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory):
    """The provider process, its discovery document and its client's credentials."""
    home = tmp_path_factory.mktemp("idp")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (home / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    config = {
        "db_path": str(home / "idp.sqlite3"),
        "key_path": str(home / "key.pem"),
        "client_id": "tidemark-console",
        "client_secret": secrets.token_urlsafe(24),
        "redirect_uri": f"{live_server.url}/accounts/sso/callback/",
        "users": [{**user, "password": PASSWORD} for user in USERS],
    }
    (home / "config.json").write_text(json.dumps(config))
    process = subprocess.Popen(
        [sys.executable, str(SERVE), str(home / "config.json")],
        stdout=subprocess.PIPE,
        stderr=open(home / "stderr.log", "wb"),  # noqa: SIM115 (closed with the process)
        text=True,
    )
    try:
        line = process.stdout.readline()
        if not line.startswith("listening "):
            pytest.fail(f"the provider did not start: {(home / 'stderr.log').read_text()}")
        base = f"http://127.0.0.1:{int(line.split()[1])}"
        discovery = requests.get(f"{base}/o/.well-known/openid-configuration", timeout=10).json()
        yield {"base": base, "discovery": discovery, **config}
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def sso_on(provider, settings):
    """The console configured for the provider, as an operator would from its discovery
    document."""
    found = provider["discovery"]
    settings.OIDC_RP_CLIENT_ID = provider["client_id"]
    settings.OIDC_RP_CLIENT_SECRET = provider["client_secret"]
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = found["authorization_endpoint"]
    settings.OIDC_OP_TOKEN_ENDPOINT = found["token_endpoint"]
    settings.OIDC_OP_USER_ENDPOINT = found["userinfo_endpoint"]
    settings.OIDC_OP_JWKS_ENDPOINT = found["jwks_uri"]
    settings.TIDEMARK_SSO_ISSUER = found["issuer"]
    settings.TIDEMARK_SSO_ROLE_MAP = ROLE_MAP
    settings.TIDEMARK_SSO_PROVIDER_NAME = "Example IdP"
    return provider


def sign_on(console: str, username: str, next_url: str = "/topics/") -> requests.Response:
    """Drive the browser's side of the flow; the console's last answer (not followed)."""
    browser = requests.Session()
    login_page = browser.get(f"{console}/accounts/login/?next={next_url}", timeout=10)
    link = re.search(r'href="(/accounts/sso/start/[^"]*)"', login_page.text)
    assert link is not None, login_page.text
    start = browser.get(console + link.group(1).replace("&amp;", "&"), allow_redirects=False)
    assert start.status_code == 302
    query = parse_qs(urlparse(start.headers["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    # The provider asks for its own login first, then answers the authorization request.
    form = browser.get(start.headers["Location"], timeout=10)
    assert "/login/" in form.url
    signed_in = browser.post(
        form.url,
        data={
            "username": username,
            "password": PASSWORD,
            "next": parse_qs(urlparse(form.url).query)["next"][0],
            "csrfmiddlewaretoken": browser.cookies["idp_csrftoken"],
        },
        allow_redirects=False,
        timeout=10,
    )
    assert signed_in.status_code == 302, signed_in.text
    authorized = browser.get(
        urljoin(form.url, signed_in.headers["Location"]), allow_redirects=False, timeout=10
    )
    callback = authorized.headers["Location"]
    assert callback.startswith(f"{console}/accounts/sso/callback/?"), callback
    answer = browser.get(callback, allow_redirects=False, timeout=30)
    answer.browser = browser  # type: ignore[attr-defined]
    return answer


@pytest.mark.django_db(transaction=True)
def test_the_full_flow_signs_in_with_the_role_of_the_mapped_group(live_server, sso_on, store):
    began = time.perf_counter()

    answer = sign_on(live_server.url, "alice")

    took = time.perf_counter() - began
    assert answer.status_code == 302, answer.text
    assert answer.headers["Location"] == "/topics/"
    page = answer.browser.get(f"{live_server.url}/topics/", timeout=10)
    assert page.status_code == 200
    assert "alice" in page.text
    identity = SsoIdentity.objects.select_related("user").get(subject__isnull=False)
    assert identity.issuer == sso_on["discovery"]["issuer"]
    assert identity.user.username == "alice"
    assert role_of(identity.user) == "admin"
    assert not identity.user.has_usable_password()
    login = AuditEntry.objects.get(action="login")
    assert login.detail.endswith("through Example IdP")
    print(f"\nsingle sign-on, full authorization-code flow: {took:.2f} s")


@pytest.mark.django_db(transaction=True)
def test_a_user_in_no_mapped_group_gets_no_session_and_a_page_saying_why(live_server, sso_on):
    answer = sign_on(live_server.url, "mallory")

    assert answer.status_code == 403
    assert "No access to this console" in answer.text
    assert "none of the user&#x27;s groups is mapped to a console role" in answer.text
    assert "contractors" in answer.text
    assert answer.browser.get(f"{live_server.url}/", allow_redirects=False).status_code == 302
    assert not SsoIdentity.objects.exists()
    assert AuditEntry.objects.filter(action="login.sso_refused").exists()


@pytest.mark.django_db(transaction=True)
def test_a_provider_name_that_a_local_account_has_is_refused(live_server, sso_on, viewer):
    answer = sign_on(live_server.url, "vera")

    assert answer.status_code == 403
    assert "already has a user named vera" in answer.text
    assert role_of(type(viewer).objects.get(pk=viewer.pk)) == "viewer"


@pytest.mark.django_db(transaction=True)
def test_the_login_page_has_no_provider_link_while_sign_on_is_off(live_server, provider):
    page = requests.get(f"{live_server.url}/accounts/login/", timeout=10)

    assert "sso/start" not in page.text
    assert requests.get(f"{live_server.url}/accounts/sso/start/", timeout=10).status_code == 404
