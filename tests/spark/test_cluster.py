"""The format on a Spark standalone cluster (a master and a worker running two executors,
each a JVM with its own Python workers, on 127.0.0.1, started once for this module and
stopped by PID): batch reads, a stream with a restart, the archive, and archive →
retention → replay, each exact in counts and checksums.

Blind executors: the worker runs in its own mount namespace with an empty tmpfs over one
directory (``hidden``), while the driver sees the files there. The tests above keep their
stores elsewhere; the blind tests put the stores (and, in one test, the archive) in
``hidden``: a read, a stream and an archive each fail with a sentence naming the file and
the host, never returning partial data; retention then deletes nothing. One cluster and
one driver for both, not one each: the JVMs' start is most of these tests' CPU. The driver
is the test process's own SparkContext (``clusterdriver.py``), not a process of its own.
"""

from __future__ import annotations

import socket
import zlib

import pytest

from storeadapter.spark import logview
from storeadapter.spark.standalone import StandaloneCluster, can_blind
from tests.engine.storetools import small_config
from tests.spark.clusterdriver import ClusterDriver, ClusterJobError
from tests.spark.sparktools import HOUR_MS, SHORT_LIVED_JVM, engine_rows, engine_totals, fill

NOT_THERE = "the file does not exist there, but the read was planned with it"


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """What every worker sees as an empty directory (when this process may blind them)."""
    return tmp_path_factory.mktemp("hidden")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, hidden, worker_python):
    # One worker of two one-core executors, not two workers of one: the same two executors
    # (the worker's mount namespace is theirs), one JVM fewer.
    blind = [[str(hidden)]] if can_blind() else None
    with StandaloneCluster(
        workers=1,
        cores=2,
        executor_cores=1,
        blind=blind,
        workdir=tmp_path_factory.mktemp("spark-cluster"),
        java_options=SHORT_LIVED_JVM,
        python=worker_python,
    ) as found:
        yield found


@pytest.fixture(scope="module")
def driver(cluster, spark_context):
    """This process's SparkContext on the cluster for the module (the local session's
    tests after it start theirs again in the same JVM)."""
    yield ClusterDriver(spark_context.use(cluster.master_url, cluster.driver_config()))
    spark_context.stop()


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
    # 3,300 messages in two micro-batches, then 1,650 more in one after the restart (each
    # micro-batch is a job on the executors: the count of batches, not of messages, costs).
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    options = {"path": str(store_path), "sink": sink, "checkpoint": checkpoint}
    driver.run("stream_to_parquet", **options, maxOffsetsPerTrigger="1700")
    assert driver.run("parquet_totals", path=sink) == engine_totals(engine_rows(cluster_store))

    fill(cluster_store, 3000, 1500)  # appended while the query is stopped
    driver.run("stream_to_parquet", **options, maxOffsetsPerTrigger="1700")
    assert driver.run("parquet_totals", path=sink) == engine_totals(engine_rows(cluster_store))


def test_archive_then_retention_then_replay_on_the_cluster(
    driver, open_store, store_path, tmp_path, fake_clock
):
    store = open_store(config=small_config(segment_bytes=64 << 10, retention_hours=1))
    for name in ("orders", "audit", "restored"):
        store.create_topic(name, queues=2)
    fill(store, 0, 1600)  # three sealed segments (each archived by two Spark jobs)
    fake_clock.advance(2 * HOUR_MS)
    fill(store, 1600, 10)  # a newer segment: the old ones expire
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


@pytest.fixture
def blind_driver(driver):
    """The cluster tests' driver: a task that fails is tried again (four attempts in all,
    Spark's default) and fails each time, the job with it."""
    if not can_blind():
        pytest.skip("a blind worker needs root and unshare (its own mount namespace)")
    return driver


@pytest.fixture
def hidden_store_path(hidden, request):
    """Where the test's store is for the driver, and an empty directory for the executors."""
    return hidden / request.node.name / "store"


@pytest.fixture
def old_store(open_store, fake_clock):
    """Several sealed segments past retention (1 hour) and a newer one."""

    def make(path):
        store = open_store(path, small_config(segment_bytes=16 << 10, retention_hours=1))
        store.create_topic("orders", queues=2)
        store.create_topic("audit", queues=1)
        fill(store, 0, 600)
        fake_clock.advance(2 * HOUR_MS)
        fill(store, 600, 10)
        assert len(store.retention_plan()) >= 3
        return store

    return make


def assert_not_visible(error: ClusterJobError, store_path) -> None:
    text = str(error)
    assert f"of commit-log segment {store_path}/commitlog/" in text
    assert f"on host {socket.gethostname()}" in text
    assert NOT_THERE in text


def test_a_blind_read_fails_naming_the_segment_and_the_host(
    blind_driver, open_store, hidden_store_path
):
    store = open_store(hidden_store_path)
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=1)
    fill(store, 0, 300)
    with pytest.raises(ClusterJobError) as failure:
        blind_driver.run("read_totals", path=str(hidden_store_path))
    assert_not_visible(failure.value, hidden_store_path)


def test_a_blind_stream_fails_and_commits_no_batch(
    blind_driver, open_store, hidden_store_path, tmp_path
):
    # One segment, so one task at a time: a task killed when another one failed the job
    # could leave its Parquet file behind for a moment.
    store = open_store(hidden_store_path, small_config(segment_bytes=64 << 10))
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=1)
    fill(store, 0, 300)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    with pytest.raises(ClusterJobError) as failure:
        blind_driver.run(
            "stream_to_parquet",
            path=str(hidden_store_path),
            sink=str(sink),
            checkpoint=str(checkpoint),
        )
    assert_not_visible(failure.value, hidden_store_path)
    assert not list((checkpoint / "commits").glob("[0-9]*"))
    assert not list(sink.glob("*.parquet"))


def test_a_blind_archive_fails_and_retention_deletes_nothing(
    blind_driver, old_store, hidden_store_path, tmp_path
):
    store = old_store(hidden_store_path)
    plan = store.retention_plan()
    out = str(tmp_path / "archive")
    with pytest.raises(ClusterJobError) as failure:
        blind_driver.run("archive", store=str(hidden_store_path), out=out)
    assert_not_visible(failure.value, hidden_store_path)

    verified = set(blind_driver.run("verified", out=out))
    assert verified == set()
    report = store.delete_expired(may_delete=lambda segment: segment["name"] in verified)
    assert report.deleted_segments == []
    assert [s["name"] for s in report.held_segments] == [s["name"] for s in plan]


def test_an_archive_the_executors_do_not_share_is_not_recorded(
    blind_driver, old_store, hidden, tmp_path
):
    visible = tmp_path / "store"  # the executors see the store, not the archive
    store = old_store(visible)
    plan = store.retention_plan()
    out = str(hidden / "unshared-archive")
    with pytest.raises(ClusterJobError) as failure:
        blind_driver.run("archive", store=str(visible), out=out)
    text = str(failure.value)
    assert "ArchiveVerificationError" in text
    assert f"the archive of segment {plan[0]['name']}" in text
    assert "read back 0 of its" in text
    assert "must share the archive directory" in text

    verified = set(blind_driver.run("verified", out=out))
    assert verified == set()
    report = store.delete_expired(may_delete=lambda segment: segment["name"] in verified)
    assert report.deleted_segments == []
