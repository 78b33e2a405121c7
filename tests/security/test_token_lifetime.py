"""API tokens stop working when their user's password is changed or reset, when they
expire; a read-only token only reads (issue 21)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def api(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_password_change_ends_the_users_tokens(store, operator, password, as_operator):
    _, key = ApiToken.issue(operator, "script")
    assert api(key).get("/api/v1/topics/").status_code == 200

    response = as_operator.post(
        "/accounts/password_change/",
        {
            "old_password": password,
            "new_password1": "An0ther-long-passphrase",
            "new_password2": "An0ther-long-passphrase",
        },
    )
    assert response.status_code == 302

    refused = api(key).get("/api/v1/topics/")
    assert refused.status_code == 401
    assert "changed their password" in refused.json()["error"]["message"]


def test_a_password_reset_by_an_admin_ends_the_users_tokens(store, viewer, as_admin):
    _, key = ApiToken.issue(viewer, "script")

    response = as_admin.post(f"/accounts/users/{viewer.pk}/", {"action": "reset_password"})
    assert response.status_code in (200, 302)

    assert api(key).get("/api/v1/topics/").status_code == 401


def test_a_password_reset_by_mail_ends_the_users_tokens(store, viewer):
    from django.contrib.auth.forms import SetPasswordForm

    _, key = ApiToken.issue(viewer, "script")
    form = SetPasswordForm(
        viewer, {"new_password1": "Res3t-passphrase-x", "new_password2": "Res3t-passphrase-x"}
    )
    assert form.is_valid(), form.errors
    form.save()  # what the reset link's page does

    assert api(key).get("/api/v1/topics/").status_code == 401


def test_an_expired_token_is_refused_with_when(store, viewer):
    token, key = ApiToken.issue(viewer, "short", expires_at=timezone.now() + timedelta(days=1))
    assert api(key).get("/api/v1/topics/").status_code == 200

    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    refused = api(key).get("/api/v1/topics/")
    assert refused.status_code == 401
    assert "expired" in refused.json()["error"]["message"]


def test_a_read_only_token_reads_but_changes_nothing(store, admin):
    _, key = ApiToken.issue(admin, "dashboards", read_only=True)
    client = api(key)

    assert client.get("/api/v1/topics/").status_code == 200
    refused = client.post("/api/v1/topics/", {"name": "new", "queues": 1}, format="json")

    assert refused.status_code == 403
    assert "read-only" in refused.json()["error"]["message"]
    assert "new" not in [t.name for t in store.topics()]


def test_the_tokens_page_makes_expiring_and_read_only_tokens(db, viewer, as_viewer):
    response = as_viewer.post(
        "/accounts/tokens/", {"name": "ci", "expires_in": "7", "read_only": "on"}
    )

    assert response.status_code == 200
    token = ApiToken.objects.get(user=viewer, name="ci")
    assert token.read_only
    assert timedelta(days=6) < token.expires_at - timezone.now() <= timedelta(days=7)
    listed = as_viewer.get("/accounts/tokens/").content.decode()
    assert "read only" in listed


def test_a_session_lasts_twelve_hours_by_default(settings, viewer, password):
    client = Client()
    client.post("/accounts/login/", {"username": viewer.username, "password": password})

    assert settings.SESSION_COOKIE_AGE == 12 * 3600
    assert client.session.get_expiry_age() == 12 * 3600
