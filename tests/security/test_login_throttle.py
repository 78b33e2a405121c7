"""Login throttling (django-axes) and the password-reset mail limit (issue 21: 30 wrong
passwords in 13 s were all answered and the 31st logged in; 12 reset mails went to one
address). Lockouts lock one (user name, address) pair: tests/security/test_login_lockouts.py."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def try_login(client: Client, username: str, password: str, address: str = "203.0.113.7"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_the_right_password_after_the_failure_limit_is_refused(viewer, password, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert try_login(client, viewer.username, "wrong").status_code == 200  # the form again
    assert try_login(client, viewer.username, "wrong").status_code == 429

    locked = try_login(client, viewer.username, password)

    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session


def test_a_locked_user_name_still_logs_in_from_another_address(viewer, password, settings):
    # Lockouts lock the (user name, address) pair (issue 30): one bad client cannot lock an
    # account out everywhere.
    for _ in range(settings.AXES_FAILURE_LIMIT):
        try_login(Client(), viewer.username, "wrong", address="203.0.113.7")

    assert try_login(Client(), viewer.username, password, "203.0.113.7").status_code == 429
    assert try_login(Client(), viewer.username, password, "198.51.100.9").status_code == 302


def test_one_address_trying_many_names_locks_each_name_it_overused_only(viewer, password, settings):
    for number in range(settings.AXES_FAILURE_LIMIT):
        try_login(Client(), f"guess{number}", "wrong", address="203.0.113.7")

    assert try_login(Client(), viewer.username, password, "203.0.113.7").status_code == 302


def test_a_success_before_the_limit_clears_the_failures(viewer, password, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        try_login(client, viewer.username, "wrong")
    assert try_login(client, viewer.username, password).status_code == 302
    client.logout()

    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        try_login(client, viewer.username, "wrong")
    assert try_login(client, viewer.username, password).status_code == 302


def test_the_lockout_ends_after_the_cool_off(viewer, password, settings):
    from datetime import timedelta

    from axes.models import AccessAttempt
    from django.utils import timezone

    for _ in range(settings.AXES_FAILURE_LIMIT):
        try_login(Client(), viewer.username, "wrong")
    AccessAttempt.objects.update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )

    assert try_login(Client(), viewer.username, password).status_code == 302


def test_password_reset_mails_are_limited_per_address_per_hour(viewer, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    viewer.email = "vera@example.com"
    viewer.save()
    limit = settings.TIDEMARK_PASSWORD_RESETS_PER_HOUR

    for number in range(12):
        response = Client().post(
            "/accounts/password_reset/",
            {"email": "Vera@example.com"},
            REMOTE_ADDR=f"198.51.100.{number}",
        )
        assert response.status_code == 302  # the same "check your mail" either way

    assert len(mail.outbox) == limit


def test_password_reset_mails_are_limited_per_client_address(settings, django_user_model):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    for number in range(6):
        django_user_model.objects.create_user(f"u{number}", f"u{number}@example.com", "pw")

    for number in range(6):
        Client().post(
            "/accounts/password_reset/", {"email": f"u{number}@example.com"}, REMOTE_ADDR="::1"
        )

    assert len(mail.outbox) == settings.TIDEMARK_PASSWORD_RESETS_PER_HOUR
