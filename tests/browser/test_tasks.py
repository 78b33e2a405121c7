"""/tasks/ in a browser window 1,400 px wide: every column in view, Health included."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_the_health_column_is_in_view_at_1400_px(page: Page, url, log_in, viewer, settings):
    from console.background.models import TaskRun
    from console.background.tasks import EXPIRE_TASK, FLUSH_TASK

    settings.CELERY_BEAT_SCHEDULE = {
        "flush-store": {"task": FLUSH_TASK, "schedule": 5},
        "expire-segments": {"task": EXPIRE_TASK, "schedule": 3600},
    }
    now = timezone.now()
    TaskRun.objects.create(
        name=FLUSH_TASK,
        every_s=5,
        last_started_at=now - timedelta(seconds=1),
        last_finished_at=now,
        last_outcome=TaskRun.OK,
        last_message='{"deleted_segments":["' + "0" * 20 + '"],"groups":{"' + "g" * 200 + '":1}}',
    )
    page.set_viewport_size({"width": 1400, "height": 900})
    log_in(viewer)
    page.goto(url("/tasks/"))

    table = page.locator(".tm-table-wrap").first
    expect(table.locator("th", has_text="Health")).to_be_visible()
    wrap = table.bounding_box()
    for cell in table.locator("th").all():  # every column, Health included, in view
        box = cell.bounding_box()
        assert box["x"] + box["width"] <= wrap["x"] + wrap["width"] + 1, cell.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400


def test_the_worker_answer_replaces_the_loading_line(page: Page, url, log_in, viewer, redis_db):
    log_in(viewer)
    page.goto(url("/tasks/"))

    expect(page.locator("#worker-status")).to_contain_text("No Celery worker answers")
