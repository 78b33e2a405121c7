"""/api/v1/tasks/: every periodic task's health, read-only, with the /tasks/ page's STALE rule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from console.background.models import TaskRun
from console.background.tasks import EXPIRE_TASK, FLUSH_TASK
from tests.api.apitools import error_of, expected_status

pytestmark = pytest.mark.django_db

CLIENTS = ("anonymous", "nobody", "viewer", "operator", "admin")
TASKS = "/api/v1/tasks/"


def finished_run(name: str, every_s: float, ago: timedelta, **fields) -> TaskRun:
    finished = timezone.now() - ago
    values = {
        "every_s": every_s,
        "last_started_at": finished - timedelta(milliseconds=20),
        "last_finished_at": finished,
        "last_duration_ms": 20.0,
        "last_outcome": TaskRun.OK,
        "last_message": "async flush mode: fsynced and checkpointed.",
        "runs": 7,
        "failures": 1,
    }
    values.update(fields)
    return TaskRun.objects.create(name=name, **values)


def tasks_by_name(client) -> dict[str, dict]:
    response = client.get(TASKS)
    assert response.status_code == 200, response.content
    return {task["name"]: task for task in response.json()["results"]}


@pytest.fixture
def two_tasks(settings):
    settings.CELERY_BEAT_SCHEDULE = {
        "flush-store": {"task": FLUSH_TASK, "schedule": 5},
        "expire-segments": {"task": EXPIRE_TASK, "schedule": timedelta(hours=1)},
    }


@pytest.mark.parametrize("who", CLIENTS)
def test_reading_needs_viewer(clients, who):
    response = clients[who].get(TASKS)

    assert response.status_code == expected_status(who, "viewer", 200)
    if response.status_code != 200:
        error_of(response)


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_it_is_read_only(as_admin, method):
    response = getattr(as_admin, method)(TASKS, {}, format="json")

    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


def test_every_scheduled_task_is_listed_in_schedule_order(as_viewer, settings):
    body = as_viewer.get(TASKS).json()

    assert [t["name"] for t in body["results"]] == list(settings.CELERY_BEAT_SCHEDULE)
    assert [t["task"] for t in body["results"]] == [
        spec["task"] for spec in settings.CELERY_BEAT_SCHEDULE.values()
    ]
    assert body["count"] == len(settings.CELERY_BEAT_SCHEDULE)
    assert all(t["scheduled"] for t in body["results"])


def test_a_recent_run_is_shown_with_its_figures_and_not_stale(as_viewer, two_tasks):
    run = finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=2))

    task = tasks_by_name(as_viewer)["flush-store"]

    assert task == {
        "name": "flush-store",
        "task": FLUSH_TASK,
        "scheduled": True,
        "every_s": 5.0,
        "schedule": "every 5 s",
        "last_started_ms": int(run.last_started_at.timestamp() * 1000),
        "last_finished_ms": int(run.last_finished_at.timestamp() * 1000),
        "last_duration_ms": 20.0,
        "outcome": "ok",
        "message": "async flush mode: fsynced and checkpointed.",
        "runs": 7,
        "failures": 1,
        "running": False,
        "progress": None,
        "stale": False,
        "stale_reason": "",
        "waiting": "",
    }


def test_a_task_not_finished_within_three_intervals_is_stale(as_viewer, two_tasks):
    finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=16))
    finished_run(EXPIRE_TASK, 3600, ago=timedelta(hours=2))

    tasks = tasks_by_name(as_viewer)

    assert tasks["flush-store"]["stale"] is True
    assert "(> 3× its interval)" in tasks["flush-store"]["stale_reason"]
    assert tasks["expire-segments"]["stale"] is False
    assert tasks["expire-segments"]["schedule"] == "every 1 h"


def test_a_task_that_never_ran_although_due_is_stale(as_viewer, two_tasks):
    finished_run(
        EXPIRE_TASK,
        3600,
        ago=timedelta(minutes=5),
        created_at=timezone.now() - timedelta(minutes=1),
    )

    task = tasks_by_name(as_viewer)["flush-store"]

    assert (task["stale"], task["stale_reason"], task["waiting"]) == (True, "never ran", "")
    assert (task["runs"], task["outcome"], task["last_started_ms"]) == (0, None, None)


def test_a_task_not_yet_due_is_waiting_not_stale(as_viewer, two_tasks):
    finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=1))

    task = tasks_by_name(as_viewer)["expire-segments"]

    assert task["stale"] is False
    assert task["waiting"].startswith("not due yet: the first run is due by ")


def test_a_running_task_shows_its_progress(as_viewer, two_tasks):
    finished_run(
        EXPIRE_TASK,
        3600,
        ago=timedelta(minutes=70),
        last_started_at=timezone.now() - timedelta(seconds=5),
        progress=0.42,
    )

    task = tasks_by_name(as_viewer)["expire-segments"]

    assert (task["running"], task["progress"], task["stale"]) == (True, 0.42, False)


def test_a_failed_and_a_skipped_run_say_so(as_viewer, two_tasks):
    finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=1), last_outcome=TaskRun.FAILED)
    finished_run(
        EXPIRE_TASK,
        3600,
        ago=timedelta(seconds=1),
        last_outcome=TaskRun.SKIPPED,
        last_message="another run of this task was still going",
    )

    tasks = tasks_by_name(as_viewer)

    assert tasks["flush-store"]["outcome"] == "failed"
    assert tasks["expire-segments"]["outcome"] == "skipped"
    assert tasks["expire-segments"]["message"] == "another run of this task was still going"


def test_a_recorded_task_missing_from_the_schedule_is_listed(as_viewer, settings):
    settings.CELERY_BEAT_SCHEDULE = {}
    finished_run("old.tasks.compact", 60, ago=timedelta(seconds=10))

    (task,) = as_viewer.get(TASKS).json()["results"]

    assert (task["name"], task["scheduled"], task["every_s"]) == ("old.tasks.compact", False, 60)
    assert task["schedule"] == "every 1 min"


def test_tasks_are_paged(as_viewer, two_tasks):
    first = as_viewer.get(TASKS + "?page_size=1").json()
    second = as_viewer.get(TASKS + "?page_size=1&page=2").json()

    assert first["count"] == 2
    assert [t["name"] for t in first["results"] + second["results"]] == [
        "flush-store",
        "expire-segments",
    ]
    assert as_viewer.get(TASKS + "?page=3&page_size=1").status_code == 404


def test_stale_is_the_same_as_on_the_page(as_viewer, redis_db, two_tasks):
    finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=16))
    finished_run(EXPIRE_TASK, 3600, ago=timedelta(minutes=5))
    page_client = Client()
    page_client.force_login(as_viewer.user)

    page = page_client.get("/tasks/").content.decode()
    tasks = tasks_by_name(as_viewer)

    for name, task in tasks.items():
        start = page.index(f'<tr id="task-{name}">')
        row = page[start : page.index("</tr>", start)]
        assert ("STALE" in row) == task["stale"], name
    assert [t["stale"] for t in tasks.values()] == [True, False]
