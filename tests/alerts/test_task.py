"""The evaluation task, sent by name to a real worker over a real Redis broker.

The metrics come from ``console.monitoring.current``, replaced here by hand-made ones (a
stand-in module when the real one is not there).
"""

import importlib
import sys
import types

import pytest

from console import celery_app
from console.alerts.models import AlertEvent, AlertRule, Notification
from console.alerts.tasks import TASK_NAME, evaluate_alerts
from console.background.models import TaskRun
from tests.alerts.alerttools import RECIPIENT, group, make_rule, store


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


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_worker_runs_the_task_sent_by_name(
    worker, finished_run, metrics_now, mailoutbox, wait_for
):
    make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
    metrics_now["groups"] = [group("billing", lag=500)]

    celery_app.send_task(TASK_NAME)

    run = finished_run(TASK_NAME)
    assert run.last_outcome == TaskRun.OK
    event = AlertEvent.objects.get()
    assert (event.subject, event.state) == ("billing", AlertEvent.FIRING)
    # The mail goes out from its own task, which the evaluation queued.
    wait_for(lambda: mailoutbox, what="the alert mail")
    assert [(m.subject, m.to) for m in mailoutbox] == [
        ("[Tidemark] FIRING: billing lag (1 subject)", [RECIPIENT])
    ]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_second_run_on_the_same_metrics_changes_nothing(
    worker, finished_run, metrics_now, mailoutbox
):
    make_rule(AlertRule.DISK_RATIO, 0.8, name="disk")
    metrics_now["store"] = store(0.95)

    celery_app.send_task(TASK_NAME)
    finished_run(TASK_NAME, runs=1)
    celery_app.send_task(TASK_NAME)
    finished_run(TASK_NAME, runs=2)

    assert AlertEvent.objects.get().state == AlertEvent.FIRING
    assert len(mailoutbox) == 1


@pytest.mark.django_db
def test_the_task_records_its_changes(redis_db, metrics_now, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    metrics_now["groups"] = [group("billing", lag=500)]
    evaluate_alerts.apply()
    run = TaskRun.objects.get(name=TASK_NAME)
    assert run.last_outcome == TaskRun.OK
    assert '"none->firing": 1' in run.last_message
    assert '"notifications": 1' in run.last_message


@pytest.mark.django_db
def test_the_task_resolves_when_the_metrics_clear(redis_db, metrics_now, mailoutbox):
    make_rule(AlertRule.LAG_MESSAGES, 100)
    metrics_now["groups"] = [group("billing", lag=500)]
    evaluate_alerts.apply()
    metrics_now["groups"] = [group("billing", lag=0)]
    evaluate_alerts.apply()
    assert AlertEvent.objects.get().state == AlertEvent.RESOLVED
    assert [n.headline.split(":")[0] for n in Notification.objects.order_by("id")] == [
        "[Tidemark] FIRING",
        "[Tidemark] RESOLVED",
    ]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_worker_retries_a_refused_mail_until_the_server_takes_it(
    worker, finished_run, metrics_now, settings, wait_for
):
    from aiosmtpd.controller import Controller

    from tests.alerts.test_delivery import RefusingThenAccepting, free_port

    handler = RefusingThenAccepting(refusals=2)
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 5
        settings.TIDEMARK_ALERT_RETRY_BASE_S = 0.1
        make_rule(AlertRule.LAG_MESSAGES, 100, name="billing lag")
        metrics_now["groups"] = [group("billing", lag=500)]

        celery_app.send_task(TASK_NAME)

        sent = wait_for(
            lambda: Notification.objects.filter(state=Notification.SENT).first(),
            what="the notification to be sent",
        )
        assert sent.attempts == 3
        assert "451" in sent.last_error  # the error of the last refused attempt stays
        assert len(handler.received) == 1
        assert AlertEvent.objects.get().last_notified_at is not None
    finally:
        controller.stop()
