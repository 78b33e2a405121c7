"""The monitoring's periodic tasks (beat schedule in console/settings.py).

``sample_metrics`` takes one sample (sampler.py; alerts are evaluated on their own
schedule, console/alerts/tasks.py, so that a sampler that stopped is noticed);
``downsample_metrics`` thins the history (downsample.py); ``topic_statistics`` runs the
Spark statistics job over the last two hours of store time every hour (topicstats.py; a
rerun replaces the rows of the minutes it counts again). All are tracked
(console/background/tracking.py): one run at a time under a Redis lock, each run recorded
with its duration and a message saying what it did.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from console.background.tracking import record_progress, tracked
from console.monitoring.downsample import downsample
from console.monitoring.sampler import take_sample
from console.monitoring.topicstats import run_topic_statistics
from storeadapter.engine import clock as engine_clock

SAMPLE_TASK = "console.monitoring.tasks.sample_metrics"
DOWNSAMPLE_TASK = "console.monitoring.tasks.downsample_metrics"
TOPIC_STATS_TASK = "console.monitoring.tasks.topic_statistics"
TOPIC_STATS_EVERY_S = 3600
#: The task's default window: this much store time before now.
TOPIC_STATS_WINDOW_MS = 2 * 3600 * 1000


@tracked(SAMPLE_TASK, every_s=settings.TIDEMARK_SAMPLE_INTERVAL_S)
def _sample() -> str:
    return take_sample().message()


@tracked(DOWNSAMPLE_TASK, every_s=settings.TIDEMARK_DOWNSAMPLE_INTERVAL_S)
def _downsample() -> str:
    return downsample().message()


@tracked(TOPIC_STATS_TASK, every_s=TOPIC_STATS_EVERY_S)
def _topic_statistics(since=None, until=None, topics=None) -> dict:
    record_progress(TOPIC_STATS_TASK, 0.0)
    if since is None:
        since = engine_clock.now_ms() - TOPIC_STATS_WINDOW_MS
    return run_topic_statistics(
        since, until, topics, counted=lambda: record_progress(TOPIC_STATS_TASK, 0.9)
    )


@shared_task(name=SAMPLE_TASK, ignore_result=True)
def sample_metrics() -> str | None:
    """Sample the store's offsets, lag and disk use."""
    return _sample()


@shared_task(name=DOWNSAMPLE_TASK, ignore_result=True)
def downsample_metrics() -> str | None:
    """Thin the sampled history as it ages, and delete what is past 90 days."""
    return _downsample()


@shared_task(name=TOPIC_STATS_TASK, ignore_result=True)
def topic_statistics(since=None, until=None, topics=None) -> dict | None:
    """Count messages, bytes, distinct keys and body sizes per topic per minute with Spark
    (default: the last two hours of store time) into TopicMinuteStats."""
    return _topic_statistics(since, until, topics)
