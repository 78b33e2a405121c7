"""Starting and stopping the test OpenID Connect provider (serve.py) for the single sign-on
tests, HTTP-client and browser alike."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SERVE = Path(__file__).resolve().parent / "serve.py"
#: Every provider user's password.
PASSWORD = "provider-password-1"
#: The provider's users and their groups there.
USERS = [
    {"username": "alice", "email": "alice@example.org", "groups": ["tidemark-admins", "staff"]},
    {"username": "oscar", "email": "oscar@example.org", "groups": ["sre"]},
    {"username": "mallory", "email": "mallory@example.org", "groups": ["contractors"]},
    # A name the console's local accounts already have (the `viewer` fixture's).
    {"username": "vera", "email": "vera@example.org", "groups": ["sre"]},
]
#: What the console maps those groups to.
ROLE_MAP = {"tidemark-admins": "admin", "sre": "operator"}


@contextmanager
def running_provider(home: Path, console_url: str) -> Iterator[dict]:
    """A provider process whose one client redirects to ``console_url``'s callback: its
    discovery document and the client's credentials. Stopped by its PID on exit."""
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
        "redirect_uri": f"{console_url}/accounts/sso/callback/",
        "users": [{**user, "password": PASSWORD} for user in USERS],
    }
    (home / "config.json").write_text(json.dumps(config))
    with open(home / "stderr.log", "wb") as errors:
        process = subprocess.Popen(
            [sys.executable, str(SERVE), str(home / "config.json")],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        line = process.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"the provider did not start: {(home / 'stderr.log').read_text()}")
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
        process.stdout.close()


def configure_console(settings, provider: dict) -> None:
    """The console's settings for ``provider``, as an operator copies them from its
    discovery document."""
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
