"""The two monitoring tasks, run by a real Celery worker through the machine's Redis
(tests/conftest.py: `redis_db`, `worker`)."""

from __future__ import annotations

import time

import pytest

from console.background.models import TaskRun
from console.monitoring.models import GroupSample, StoreSample, TopicSample
from console.monitoring.tasks import (
    DOWNSAMPLE_TASK,
    SAMPLE_TASK,
    downsample_metrics,
    sample_metrics,
)

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


EVALUATE_ALERTS = "console.alerts.tasks.evaluate_alerts"


@pytest.fixture
def sent(redis_db, monkeypatch) -> list[str]:
    """Names of the tasks sent by name."""
    from console.celery import app as celery_app

    names: list[str] = []
    original = celery_app.send_task

    def send_task(name, *args, **kwargs):
        names.append(name)
        return original(name, *args, **kwargs)

    monkeypatch.setattr(celery_app, "send_task", send_task)
    return names


@pytest.fixture
def worker(sent, worker):
    """The shared real worker, with the sent tasks recorded first."""
    return worker


def test_sample_metrics_writes_a_sample_and_leaves_alerts_to_their_own_schedule(
    store, worker, sent, finished_run, settings
):
    store.create_topic("orders", queues=2)
    store.append("orders", b"hello", queue=0)
    store.commit_offset("billing", "orders", 0, 0)

    sample_metrics.delay()

    run = finished_run(SAMPLE_TASK)
    assert run.last_outcome == TaskRun.OK, run.last_message
    assert "sampled 1 topic(s)" in run.last_message
    assert TopicSample.objects.get().max_offsets == [1, 0]
    assert GroupSample.objects.get().lags == [1, 0]
    assert EVALUATE_ALERTS not in sent
    assert settings.CELERY_BEAT_SCHEDULE["evaluate-alerts"]["task"] == EVALUATE_ALERTS


def test_downsample_metrics_thins_old_samples(store, worker, finished_run):
    hour = 3_600_000
    start = int(time.time() * 1000) - 8 * hour
    start -= start % 60_000
    for n in range(12):  # two minutes of 10 s samples, 8 hours old
        StoreSample.objects.create(
            ts_ms=start + n * 10_000,
            token="t",
            disk_bytes=0,
            disk_ratio=0.0,
            topics=0,
            queues=0,
            groups=0,
            messages=0,
            backlog=n,
            appended=0,
            consumed=0,
        )

    downsample_metrics.delay()

    run = finished_run(DOWNSAMPLE_TASK)
    assert run.last_outcome == TaskRun.OK, run.last_message
    assert list(StoreSample.objects.order_by("ts_ms").values_list("resolution", "backlog")) == [
        (60, 5),
        (60, 11),
    ]
