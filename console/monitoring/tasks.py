"""The monitoring's periodic tasks (beat schedule in console/settings.py).

``sample_metrics`` takes one sample (sampler.py) and then asks for an alert evaluation;
``downsample_metrics`` thins the history (downsample.py). Both are tracked
(console/background/tracking.py): one run at a time under a Redis lock, each run recorded
with its duration and a message saying what it did.
"""

from __future__ import annotations

from celery import current_app, shared_task
from django.conf import settings

from console.background.tracking import tracked
from console.monitoring.downsample import downsample
from console.monitoring.sampler import take_sample

SAMPLE_TASK = "console.monitoring.tasks.sample_metrics"
DOWNSAMPLE_TASK = "console.monitoring.tasks.downsample_metrics"
#: Sent by name after every sample written: the alerts app defines it.
EVALUATE_ALERTS = "console.alerts.tasks.evaluate_alerts"


@tracked(SAMPLE_TASK, every_s=settings.TIDEMARK_SAMPLE_INTERVAL_S)
def _sample() -> str:
    report = take_sample()
    if report.written:
        current_app.send_task(EVALUATE_ALERTS)
    return report.message()


@tracked(DOWNSAMPLE_TASK, every_s=settings.TIDEMARK_DOWNSAMPLE_INTERVAL_S)
def _downsample() -> str:
    return downsample().message()


@shared_task(name=SAMPLE_TASK, ignore_result=True)
def sample_metrics() -> str | None:
    """Sample the store's offsets, lag and disk use, then ask for an alert evaluation."""
    return _sample()


@shared_task(name=DOWNSAMPLE_TASK, ignore_result=True)
def downsample_metrics() -> str | None:
    """Thin the sampled history as it ages, and delete what is past 90 days."""
    return _downsample()
