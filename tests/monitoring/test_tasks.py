"""The two monitoring tasks, run by a real Celery worker through the machine's Redis.

Redis database 13 keeps these tests' broker messages and task locks apart from anything
else; it is flushed before and after each test.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from console.background.models import TaskRun
from console.monitoring.models import GroupSample, StoreSample, TopicSample
from console.monitoring.tasks import (
    DOWNSAMPLE_TASK,
    EVALUATE_ALERTS,
    SAMPLE_TASK,
    downsample_metrics,
    sample_metrics,
)

pytestmark = pytest.mark.django_db(transaction=True)

TEST_REDIS_URL = "redis://127.0.0.1:6379/13"


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def use_broker(app, url: str) -> None:
    """Point the app at another broker; its connection pools start anew (dropped, not
    closed: kombu keeps one pool per broker URL and would hand a closed one back)."""
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def celery_app(settings):
    """The console's Celery app with the real Redis (database 13) as broker and locks."""
    from console.celery import app

    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"these tests need the machine's Redis at {TEST_REDIS_URL}")
    client.flushdb()
    settings.REDIS_URL = TEST_REDIS_URL
    settings.CELERY_BROKER_URL = TEST_REDIS_URL
    old_broker = app.conf.broker_url
    use_broker(app, TEST_REDIS_URL)
    yield app
    use_broker(app, old_broker)
    client.flushdb()
    client.close()


@pytest.fixture
def sent(celery_app, monkeypatch) -> list[str]:
    """Names of the tasks sent; the alert evaluation is recorded but not sent (it is the
    alerts app's to test)."""
    names: list[str] = []
    original = celery_app.send_task

    def send_task(name, *args, **kwargs):
        names.append(name)
        if name == EVALUATE_ALERTS:
            return None
        return original(name, *args, **kwargs)

    monkeypatch.setattr(celery_app, "send_task", send_task)
    return names


@pytest.fixture
def worker(celery_app, sent):
    """A real worker (solo pool) in a thread of this process."""
    import celery.contrib.testing.tasks  # noqa: F401 - registers celery.ping
    from celery.contrib.testing.worker import start_worker

    with start_worker(celery_app, perform_ping_check=False, pool="solo", loglevel="WARNING"):
        yield


def finished_run(name: str) -> TaskRun | None:
    return TaskRun.objects.filter(name=name, runs__gte=1).first()


def test_sample_metrics_writes_a_sample_and_asks_for_an_alert_evaluation(store, worker, sent):
    store.create_topic("orders", queues=2)
    store.append("orders", b"hello", queue=0)
    store.commit_offset("billing", "orders", 0, 0)

    sample_metrics.delay()

    run = wait_for(lambda: finished_run(SAMPLE_TASK), "the sample to finish")
    assert run.last_outcome == TaskRun.OK, run.last_message
    assert "sampled 1 topic(s)" in run.last_message
    assert TopicSample.objects.get().max_offsets == [1, 0]
    assert GroupSample.objects.get().lags == [1, 0]
    assert sent.count(EVALUATE_ALERTS) == 1


def test_downsample_metrics_thins_old_samples(store, worker):
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

    run = wait_for(lambda: finished_run(DOWNSAMPLE_TASK), "the downsampling to finish")
    assert run.last_outcome == TaskRun.OK, run.last_message
    assert list(StoreSample.objects.order_by("ts_ms").values_list("resolution", "backlog")) == [
        (60, 5),
        (60, 11),
    ]
