"""/metrics: Prometheus' text format, parsed with prometheus_client's own parser, with the
figures checked against the store; a token or an allowed address to read it."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from console.background.models import TaskRun
from console.monitoring.prometheus import QUEUE_STATUS_CODES
from storeadapter.disk_use import disk_use

pytestmark = pytest.mark.django_db


def scrape(client, **extra) -> dict[str, list]:
    """{sample name: [(labels, value), ...]} of one answer, through the official parser."""
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    found = [
        v for got, v in samples.get(name, []) if all(got.get(k) == w for k, w in labels.items())
    ]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


@pytest.fixture
def traffic(store, clock, sample_at):
    """Two topics, two groups with lag, a sample of them."""
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=1)
    clock.at(0)
    store.append_batch("orders", [{"body": b"m", "queue": q} for q in (0, 0, 0, 1, 1)])
    store.append_batch("audit", [{"body": b"a", "queue": 0} for _ in range(4)])
    clock.at(5)
    store.commit_offset("billing", "orders", 0, 1)
    store.commit_offset("billing", "orders", 1, 2)
    store.commit_offset("archiver", "audit", 0, 4)
    sample_at(10)
    return store


def test_queue_lag_committed_offset_and_status_match_the_store(client, traffic):
    samples = scrape(client)

    for group, topic in (("billing", "orders"), ("archiver", "audit")):
        ranges = traffic.queue_ranges(topic)
        for queue, (_, end) in enumerate(ranges):
            committed = traffic.committed_offset(group, topic, queue)
            labels = {"group": group, "topic": topic, "queue": str(queue)}
            assert value(samples, "tidemark_queue_lag_messages", **labels) == end - committed
            assert value(samples, "tidemark_queue_committed_offset", **labels) == committed
            status = value(samples, "tidemark_queue_status", **labels)
            assert status in QUEUE_STATUS_CODES.values()  # Burrow's numbers
    assert value(samples, "tidemark_group_lag_messages", group="billing") == 2 + 0
    assert value(samples, "tidemark_group_lag_messages", group="archiver") == 0
    # The lagging queue's oldest unconsumed message was stored at 0 s, sampled at 10 s.
    labels = {"group": "billing", "topic": "orders", "queue": "0"}
    assert value(samples, "tidemark_queue_lag_seconds", **labels) == pytest.approx(10, abs=1)
    ok = value(samples, "tidemark_group_status", group="archiver", tidemark_group_status="OK")
    assert ok == 1


def test_store_figures_match_the_store(client, traffic):
    samples = scrape(client)

    stats = traffic.stats(topics=False)
    disk = disk_use(traffic)
    assert value(samples, "tidemark_store_up") == 1
    assert value(samples, "tidemark_store_segments") == stats.segment_count
    assert value(samples, "tidemark_store_log_bytes") == stats.disk_bytes
    assert value(samples, "tidemark_store_disk_used_ratio") == pytest.approx(disk.ratio, abs=0.01)
    assert value(samples, "tidemark_store_disk_threshold_ratio", threshold="reject") == (
        disk.reject_ratio
    )
    tail = value(samples, "tidemark_store_commit_log_offset", position="tail")
    assert tail == stats.commit_log.tail
    recovered = stats.last_recovery.finished_ms / 1000
    assert value(samples, "tidemark_store_last_recovery_timestamp_seconds") == recovered
    assert value(samples, "tidemark_store_last_recovery_clean") in (0, 1)
    assert "tidemark_sample_timestamp_seconds" in samples


def test_last_flush_and_last_retention_are_exported_once_they_happened(client, traffic, clock):
    traffic.flush()
    traffic.delete_expired(now_ms=clock.at(20))

    samples = scrape(client)

    assert value(samples, "tidemark_store_last_flush_timestamp_seconds") > 0
    assert value(samples, "tidemark_store_last_retention_timestamp_seconds") == clock.ms / 1000
    assert value(samples, "tidemark_store_last_retention_deleted_segments") == 0


def test_every_scheduled_task_has_its_age_since_its_last_success(client, store, settings):
    ok_at = timezone.now() - timedelta(seconds=30)
    TaskRun.objects.create(
        name="console.background.tasks.flush_store",
        every_s=5,
        last_started_at=ok_at,
        last_finished_at=ok_at,
        last_ok_at=ok_at,
        last_outcome=TaskRun.OK,
        runs=7,
        failures=2,
    )

    samples = scrape(client)

    labels = {"task": "flush-store"}
    age = value(samples, "tidemark_task_since_last_success_seconds", **labels)
    assert age == pytest.approx(30, abs=5)
    assert value(samples, "tidemark_task_last_success_timestamp_seconds", **labels) == (
        pytest.approx(ok_at.timestamp())
    )
    assert value(samples, "tidemark_task_runs_total", **labels) == 7
    assert value(samples, "tidemark_task_failures_total", **labels) == 2
    assert value(samples, "tidemark_task_stale", **labels) == 1  # 30 s > 3 × 5 s
    never = value(samples, "tidemark_task_since_last_success_seconds", task="expire-segments")
    assert math.isinf(never)
    assert {labels["task"] for labels, _ in samples["tidemark_task_stale"]} >= set(
        settings.CELERY_BEAT_SCHEDULE
    )


def test_a_store_that_cannot_be_opened_reads_down_not_500(client, settings, tmp_path, db):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    settings.TIDEMARK_STORE_DIR = blocker / "store"

    samples = scrape(client)

    assert value(samples, "tidemark_store_up") == 0


def test_an_address_outside_the_allow_list_is_refused(client, settings, db):
    settings.TIDEMARK_METRICS_ALLOW = ["10.0.0.0/8"]

    response = client.get("/metrics")

    assert response.status_code == 403
    assert b"TIDEMARK_METRICS_ALLOW" in response.content


def test_a_token_opens_it_from_anywhere_and_a_wrong_one_does_not(client, settings, store):
    settings.TIDEMARK_METRICS_ALLOW = []
    settings.TIDEMARK_METRICS_TOKEN = "s3cret-scrape-token"

    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403
    samples = scrape(client, headers={"Authorization": "Bearer s3cret-scrape-token"})
    assert value(samples, "tidemark_store_up") == 1


def test_an_allowed_network_needs_no_token_when_no_token_is_set(client, settings, store):
    settings.TIDEMARK_METRICS_ALLOW = ["127.0.0.0/8"]
    settings.TIDEMARK_METRICS_TOKEN = ""

    assert scrape(client)["tidemark_store_up"]


def test_every_metric_the_docs_and_example_rules_name_is_exported(client, traffic, clock):
    import re
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    rules = yaml.safe_load((root / "docs" / "deploy" / "tidemark.rules.yml").read_text())
    assert all(rule["expr"] for group in rules["groups"] for rule in group["rules"])
    yaml.safe_load((root / "docs" / "deploy" / "prometheus.yml").read_text())
    traffic.flush()
    traffic.delete_expired(now_ms=clock.at(20))
    ok_at = timezone.now()
    TaskRun.objects.create(name="x", every_s=5, last_ok_at=ok_at, last_finished_at=ok_at)
    response = client.get("/metrics")
    exported = set()
    for family in text_string_to_metric_families(response.content.decode()):
        exported |= {family.name} | {sample.name for sample in family.samples}
    exported |= {name.removesuffix("_total") for name in exported}

    named = set()
    for path in (root / "docs" / "deploy" / "tidemark.rules.yml", root / "docs" / "OPERATIONS.md"):
        named |= set(re.findall(r"\btidemark_[a-z_]+[a-z]\b", path.read_text()))
    # Names that are not metrics: a package, and the login's known-browser cookie.
    named = {n for n in named if n not in ("tidemark_spark", "tidemark_known_browser")}

    assert named, "no metric named in the docs"
    assert sorted(named - exported) == []
