"""Users for each role, and clients logged in as them.

Users: `viewer`, `operator`, `admin` (in the role group of that name) and `nobody` (in no
group). Clients: `as_viewer`, `as_operator`, `as_admin`, `as_nobody`. pytest-django's own
`admin_user` / `admin_client` (a superuser) are left as they are.
"""

import pytest
from django.test import Client

from console.accounts.roles import ensure_role_groups

PASSWORD = "s3cret-pass-for-tests"


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
    """Logged in but in no role group."""
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
    """Logged in as a user in the admin group (not a superuser, not staff)."""
    return logged_in(admin)


@pytest.fixture
def as_nobody(nobody) -> Client:
    return logged_in(nobody)
