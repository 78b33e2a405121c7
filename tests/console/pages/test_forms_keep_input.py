"""A form that refuses what was typed shows it again (issue 30, case 8: the test-email form
came back empty after an error, so the addresses had to be typed again)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

TEST_EMAIL = "/alerts/test-email/"


def test_the_test_email_form_keeps_its_recipients_after_an_error(as_admin, mailoutbox):
    typed = "ops@example.com, not-an-address"

    response = as_admin.post(TEST_EMAIL, {"recipients": typed}, follow=True)

    assert response.context["test_form"]["recipients"].value() == typed
    assert f'value="{typed}"' in response.content.decode()
    assert mailoutbox == []


def test_the_test_email_form_keeps_its_recipients_when_the_mail_server_refuses(
    as_admin, monkeypatch
):
    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("no mail server here")

    monkeypatch.setattr("console.alerts.views.send_mail", refuse)

    response = as_admin.post(TEST_EMAIL, {"recipients": "ops@example.com"}, follow=True)

    assert response.context["test_form"]["recipients"].value() == "ops@example.com"
