"""The role users and clients for the alert tests (the pattern of tests/console/conftest.py).

Users: `viewer`, `operator`, `admin` (in the role group of that name) and `nobody` (in no
group); clients `as_viewer`, `as_operator`, `as_admin`, `as_nobody`. Metrics, rules and
silences are made with tests/alerts/alerttools.py.
"""

import pytest
from django.test import Client

from console.accounts.roles import ensure_role_groups

PASSWORD = "s3cret-pass-for-tests"


# ------------------------------------------------------------------------------ role users


def make_user(django_user_model, username: str, role: str | None):
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(ensure_role_groups()[role])
    return user


@pytest.fixture
def viewer(db, django_user_model):
    return make_user(django_user_model, "vera", "viewer")


@pytest.fixture
def operator(db, django_user_model):
    return make_user(django_user_model, "otto", "operator")


@pytest.fixture
def admin(db, django_user_model):
    return make_user(django_user_model, "ada", "admin")


@pytest.fixture
def nobody(db, django_user_model):
    return make_user(django_user_model, "nemo", None)


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def as_viewer(viewer) -> Client:
    return logged_in(viewer)


@pytest.fixture
def as_operator(operator) -> Client:
    return logged_in(operator)


@pytest.fixture
def as_admin(admin) -> Client:
    return logged_in(admin)


@pytest.fixture
def as_nobody(nobody) -> Client:
    return logged_in(nobody)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """The role users' passwords need no strength here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
