"""/healthz (the process answers), /readyz (the store and the database) and
/healthz/background (Redis and a worker), no login."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from console.background.models import TaskRun

#: Nothing listens here: connecting is refused at once.
CLOSED_REDIS_URL = "redis://127.0.0.1:1/0"


def test_healthz_answers_ok_json_without_login(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"status": "ok"}


def test_healthz_needs_no_database(client):
    # No `db` fixture here: pytest-django makes any database access fail the test.
    response = client.get("/healthz")

    assert response.status_code == 200


def test_healthz_answers_head(client):
    assert client.head("/healthz").status_code == 200


def test_healthz_refuses_post(client):
    assert client.post("/healthz").status_code == 405


def test_healthz_is_not_cached(client):
    assert "no-cache" in client.get("/healthz")["Cache-Control"]


@pytest.fixture
def worker_seen(db) -> TaskRun:
    """A tracked task that finished a moment ago, as a live worker leaves it."""
    now = timezone.now()
    return TaskRun.objects.create(
        name="flush_store",
        every_s=5,
        last_started_at=now - timedelta(seconds=1),
        last_finished_at=now,
        last_outcome=TaskRun.OK,
        runs=1,
    )


@pytest.fixture
def ready(store, redis_db, worker_seen):
    """Everything the checks look at is up: a store, the test Redis, the database, a worker."""
    return store


def test_readyz_is_200_when_every_check_passes(client, ready):
    response = client.get("/readyz")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ready"
    assert body["failing"] == []
    assert set(body["checks"]) == {"store", "database"}
    assert all(check["ok"] for check in body["checks"].values())


def test_background_is_200_when_redis_and_a_worker_answer(client, ready):
    response = client.get("/healthz/background")

    assert response.status_code == 200, response.json()
    assert set(response.json()["checks"]) == {"redis", "worker"}


def test_a_dead_worker_or_redis_keeps_the_replica_ready(client, store, settings, db):
    """No worker ever ran and Redis is gone: every replica stays in rotation (issue 21)."""
    settings.REDIS_URL = CLOSED_REDIS_URL

    assert client.get("/readyz").status_code == 200
    response = client.get("/healthz/background")
    assert response.status_code == 503
    assert response.json()["failing"] == ["redis", "worker"]


def test_readyz_needs_no_login(client, ready):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


def test_background_names_redis_when_it_does_not_answer(client, ready, settings):
    settings.REDIS_URL = CLOSED_REDIS_URL

    response = client.get("/healthz/background")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "failing"
    assert body["failing"] == ["redis"]
    assert "redis did not answer" in body["checks"]["redis"]["detail"]


@pytest.mark.parametrize("path", ["/readyz", "/healthz/background"])
def test_checks_do_not_show_the_redis_url_or_store_path(client, ready, settings, path):
    settings.REDIS_URL = CLOSED_REDIS_URL

    text = client.get(path).content.decode()

    assert "127.0.0.1" not in text
    assert str(settings.TIDEMARK_STORE_DIR) not in text


def test_background_names_the_worker_when_no_task_finished_lately(client, ready, worker_seen):
    worker_seen.last_finished_at = timezone.now() - timedelta(hours=1)
    worker_seen.save()

    response = client.get("/healthz/background")

    assert response.status_code == 503
    assert response.json()["failing"] == ["worker"]


def test_background_names_the_worker_when_no_task_ever_ran(client, store, redis_db, db):
    response = client.get("/healthz/background")

    assert response.status_code == 503
    assert response.json()["failing"] == ["worker"]


def test_background_worker_window_is_a_setting(client, ready, worker_seen, settings):
    worker_seen.last_finished_at = timezone.now() - timedelta(seconds=30)
    worker_seen.save()
    settings.TIDEMARK_READY_WORKER_WINDOW_S = 10

    assert client.get("/healthz/background").json()["failing"] == ["worker"]


def test_readyz_names_the_store_when_it_failed(client, ready):
    ready._fail(OSError("fsync failed"))

    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["store"]
    assert "refuses writes" in body["checks"]["store"]["detail"]


@pytest.mark.parametrize(
    "store_options",
    [{"disk_warn_ratio": 0.0001, "disk_force_ratio": 0.0001, "disk_reject_ratio": 0.0001}],
)
def test_readyz_names_the_store_when_its_disk_is_past_the_reject_ratio(client, ready):
    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["store"]
    assert "full" in body["checks"]["store"]["detail"]


def test_readyz_names_the_database_when_it_does_not_answer(client, ready, monkeypatch):
    from console.health import views

    class Unreachable:
        def cursor(self):
            raise ConnectionError("database down")

    monkeypatch.setattr(views, "connection", Unreachable())

    response = client.get("/readyz")

    assert response.status_code == 503
    assert "database" in response.json()["failing"]


def test_readyz_refuses_post(client, ready):
    assert client.post("/readyz").status_code == 405
