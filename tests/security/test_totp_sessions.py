"""The second factor's rule on every request (console/accounts/totp.py): a session of a user
with TOTP that gave no code is logged out. The rule reads the user's second-factor state
with the user row (no query of its own a request), and a device set up or removed in
another session, by an admin or in Django's admin takes effect on the next request."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.functional import SimpleLazyObject
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.conftest import logged_in
from tests.totpcodes import app_code

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
#: A console page that reads nothing from the database itself.
PAGE = "/accounts/password_change/"
ADDRESS = "198.51.100.9"


def queries_of(client: Client, path: str) -> list[str]:
    client.get(path)  # the first request may make what later ones reuse
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200
    return [query["sql"] for query in queries.captured_queries]


@pytest.fixture
def root(django_user_model, password):
    return django_user_model.objects.create_superuser("root", password=password)


def test_a_page_request_reads_only_the_session_and_the_user(root):
    queries = queries_of(logged_in(root), PAGE)

    assert len(queries) == 2, queries


def test_a_page_request_after_a_password_login_reads_only_the_session_and_the_user(root, password):
    client = Client()
    client.post(LOGIN, {"username": "root", "password": password}, REMOTE_ADDR=ADDRESS)

    queries = queries_of(client, PAGE)

    assert len(queries) == 2, queries


def test_a_page_request_of_a_role_user_reads_no_device(as_viewer):
    queries = queries_of(as_viewer, PAGE)

    assert not any("otp_totp_totpdevice" in sql for sql in queries), queries


def test_a_device_confirmed_in_another_session_logs_out_a_session_without_its_code(viewer):
    elsewhere = logged_in(viewer)
    here = logged_in(viewer)
    assert here.get(PAGE).status_code == 200
    secret = elsewhere.post("/accounts/account/totp/").context["secret"]

    elsewhere.post("/accounts/account/totp/confirm/", {"code": app_code(secret)})

    response = here.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith(LOGIN)
    assert elsewhere.get(PAGE).status_code == 200


def test_a_device_removed_by_an_admin_no_longer_logs_out_a_session_without_a_code(viewer, as_admin):
    TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)
    as_admin.post(f"/accounts/users/{viewer.pk}/", {"action": "reset_totp"})

    # A session without a code (Django admin's own login form): it stands, TOTP is off.
    response = logged_in(viewer).get(PAGE)

    assert response.status_code == 200


def test_a_device_made_in_the_shell_logs_out_a_session_without_its_code(viewer):
    client = logged_in(viewer)
    assert client.get(PAGE).status_code == 200

    TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)

    assert client.get(PAGE).status_code == 302


def test_a_device_deleted_in_the_shell_lets_a_session_without_a_code_stand(viewer):
    device = TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)
    device.delete()

    assert logged_in(viewer).get(PAGE).status_code == 200


def test_an_unconfirmed_device_does_not_ask_for_a_code(viewer):
    client = logged_in(viewer)
    TOTPDevice.objects.create(user=viewer, name="phone", confirmed=False)

    assert client.get(PAGE).status_code == 200


def test_deleting_a_user_with_a_device_deletes_its_second_factor_state(viewer):
    TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)

    viewer.delete()

    assert not TOTPDevice.objects.exists()


def test_the_migration_gives_a_user_with_a_device_its_state(viewer):
    from importlib import import_module

    from django.apps import apps

    from console.accounts.models import SecondFactor

    TOTPDevice.objects.create(user=viewer, name="phone", confirmed=True)
    TOTPDevice.objects.create(user=viewer, name="tablet", confirmed=False)
    SecondFactor.objects.all().delete()  # as before the migration
    client = logged_in(viewer)
    assert client.get(PAGE).status_code == 200

    import_module("console.accounts.migrations.0009_second_factor").fill(apps, None)

    assert client.get(PAGE).status_code == 302


def test_a_page_request_wraps_the_user_once(root):
    response = logged_in(root).get(PAGE)

    user = response.wsgi_request.user
    assert user.is_verified() is False
    assert not isinstance(user._wrapped, SimpleLazyObject)
