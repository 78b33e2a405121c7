"""The dashboard reads the latest sample once a request (the groups' metrics, the store's
rates and the monitoring's freshness share it), and a new sample shows at the next request."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.monitoring.sampler import take_sample

pytestmark = pytest.mark.django_db

SAMPLE_TABLE = '"monitoring_storesample"'


def sample_reads(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/").status_code == 200
    return sum(SAMPLE_TABLE in q["sql"] for q in queries.captured_queries)


def test_the_dashboard_reads_the_latest_sample_once_before_any_sample(as_viewer, store):
    assert sample_reads(as_viewer) == 1


def test_the_dashboard_reads_the_latest_samples_once(as_viewer, store, now):
    store.create_topic("orders", 1)
    take_sample()
    now["ms"] += 10_000
    take_sample()

    assert sample_reads(as_viewer) == 2  # the latest, and the one the rates start from


def test_a_new_sample_shows_at_the_next_dashboard_request(as_viewer, store, now):
    store.create_topic("orders", 1)
    store.commit_offset("billing", "orders", 0, 0)
    take_sample()
    first = as_viewer.get("/").context
    assert first["rates"].produce_rate == 0

    now["ms"] += 10_000
    store.append_batch("orders", [{"body": "m", "queue": 0} for _ in range(20)])
    take_sample()
    second = as_viewer.get("/").context

    assert second["rates"].sampled_ms == first["rates"].sampled_ms + 10_000
    assert second["rates"].produce_rate == pytest.approx(2.0)  # 20 messages in 10 s
    [(group, metrics)] = second["behind"]
    assert (group.group, metrics.sampled_ms, metrics.lag) == (
        "billing",
        second["rates"].sampled_ms,
        20,
    )
