"""The monitoring's two periodic jobs at scale, against their interval (issue 28).

- ``status evaluation``: ``groups`` consumer groups, each committed on every one of the
  ``group_queues`` queues of its topic and behind on each; two samples are taken (rates
  need two), then the alert task's work is timed: every group's metrics from the newest
  sample (``current.group_metrics``) and ``evaluate`` with a rule of each status and lag
  kind. Repeated ``rounds`` times, each after a new sample (the per-process cache is empty
  after a sample, as in the worker).
- ``sample, every queue lagging``: ``queues`` queues over topics of 100 queues, one group
  committed on every queue and behind on each (so every queue needs its lag in seconds);
  ``rounds`` samples are timed after the first.

Both must take at most half of ``TIDEMARK_SAMPLE_INTERVAL_S`` (``target_s``). Each job
runs on its own store and its own rows (the monitoring tables are emptied in between).
Timings only: no test asserts them.
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

#: Queues per topic of the sample's store.
SAMPLE_TOPIC_QUEUES = 100
#: Topics the evaluation's groups spread over.
EVALUATION_TOPICS = 50


#: Small files, as bench/console.py's store (a default segment reserves 1 GiB).
STORE_OPTIONS = {
    "segment_bytes": 16 << 20,
    "index_slots": 4096,
    "index_entries": 65_536,
    "queue_file_entries": 10_000,
    "disk_warn_ratio": 1.0,
    "disk_force_ratio": 1.0,
    "disk_reject_ratio": 1.0,
}


def _build(path: Path, topics: int, queues: int, groups_per_topic: int, messages: int) -> None:
    from storeadapter.engine import MessageStore, StoreConfig

    with MessageStore.open(path, StoreConfig(flush_mode="async", **STORE_OPTIONS)) as store:
        for t in range(topics):
            name = f"mon-{t:04d}"
            store.create_topic(name, queues=queues)
            store.append_batch(
                name, [{"body": b"m", "queue": q} for q in range(queues) for _ in range(messages)]
            )
            for g in range(groups_per_topic):
                group = f"mon-group-{t:04d}-{g:03d}"
                store.commit_offsets(
                    group, name, dict.fromkeys(range(queues), 1), who="bench", reason="commit"
                )
        store.flush()


def _use_store(path: Path) -> None:
    """Point the console at ``path`` with empty monitoring and alert tables."""
    from django.conf import settings

    from console.alerts.models import AlertEvent, AlertRule
    from console.monitoring import current
    from console.monitoring.models import (
        CommitWindow,
        GroupSample,
        OffsetTimeline,
        QueueChunk,
        StoreSample,
        TopicSample,
    )
    from storeadapter.access import close_all

    close_all()
    settings.TIDEMARK_STORE_DIR = path
    for model in (
        StoreSample,
        TopicSample,
        GroupSample,
        OffsetTimeline,
        CommitWindow,
        QueueChunk,
        AlertEvent,
        AlertRule,
    ):
        model.objects.all().delete()
    current._cache.update(token=None, groups=None)


def _sample() -> float:
    from console.monitoring.sampler import take_sample

    time.sleep(0.005)  # a sample must be newer than the last one, to the millisecond
    report = take_sample()
    if not report.written:
        raise RuntimeError(f"no sample written: {report.skipped}")
    return report.duration_ms / 1000


def status_evaluation(workdir: Path, groups: int, group_queues: int, rounds: int) -> dict:
    from django.conf import settings
    from django.utils import timezone

    from console.alerts.evaluate import evaluate
    from console.alerts.models import AlertRule
    from console.monitoring import current

    path = workdir / "monitoring-evaluation"
    topics = min(EVALUATION_TOPICS, groups)
    _build(path, topics, group_queues, -(-groups // topics), 3)
    _use_store(path)
    try:
        rules = [
            ("group in error", AlertRule.STATUS_ERR, None),
            ("group warning", AlertRule.STATUS_WARN, None),
            ("lag above 1", AlertRule.LAG_MESSAGES, 1),
            ("lag above 10 s", AlertRule.LAG_SECONDS, 10),
            ("drains in more than 10 min", AlertRule.DRAIN_SECONDS, 600),
        ]
        for name, kind, threshold in rules:
            AlertRule.objects.create(
                name=name, kind=kind, threshold=threshold, recipients="ops@example.com"
            )
        settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
        _sample()
        seconds = []
        pairs = seen = 0
        for _ in range(rounds + 1):
            _sample()
            started = time.perf_counter()
            metrics = current.group_metrics()
            changes = evaluate(metrics, current.store_metrics(), timezone.now())
            seconds.append(time.perf_counter() - started)
            if changes.rule_failures:
                raise RuntimeError(f"{changes.rule_failures} alert rules failed to evaluate")
            seen = len(metrics)
            pairs = sum(len(group.queues) for group in metrics)
        steady = seconds[1:] or seconds
        return _figures(steady, groups=seen, group_queue_pairs=pairs, first_s=seconds[0])
    finally:
        shutil.rmtree(path, ignore_errors=True)


def lagging_sample(workdir: Path, queues: int, rounds: int) -> dict:
    path = workdir / "monitoring-sample"
    per_topic = min(SAMPLE_TOPIC_QUEUES, queues)
    _build(path, max(1, queues // per_topic), per_topic, 1, 2)
    _use_store(path)
    try:
        first = _sample()
        steady = [_sample() for _ in range(rounds)]
        return _figures(steady, queues=(queues // per_topic) * per_topic, first_s=first)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _figures(seconds: list[float], **fields) -> dict:
    from django.conf import settings

    target = settings.TIDEMARK_SAMPLE_INTERVAL_S / 2
    return {
        **{k: round(v, 3) if isinstance(v, float) else v for k, v in fields.items()},
        "p50_s": round(statistics.median(seconds), 3),
        "max_s": round(max(seconds), 3),
        "rounds": len(seconds),
        "target_s": target,
        "met": max(seconds) <= target,
    }


def format_lines(report: dict) -> list[str]:
    lines = []
    evaluation = report.get("status_evaluation")
    if evaluation:
        lines.append(
            f"{'status evaluation (s), ' + str(evaluation['groups']) + ' groups':<40} "
            f"{evaluation['group_queue_pairs']:>10,} {'':>12} {'':>8} {'':>16} "
            f"{evaluation['p50_s']:>9.3f} {evaluation['max_s']:>9.3f}"
        )
    sample = report.get("lagging_sample")
    if sample:
        lines.append(
            f"{'sample, every queue lagging (s)':<40} {sample['queues']:>10,} {'':>12} "
            f"{'':>8} {'':>16} {sample['p50_s']:>9.3f} {sample['max_s']:>9.3f}"
        )
    return lines
