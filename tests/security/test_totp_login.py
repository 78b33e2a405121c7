"""Optional TOTP for local accounts (issue 32, item 9): a user with a confirmed device is
asked for a code after a right password; wrong codes count as wrong passwords (the pair
lockout and the pause per name of item 5); a session without a code does not stand; API
tokens are not affected."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.accounts.models import ApiToken
from console.audit.models import AuditEntry
from tests.totpcodes import app_code

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
CODE = "/accounts/login/code/"
ADDRESS = "198.51.100.4"


def code_for(device: TOTPDevice, steps_ahead: int = 0) -> str:
    """The code the app shows now (or ``steps_ahead`` periods later: a code of the next
    period is accepted, and is not a replay of one used in this period)."""
    return app_code(device.bin_key, steps_ahead, device.step, device.drift)


@pytest.fixture
def device(viewer) -> TOTPDevice:
    return TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)


def password_step(client: Client, user, password: str, next_url: str = ""):
    data = {"username": user.username, "password": password}
    if next_url:
        data["next"] = next_url
    return client.post(LOGIN, data, REMOTE_ADDR=ADDRESS)


def test_a_right_password_asks_for_the_code_and_opens_no_session(viewer, password, device):
    client = Client()

    response = password_step(client, viewer, password)

    assert response.status_code == 302
    assert response["Location"] == CODE
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302


def test_the_right_code_logs_in_goes_to_next_and_is_audited(viewer, password, device):
    client = Client()
    password_step(client, viewer, password, next_url="/topics/")

    response = client.post(CODE, {"code": code_for(device)}, REMOTE_ADDR=ADDRESS)

    assert response.status_code == 302
    assert response["Location"] == "/topics/"
    assert client.get("/").status_code == 200
    entry = AuditEntry.objects.get(action="login")
    assert entry.detail == f"from {ADDRESS} with a TOTP code"


def test_a_wrong_code_is_refused_and_audited_as_a_failed_login(viewer, password, device):
    client = Client()
    password_step(client, viewer, password)

    response = client.post(CODE, {"code": "000000"}, REMOTE_ADDR=ADDRESS)

    assert response.status_code == 200
    assert "That code is not right" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert AuditEntry.objects.filter(
        action="login.failure", target=f"login of {viewer.username} from {ADDRESS}"
    ).exists()


def test_wrong_codes_lock_the_pair_like_wrong_passwords(viewer, password, device, settings):
    client = Client()
    password_step(client, viewer, password)
    answers = [
        client.post(CODE, {"code": "000000"}, REMOTE_ADDR=ADDRESS).status_code
        for _ in range(settings.AXES_FAILURE_LIMIT)
    ]

    right = client.post(CODE, {"code": code_for(device)}, REMOTE_ADDR=ADDRESS)

    assert answers[-1] == 429
    assert right.status_code == 429
    assert int(right["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session
    # The password step from that address is locked too: one count for both.
    assert password_step(Client(), viewer, password).status_code == 429


def test_wrong_codes_from_many_addresses_pause_the_name(viewer, password, device, settings):
    settings.TIDEMARK_LOGIN_FREE_FAILURES = 2
    late = Client()
    late.post(LOGIN, {"username": viewer.username, "password": password}, REMOTE_ADDR="192.0.2.9")
    for n in range(settings.TIDEMARK_LOGIN_FREE_FAILURES):
        client = Client()
        address = f"192.0.2.{n + 1}"
        client.post(LOGIN, {"username": viewer.username, "password": password}, REMOTE_ADDR=address)
        client.post(CODE, {"code": "000000"}, REMOTE_ADDR=address)

    paused = late.post(CODE, {"code": code_for(device)}, REMOTE_ADDR="192.0.2.9")

    assert paused.status_code == 429
    assert "Retry-After" in paused
    assert "_auth_user_id" not in late.session


def test_the_code_step_without_a_right_password_sends_back_to_the_login(viewer, device):
    response = Client().post(CODE, {"code": code_for(device)})

    assert response.status_code == 302
    assert response["Location"] == LOGIN


def test_a_code_step_older_than_its_limit_starts_again(viewer, password, device, settings):
    client = Client()
    password_step(client, viewer, password)
    settings.TIDEMARK_TOTP_STEP_SECONDS = 0
    time.sleep(0.01)

    response = client.post(CODE, {"code": code_for(device)}, REMOTE_ADDR=ADDRESS)

    assert response.status_code == 302
    assert response["Location"] == LOGIN
    assert "_auth_user_id" not in client.session


def test_a_user_without_totp_logs_in_with_the_password_alone(viewer, password):
    client = Client()

    response = password_step(client, viewer, password)

    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_a_session_that_gave_no_code_is_logged_out(viewer, device):
    client = Client()
    client.force_login(viewer)  # as Django admin's own login form would

    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith(LOGIN)


def test_api_tokens_work_for_a_user_with_totp(viewer, device):
    _, key = ApiToken.issue(viewer, "script")

    response = Client().get("/api/v1/topics/", HTTP_AUTHORIZATION=f"Token {key}")

    assert response.status_code == 200


def test_the_django_admin_login_sends_to_the_console_login_with_its_code_step(
    django_user_model, password
):
    staff = django_user_model.objects.create_superuser("root", password=password)
    TOTPDevice.objects.create(user=staff, name="phone", confirmed=True)
    client = Client()

    sent = client.post(
        "/admin/login/?next=/admin/auth/", {"username": "root", "password": password}
    )

    assert sent.status_code == 302
    assert sent["Location"] == "/accounts/login/?next=/admin/auth/"
    assert "_auth_user_id" not in client.session
    assert password_step(client, staff, password)["Location"] == CODE


def test_a_logged_in_user_who_is_no_staff_is_told_so_by_the_admin_login(as_viewer):
    response = as_viewer.get("/admin/login/")

    assert response.status_code == 403
    assert "is not a Django admin (staff) account" in response.content.decode()
