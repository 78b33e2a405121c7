"""Wrong old passwords on the password-change form are throttled (issue 32, defect 5): a
stolen session could otherwise guess the password behind it at full speed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

CHANGE = "/accounts/password_change/"
NEW = "a-brand-new-pass-4821"


def change(client, old: str):
    return client.post(CHANGE, {"old_password": old, "new_password1": NEW, "new_password2": NEW})


def test_wrong_old_passwords_past_the_limit_answer_429_with_retry_after(as_viewer, settings):
    for _ in range(settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT):
        assert change(as_viewer, "wrong").status_code == 200  # the form, with its error

    refused = change(as_viewer, "wrong")

    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert b"Too many wrong current passwords" in refused.content


def test_the_right_old_password_is_refused_too_while_throttled(
    as_viewer, viewer, password, settings
):
    for _ in range(settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT):
        change(as_viewer, "wrong")

    assert change(as_viewer, password).status_code == 429
    viewer.refresh_from_db()
    assert viewer.check_password(password)


def test_the_limit_is_per_user(as_viewer, as_operator, password, settings):
    for _ in range(settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT):
        change(as_viewer, "wrong")

    assert change(as_operator, password).status_code == 302


def test_a_right_old_password_before_the_limit_clears_the_count(as_viewer, password, settings):
    limit = settings.TIDEMARK_PASSWORD_CHANGE_FAILURE_LIMIT
    for _ in range(limit - 1):
        change(as_viewer, "wrong")
    assert change(as_viewer, password).status_code == 302

    for _ in range(limit - 1):
        assert change(as_viewer, "wrong").status_code == 200
    assert change(as_viewer, "wrong").status_code == 200
