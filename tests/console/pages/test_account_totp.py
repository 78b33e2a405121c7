"""The account page's two-factor (issue 32, item 9): a local user sets up TOTP (the secret
shown once, as a QR code and as text), confirms it with a code, turns it off with their
password; an admin resets a user's TOTP from the users page. Each change is audited."""

from __future__ import annotations

import re

import pytest
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.accounts.models import SsoIdentity
from console.audit.models import AuditEntry
from tests.totpcodes import app_code

pytestmark = pytest.mark.django_db

ACCOUNT = "/accounts/account/"


def code_from_secret(secret: str, steps_ahead: int = 0) -> str:
    return app_code(secret, steps_ahead)


def shown_secret(page: str) -> str:
    found = re.search(r'<code class="tm-secret">([A-Z2-7]+)</code>', page)
    assert found is not None, page
    return found.group(1)


def test_setting_up_shows_the_secret_once_with_its_qr_code(as_viewer):
    page = as_viewer.post("/accounts/account/totp/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "<svg" in text
    secret = shown_secret(text)
    assert "no-store" in page["Cache-Control"]
    assert secret not in as_viewer.get(ACCOUNT).content.decode()


def test_a_right_code_turns_two_factor_on_and_is_audited(as_viewer, viewer):
    secret = shown_secret(as_viewer.post("/accounts/account/totp/").content.decode())

    response = as_viewer.post("/accounts/account/totp/confirm/", {"code": code_from_secret(secret)})

    assert response.status_code == 302
    assert TOTPDevice.objects.get(user=viewer).confirmed
    entry = AuditEntry.objects.get(action="user.totp.enrol")
    assert (entry.username, entry.target) == (viewer.username, f"user {viewer.username}")
    # The session that confirmed holds the code: it stays logged in.
    assert as_viewer.get("/").status_code == 200


def test_a_wrong_confirmation_code_leaves_two_factor_off(as_viewer, viewer):
    as_viewer.post("/accounts/account/totp/")

    response = as_viewer.post("/accounts/account/totp/confirm/", {"code": "000000"}, follow=True)

    assert "two-factor is still off" in response.content.decode()
    assert not TOTPDevice.objects.filter(user=viewer).exists()
    assert not AuditEntry.objects.filter(action="user.totp.enrol").exists()


def _enrolled(client) -> None:
    secret = shown_secret(client.post("/accounts/account/totp/").content.decode())
    client.post("/accounts/account/totp/confirm/", {"code": code_from_secret(secret)})


def test_turning_two_factor_off_needs_the_password(as_viewer, viewer, password):
    _enrolled(as_viewer)

    refused = as_viewer.post("/accounts/account/totp/remove/", {"password": "wrong"}, follow=True)
    assert "not your current password" in refused.content.decode()
    assert TOTPDevice.objects.filter(user=viewer).exists()

    as_viewer.post("/accounts/account/totp/remove/", {"password": password})
    assert not TOTPDevice.objects.filter(user=viewer).exists()
    assert AuditEntry.objects.filter(action="user.totp.remove").exists()


def test_wrong_passwords_to_turn_it_off_are_limited(as_viewer, settings):
    _enrolled(as_viewer)
    for _ in range(settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT):
        as_viewer.post("/accounts/account/totp/remove/", {"password": "wrong"})

    response = as_viewer.post("/accounts/account/totp/remove/", {"password": "wrong"})

    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0


def test_an_admin_resets_a_users_two_factor_and_it_is_audited(as_admin, viewer):
    TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)
    listed = as_admin.get("/accounts/users/").content.decode()
    assert "Reset two-factor" in listed

    response = as_admin.post(f"/accounts/users/{viewer.pk}/", {"action": "reset_totp"})

    assert response.status_code == 302
    assert not TOTPDevice.objects.filter(user=viewer).exists()
    entry = AuditEntry.objects.get(action="user.totp.reset")
    assert (entry.username, entry.target) == ("ada", f"user {viewer.username}")
    assert (entry.before, entry.after) == ({"totp": True}, {"totp": False})


def test_a_user_signing_in_through_the_provider_has_no_local_two_factor(django_user_model, client):
    user = django_user_model.objects.create_user(username="sam", password=None)
    SsoIdentity.objects.create(user=user, issuer="https://idp.example", subject="42")
    client.force_login(user)

    assert "two-factor is up to" in client.get(ACCOUNT).content.decode()
    client.post("/accounts/account/totp/")
    assert not TOTPDevice.objects.filter(user=user).exists()
