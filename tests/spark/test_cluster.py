"""The format on a Spark standalone cluster (a master and two workers on 127.0.0.1, started
once for this module and stopped by PID): batch reads, a stream with a restart, the
archive, and archive → retention → replay, each exact in counts and checksums."""

from __future__ import annotations

import zlib

import pytest

from storeadapter.spark import logview
from storeadapter.spark.standalone import StandaloneCluster
from tests.engine.storetools import small_config
from tests.spark.clusterdriver import ClusterDriver
from tests.spark.sparktools import HOUR_MS, SHORT_LIVED_JVM, engine_rows, engine_totals, fill


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(
        workers=2, workdir=tmp_path_factory.mktemp("spark-cluster"), java_options=SHORT_LIVED_JVM
    ) as found:
        yield found


@pytest.fixture(scope="module")
def driver(cluster):
    found = ClusterDriver(cluster.master_url, cluster.driver_config())
    yield found
    found.close()


@pytest.fixture
def cluster_store(open_store):
    store = open_store(config=small_config(segment_bytes=64 << 10, max_message_bytes=4096))
    store.create_topic("orders", queues=3)
    store.create_topic("audit", queues=1)
    fill(store, 0, 3000)
    return store


def test_a_batch_read_on_the_cluster_is_exact(driver, cluster_store, store_path):
    expected = engine_totals(engine_rows(cluster_store))
    found = driver.run("read_totals", path=str(store_path))
    assert {k: found[k] for k in expected} == expected
    # Small byte ranges: many tasks over both executors, each resyncing to its records.
    found = driver.run("read_totals", path=str(store_path), splitBytes="20000")
    assert found["partitions"] > 20
    assert {k: found[k] for k in expected} == expected


def test_a_stream_on_the_cluster_goes_on_after_a_restart_exactly(
    driver, cluster_store, store_path, tmp_path
):
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    options = {"path": str(store_path), "sink": sink, "checkpoint": checkpoint}
    driver.run("stream_to_parquet", **options, maxOffsetsPerTrigger="700")
    assert driver.run("parquet_totals", path=sink) == engine_totals(engine_rows(cluster_store))

    fill(cluster_store, 3000, 1500)  # appended while the query is stopped
    driver.run("stream_to_parquet", **options, maxOffsetsPerTrigger="700")
    assert driver.run("parquet_totals", path=sink) == engine_totals(engine_rows(cluster_store))


def test_archive_then_retention_then_replay_on_the_cluster(
    driver, open_store, store_path, tmp_path, fake_clock
):
    store = open_store(config=small_config(segment_bytes=64 << 10, retention_hours=1))
    for name in ("orders", "audit", "restored"):
        store.create_topic(name, queues=2)
    fill(store, 0, 2500)
    fake_clock.advance(2 * HOUR_MS)
    fill(store, 2500, 10)  # a newer segment: the old ones expire
    plan = store.retention_plan()
    assert len(plan) >= 3
    snap = logview.snapshot(store_path)
    archived_end = max(s.end for s in snap.segments if snap.is_sealed(s))
    everything = engine_rows(store)
    gone = [r for r in everything if r["commit_offset"] < plan[-1]["end"]]
    archived_orders = [
        r for r in everything if r["topic"] == "orders" and r["commit_offset"] < archived_end
    ]
    out = str(tmp_path / "archive")

    summary = driver.run("archive", store=str(store_path), out=out)
    verified = set(driver.run("verified", out=out))
    doomed = {s["name"] for s in plan}
    assert doomed <= verified
    assert sum(s["messages"] for s in summary["segments"] if s["segment"] in doomed) == len(gone)

    report = store.delete_expired(may_delete=lambda segment: segment["name"] in verified)
    assert {s["name"] for s in report.deleted_segments} == doomed
    assert report.held_segments == []
    assert len(engine_rows(store)) == len(everything) - len(gone)

    sent = driver.run(
        "replay_topic", archive_dir=out, topic="orders", into="restored", store=str(store_path)
    )
    assert sent == len(archived_orders)
    restored = engine_rows(store, ["restored"])
    assert [r["body"] for r in restored] == [r["body"] for r in archived_orders]
    assert [r["keys"] for r in restored] == [r["keys"] for r in archived_orders]
    assert sum(zlib.crc32(r["body"]) for r in restored) == sum(
        zlib.crc32(r["body"]) for r in archived_orders
    )
