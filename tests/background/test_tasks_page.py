"""/tasks/: every scheduled task with its last run, STALE flags, and the worker line."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from console.background.models import TaskRun
from console.background.tasks import EXPIRE_TASK, FLUSH_TASK

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def row_html(page: str, entry: str) -> str:
    """The table row of schedule entry ``entry`` (e.g. "flush-store")."""
    start = page.index(f'<tr id="task-{entry}">')
    return page[start : page.index("</tr>", start)]


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


def test_anonymous_visitor_is_sent_to_login(client):
    response = client.get("/tasks/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/tasks/")


def test_a_user_without_a_role_is_refused(as_nobody, redis_db):
    assert as_nobody.get("/tasks/").status_code == 403


def test_viewer_sees_every_scheduled_task(as_viewer, redis_db, settings):
    response = as_viewer.get("/tasks/")

    assert response.status_code == 200
    page = response.content.decode()
    for entry, spec in settings.CELERY_BEAT_SCHEDULE.items():
        assert f'id="task-{entry}"' in page
        assert spec["task"] in page
    assert '<a href="/tasks/" aria-current="page">Tasks</a>' in page


def test_a_recent_run_is_shown_with_its_figures_and_not_stale(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {"flush-store": {"task": FLUSH_TASK, "schedule": 5}}
    finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=2))

    row = row_html(as_viewer.get("/tasks/").content.decode(), "flush-store")

    assert "every 5 s" in row
    assert "fsynced and checkpointed" in row
    assert ">7<" in row and ">1<" in row  # runs, failures
    assert "20 ms" in row
    assert "STALE" not in row


def test_a_task_not_finished_within_three_intervals_is_flagged_stale(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {
        "flush-store": {"task": FLUSH_TASK, "schedule": 5},
        "expire-segments": {"task": EXPIRE_TASK, "schedule": timedelta(hours=1)},
    }
    finished_run(FLUSH_TASK, 5, ago=timedelta(seconds=16))
    finished_run(EXPIRE_TASK, 3600, ago=timedelta(hours=2))

    page = as_viewer.get("/tasks/").content.decode()

    assert "STALE" in row_html(page, "flush-store")
    assert "STALE" not in row_html(page, "expire-segments")
    assert "1 task stale" in page


def test_a_task_that_never_ran_although_due_is_flagged_stale(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {
        "flush-store": {"task": FLUSH_TASK, "schedule": 5},
        "expire-segments": {"task": EXPIRE_TASK, "schedule": 60},
    }
    finished_run(
        FLUSH_TASK, 5, timedelta(seconds=1), created_at=timezone.now() - timedelta(hours=1)
    )

    row = row_html(as_viewer.get("/tasks/").content.decode(), "expire-segments")

    assert "STALE" in row
    assert "never ran" in row


def test_a_task_not_yet_due_after_the_start_is_not_stale(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {
        "flush-store": {"task": FLUSH_TASK, "schedule": 5},
        "expire-segments": {"task": EXPIRE_TASK, "schedule": 3600},
    }
    finished_run(
        FLUSH_TASK, 5, timedelta(seconds=1), created_at=timezone.now() - timedelta(seconds=30)
    )

    page = as_viewer.get("/tasks/").content.decode()

    row = row_html(page, "expire-segments")
    assert "STALE" not in row
    assert "not due yet: the first run is due by" in row
    assert "task stale" not in page


def test_a_task_not_yet_due_says_so_once(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {
        "flush-store": {"task": FLUSH_TASK, "schedule": 5},
        "expire-segments": {"task": EXPIRE_TASK, "schedule": 3600},
    }
    finished_run(
        FLUSH_TASK, 5, timedelta(seconds=1), created_at=timezone.now() - timedelta(seconds=30)
    )

    row = row_html(as_viewer.get("/tasks/").content.decode(), "expire-segments")
    shown = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row))

    assert shown.count("not due yet") == 1
    assert "not due yet the first run is due by" in shown


def test_before_any_worker_ran_a_task_nothing_is_stale(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {"flush-store": {"task": FLUSH_TASK, "schedule": 5}}

    row = row_html(as_viewer.get("/tasks/").content.decode(), "flush-store")

    assert "STALE" not in row
    assert "no worker has run any task here" in row


def test_the_health_column_comes_right_after_the_task_name(as_viewer, redis_db):
    page = as_viewer.get("/tasks/").content.decode()

    headers = page[page.index("<thead>") : page.index("</thead>")]
    assert headers.index(">Task<") < headers.index(">Health<") < headers.index(">Schedule<")


def test_a_running_task_shows_its_progress(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {"expire-segments": {"task": EXPIRE_TASK, "schedule": 3600}}
    finished_run(
        EXPIRE_TASK,
        3600,
        ago=timedelta(minutes=70),
        last_started_at=timezone.now() - timedelta(seconds=5),
        progress=0.42,
    )

    row = row_html(as_viewer.get("/tasks/").content.decode(), "expire-segments")

    assert "running 42%" in row
    assert "STALE" not in row


def test_a_recorded_task_missing_from_the_schedule_is_listed(as_viewer, redis_db, settings):
    settings.CELERY_BEAT_SCHEDULE = {}
    finished_run("old.tasks.compact", 60, ago=timedelta(seconds=10))

    page = as_viewer.get("/tasks/").content.decode()

    assert "old.tasks.compact" in page
    assert "not in the schedule" in page


@pytest.fixture
def closed_broker(settings):
    """A broker address where nothing listens (port 1): any worker question would fail."""
    from console.celery import app as celery_app

    closed = "redis://127.0.0.1:1/0"
    settings.REDIS_URL = closed
    old = celery_app.conf.broker_url
    celery_app.conf.broker_url = closed
    yield closed
    celery_app.conf.broker_url = old


def test_the_page_renders_from_what_is_stored_without_asking_the_workers(as_viewer, closed_broker):
    response = as_viewer.get("/tasks/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "Asking the workers" in page
    assert 'hx-get="/tasks/workers/"' in page
    assert "Redis does not answer" not in page


def test_the_worker_answer_says_when_no_worker_answers(as_viewer, redis_db):
    response = as_viewer.get("/tasks/workers/")

    assert response.status_code == 200
    assert "No Celery worker answers" in response.content.decode()


def test_the_worker_answer_says_a_worker_answers_when_one_runs(as_viewer, worker):
    assert "1 worker answers" in as_viewer.get("/tasks/workers/").content.decode()


def test_the_worker_answer_says_when_redis_does_not_answer(as_viewer, closed_broker):
    response = as_viewer.get("/tasks/workers/")

    assert response.status_code == 200
    assert "Redis does not answer at redis://127.0.0.1:1/0" in response.content.decode()


def test_the_worker_answer_is_refused_to_a_user_without_a_role(as_nobody, redis_db):
    assert as_nobody.get("/tasks/workers/").status_code == 403


def test_an_on_demand_job_is_listed_as_such_and_never_stale(as_viewer, redis_db):
    from console.background.tasks import ARCHIVE_TASK

    finished_run(ARCHIVE_TASK, 0, timedelta(days=30), last_message='{"segments": 3}')

    page = as_viewer.get("/tasks/").content.decode()

    row = row_html(page, "consolebackgroundtasksarchive_segments")
    assert "on demand" in row
    assert "STALE" not in row
