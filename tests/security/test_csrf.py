"""CSRF: every form refuses a POST without the token and takes one with it; the API asks
session-authenticated changes for the token, token-authenticated ones not.

The clients here enforce CSRF as a browser's requests meet it (Django's test client skips
the check unless told). Each form is posted by a user whose role may use it, so a 403 can
only be the CSRF check.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from console.accounts.models import ApiToken
from tests.conftest import logged_in
from tests.security.access_table import ACCESS, ANONYMOUS, sample_url, send

pytestmark = pytest.mark.django_db

#: A CSRF secret in the shape Django's cookie holds; the form or header carries the same.
SECRET = "a" * 32
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")

FORMS = [key for key, rule in ACCESS.items() if rule.kind == "page" and "POST" in rule.methods]
API_CHANGES = [
    pytest.param(key, method, id=f"{key}-{method}")
    for key, rule in ACCESS.items()
    if rule.kind == "api" and rule.methods.get("GET") != ANONYMOUS
    for method in UNSAFE
    if method in rule.methods
]


@pytest.fixture
def strict_admin(admin) -> Client:
    """A browser session of an admin, with CSRF checked."""
    return logged_in(admin, Client(enforce_csrf_checks=True))


def form_client(key: str, strict_admin: Client) -> Client:
    """A client whose role may post to `key` (anonymous for the public forms)."""
    return (
        Client(enforce_csrf_checks=True)
        if ACCESS[key].methods["POST"] == ANONYMOUS
        else strict_admin
    )


def is_csrf_refusal(response) -> bool:
    return response.status_code == 403 and b"CSRF" in response.content


@pytest.mark.parametrize("key", FORMS)
def test_a_form_without_the_csrf_token_is_refused(key, strict_admin, world):
    client = form_client(key, strict_admin)

    response = client.post(sample_url(key, ACCESS[key], world), {})

    assert is_csrf_refusal(response), response.status_code


@pytest.mark.parametrize("key", FORMS)
def test_a_form_with_the_csrf_token_is_accepted(key, strict_admin, world):
    client = form_client(key, strict_admin)
    client.cookies["csrftoken"] = SECRET

    response = client.post(sample_url(key, ACCESS[key], world), {"csrfmiddlewaretoken": SECRET})

    assert response.status_code != 403, response.content[:300]


@pytest.mark.parametrize(("key", "method"), API_CHANGES)
def test_a_session_api_change_without_the_csrf_token_is_refused(key, method, world, admin):
    client = logged_in(admin, APIClient(enforce_csrf_checks=True))

    response = send(client, method, sample_url(key, ACCESS[key], world))

    assert response.status_code == 403
    error = response.json()["error"]
    assert "CSRF" in error["message"]


@pytest.mark.parametrize(("key", "method"), API_CHANGES)
def test_a_session_api_change_with_the_csrf_token_is_accepted(key, method, world, admin):
    client = logged_in(admin, APIClient(enforce_csrf_checks=True, HTTP_X_CSRFTOKEN=SECRET))
    client.cookies["csrftoken"] = SECRET

    response = send(client, method, sample_url(key, ACCESS[key], world))

    assert response.status_code != 403, response.content[:300]


@pytest.mark.parametrize(("key", "method"), API_CHANGES)
def test_a_token_api_change_needs_no_csrf_token(key, method, world, admin):
    _, secret = ApiToken.issue(admin, "csrf test")
    client = APIClient(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {secret}")

    response = send(client, method, sample_url(key, ACCESS[key], world))

    assert response.status_code != 403, response.content[:300]
