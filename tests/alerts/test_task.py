"""The evaluation task, sent by name to a real worker over a real Redis broker.

The metrics come from ``console.monitoring.current``, replaced here by hand-made ones (a
stand-in module when the real one is not there).
"""

import importlib
import sys
import time
import types

import celery.contrib.testing.tasks  # noqa: F401  (the worker's ping task)
import pytest
from celery.contrib.testing.worker import start_worker

from console import celery_app
from console.alerts.models import AlertEvent, AlertRule
from console.alerts.tasks import TASK_NAME, evaluate_alerts
from console.background.models import TaskRun
from tests.alerts.alerttools import RECIPIENT, group, make_rule, store

BROKER = "redis://127.0.0.1:6379/12"
#: How long to wait for the worker to finish a task (a bound, not a timing under test).
WAIT_S = 60


@pytest.fixture
def metrics_now(monkeypatch):
    """What ``console.monitoring.current`` reports: set ``["groups"]`` and ``["store"]``."""
    reported = {"groups": [], "store": None}
    try:
        current = importlib.import_module("console.monitoring.current")
    except ImportError:
        current = types.ModuleType("console.monitoring.current")
        monkeypatch.setitem(sys.modules, "console.monitoring.current", current)
    monkeypatch.setattr(current, "group_metrics", lambda: reported["groups"], raising=False)
    monkeypatch.setattr(current, "store_metrics", lambda: reported["store"], raising=False)
    return reported


@pytest.fixture
def broker(settings):
    """The Celery app and the tracked tasks' locks on a Redis database of their own."""
    settings.CELERY_BROKER_URL = BROKER
    settings.REDIS_URL = BROKER
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = BROKER
    celery_app._pool = None
    celery_app.control.purge()
    yield celery_app
    celery_app._pool = None
    celery_app.conf.broker_url = previous


def wait_for_run(name: str, runs: int = 1) -> TaskRun:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        row = TaskRun.objects.filter(name=name, runs__gte=runs).first()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"the worker did not finish {name} within {WAIT_S} s")


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_the_task_sent_by_name(broker, metrics_now, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    metrics_now["groups"] = [group("billing", lag=500)]
    with start_worker(broker, perform_ping_check=False, pool="solo"):
        broker.send_task(TASK_NAME)
        run = wait_for_run(TASK_NAME)
    assert run.last_outcome == TaskRun.OK
    event = AlertEvent.objects.get()
    assert (event.subject, event.state) == ("billing", AlertEvent.FIRING)
    assert [(m.subject, m.to) for m in mailoutbox] == [
        ("[Tidemark] FIRING: billing lag (1 subject)", [RECIPIENT])
    ]


@pytest.mark.django_db(transaction=True)
def test_a_second_run_on_the_same_metrics_changes_nothing(broker, metrics_now, mailoutbox):
    make_rule(AlertRule.DISK_RATIO, 0.8, name="disk")
    metrics_now["store"] = store(0.95)
    with start_worker(broker, perform_ping_check=False, pool="solo"):
        broker.send_task(TASK_NAME)
        wait_for_run(TASK_NAME, runs=1)
        broker.send_task(TASK_NAME)
        wait_for_run(TASK_NAME, runs=2)
    assert AlertEvent.objects.get().state == AlertEvent.FIRING
    assert len(mailoutbox) == 1


@pytest.mark.django_db
def test_the_task_records_its_changes(broker, metrics_now, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    metrics_now["groups"] = [group("billing", lag=500)]
    evaluate_alerts.apply()
    run = TaskRun.objects.get(name=TASK_NAME)
    assert run.last_outcome == TaskRun.OK
    assert '"none->firing": 1' in run.last_message
    assert '"emails": 1' in run.last_message


@pytest.mark.django_db
def test_the_task_resolves_when_the_metrics_clear(broker, metrics_now, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    metrics_now["groups"] = [group("billing", lag=500)]
    evaluate_alerts.apply()
    metrics_now["groups"] = [group("billing", lag=0)]
    evaluate_alerts.apply()
    assert AlertEvent.objects.get().state == AlertEvent.RESOLVED
    assert len(mailoutbox) == 2
