"""Logins, failed logins, lockouts and password changes are written to the audit log
(issue 30, access 2: none of them were). Unlocks: tests/security/test_login_lockouts.py;
offset commits made through the API: tests/api/test_commit_audit_api.py."""

from __future__ import annotations

import pytest
from django.test import Client

from console.audit.models import AuditEntry

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
ADDRESS = "203.0.113.7"


def try_login(username: str, password: str, client: Client | None = None):
    client = client or Client()
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=ADDRESS)


def test_a_login_is_audited_with_the_address(viewer, password):
    assert try_login(viewer.username, password).status_code == 302

    entry = AuditEntry.objects.get(action="login")
    assert (entry.username, entry.target) == ("vera", "user vera")
    assert entry.detail == f"from {ADDRESS}"


def test_a_failed_login_is_audited_with_the_name_tried_and_the_address(viewer):
    try_login("no-such-user", "wrong")

    entry = AuditEntry.objects.get(action="login.failure")
    assert entry.username == ""
    assert entry.target == f"login of no-such-user from {ADDRESS}"


def test_a_lockout_is_audited_once_when_it_starts(viewer, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT + 2):
        try_login(viewer.username, "wrong")

    entry = AuditEntry.objects.get(action="login.lockout")
    assert entry.target == f"login of vera from {ADDRESS}"
    assert entry.after["failures"] == settings.AXES_FAILURE_LIMIT
    assert "paused_until" in entry.after


def test_a_password_change_is_audited_without_the_password(viewer, password):
    client = Client()
    client.force_login(viewer)
    new = "another-long-passphrase-7"

    response = client.post(
        "/accounts/password_change/",
        {"old_password": password, "new_password1": new, "new_password2": new},
    )

    assert response.status_code == 302
    entry = AuditEntry.objects.get(action="user.password")
    assert (entry.username, entry.target) == ("vera", "user vera")
    assert entry.detail == "changed by the user on the password page"
    assert new not in str(entry.before) + str(entry.after) + entry.detail
