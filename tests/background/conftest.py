"""Fixtures for the background tasks: a small store, the real Redis on a test database, a
real Celery worker in a thread, a patchable store clock, and users for the /tasks/ page.

Redis database 14 of the machine's Redis keeps the tests' broker messages and task locks
apart from anything `make run` uses; it is flushed before and after each test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import redis
from django.test import Client

TEST_REDIS_URL = "redis://127.0.0.1:6379/14"
PASSWORD = "s3cret-pass-for-tests"


def _wait_for(condition: Callable[[], object], timeout: float = 15.0, what: str = "it") -> object:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def use_broker(celery_app, url: str) -> None:
    """Point the Celery app at another broker; its connection pools start anew."""
    celery_app.conf.broker_url = url
    # Drop the pools (as Celery does after a fork) without closing them: kombu keeps one
    # pool per broker URL, and a closed one would be handed back for that URL later.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def wait_for():
    """``wait_for(condition, timeout=15, what=...)``: poll until truthy, or fail."""
    return _wait_for


@pytest.fixture
def redis_db(settings):
    """The real Redis, database 14, as both the lock store and Celery's broker."""
    from console.celery import app as celery_app

    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"these tests need the machine's Redis at {TEST_REDIS_URL}")
    client.flushdb()
    settings.REDIS_URL = TEST_REDIS_URL
    settings.CELERY_BROKER_URL = TEST_REDIS_URL
    old_broker = celery_app.conf.broker_url
    use_broker(celery_app, TEST_REDIS_URL)
    yield client
    use_broker(celery_app, old_broker)
    client.flushdb()
    client.close()


def _read_uncommitted(sender=None, connection=None, **kwargs) -> None:
    if connection is not None and connection.vendor == "sqlite":
        connection.connection.execute("PRAGMA read_uncommitted = 1")


@pytest.fixture
def lock_free_reads(transactional_db):
    """Let the test's and the worker's SQLite connections read without table locks.

    The test database is SQLite in memory with a shared cache: there a reader and a
    writer on two threads' connections make one of them fail at once with "database
    table is locked" (the busy timeout does not apply). Reads that take no lock leave
    only write against write, which the tests never do at the same time.
    """
    from django.db import connection
    from django.db.backends.signals import connection_created

    connection_created.connect(_read_uncommitted, dispatch_uid="tests-read-uncommitted")
    connection.ensure_connection()
    _read_uncommitted(connection=connection)
    yield
    connection_created.disconnect(dispatch_uid="tests-read-uncommitted")


@pytest.fixture
def worker(redis_db, lock_free_reads):
    """A real Celery worker (solo pool) in a thread of this process, on Redis db 14."""
    import celery.contrib.testing.tasks  # noqa: F401 - registers celery.ping
    from celery.contrib.testing.worker import start_worker

    from console.celery import app as celery_app

    with start_worker(
        celery_app, perform_ping_check=False, pool="solo", loglevel="WARNING"
    ) as running:
        yield running


@pytest.fixture
def store_options():
    """StoreConfig overrides for the `store` fixture; tests override this fixture."""
    return {}


@pytest.fixture
def store(settings, tmp_path, store_options):
    """A fresh store for the console under test, closed afterwards."""
    from storeadapter.access import close_all

    settings.TIDEMARK_STORE_DIR = tmp_path / "store"
    # Small files: a default segment reserves 1 GiB of disk, the key index 420 MB.
    settings.TIDEMARK_STORE_OPTIONS = {
        "segment_bytes": 4 << 20,
        "index_slots": 1024,
        "index_entries": 8192,
        "disk_warn_ratio": 1.0,
        "disk_force_ratio": 1.0,
        "disk_reject_ratio": 1.0,
        **store_options,
    }
    from console.core.store import get_store

    opened = get_store()
    yield opened
    close_all()


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
