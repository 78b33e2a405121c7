"""API clients for each role, authenticated with real personal tokens, and a small store.

Clients: `anonymous`, `as_nobody` (a user in no role group), `as_viewer`, `as_operator`,
`as_admin`; `clients` maps each of those names to its client for role tables. The helpers
`error_of` and `expected_status` live in tests/api/apitools.py:
``from tests.api.apitools import error_of, expected_status``.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from console.accounts.models import ApiToken
from tests.api.apitools import ALLOWED, error_of, expected_status  # noqa: F401  (for tests)
from tests.conftest import role_group


def _client_for(django_user_model, username: str, role: str | None) -> APIClient:
    # No password: tokens authenticate these users, and hashing one costs ~0.1 s per user.
    user = django_user_model.objects.create_user(username=username, password=None)
    if role is not None:
        user.groups.add(role_group(role))
    _, key = ApiToken.issue(user, "tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    client.user = user
    return client


@pytest.fixture
def anonymous(db) -> APIClient:
    return APIClient()


@pytest.fixture
def as_nobody(db, django_user_model) -> APIClient:
    return _client_for(django_user_model, "nemo", None)


@pytest.fixture
def as_viewer(db, django_user_model) -> APIClient:
    return _client_for(django_user_model, "vera", "viewer")


@pytest.fixture
def as_operator(db, django_user_model) -> APIClient:
    return _client_for(django_user_model, "otto", "operator")


@pytest.fixture
def as_admin(db, django_user_model) -> APIClient:
    return _client_for(django_user_model, "ada", "admin")


@pytest.fixture
def clients(anonymous, as_nobody, as_viewer, as_operator, as_admin) -> dict[str, APIClient]:
    return {
        "anonymous": anonymous,
        "nobody": as_nobody,
        "viewer": as_viewer,
        "operator": as_operator,
        "admin": as_admin,
    }


@pytest.fixture(scope="session")
def served_schema_json(django_db_setup, django_db_blocker) -> bytes:
    """/api/schema/?format=json as a viewer gets it, fetched once a session: it is made from
    the code, not from the database (the viewer and their token are rolled back)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    with django_db_blocker.unblock(), transaction.atomic():
        reader = _client_for(get_user_model(), "schema-reader", "viewer")
        response = reader.get("/api/schema/?format=json")
        transaction.set_rollback(True)
    assert response.status_code == 200, response.content[:500]
    return response.content


@pytest.fixture
def served_schema(served_schema_json) -> dict:
    """The served OpenAPI schema (served_schema_json), a copy of its own for each test."""
    import json

    return json.loads(served_schema_json)
