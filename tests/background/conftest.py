"""Fixtures for the background tasks: a patchable store clock and users for /tasks/.

The small store, the real Redis and the real worker come from tests/conftest.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client

PASSWORD = "s3cret-pass-for-tests"


class Clock:
    """The store's clock (``storeadapter.engine.clock.now_ms``), set by the test."""

    def __init__(self, when: datetime) -> None:
        self.set(when)

    def set(self, when: datetime) -> None:
        self.ms = int(when.astimezone(UTC).timestamp() * 1000)

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock(monkeypatch):
    from storeadapter.engine import clock as engine_clock

    fake = Clock(datetime(2030, 1, 10, 0, 0, tzinfo=UTC))
    monkeypatch.setattr(engine_clock, "now_ms", fake)
    return fake


def make_user(django_user_model, username: str, role: str | None):
    from console.accounts.roles import ensure_role_groups

    # The migration made the role groups, but a transactional test's flush removes them.
    groups = ensure_role_groups()
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(groups[role])
    return user


@pytest.fixture
def as_viewer(db, django_user_model) -> Client:
    client = Client()
    client.force_login(make_user(django_user_model, "vera", "viewer"))
    return client


@pytest.fixture
def as_nobody(db, django_user_model) -> Client:
    client = Client()
    client.force_login(make_user(django_user_model, "nemo", None))
    return client
