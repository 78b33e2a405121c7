"""A blind executor: the cluster's only worker runs in its own mount namespace with an empty
tmpfs over the directory holding the stores (and, in one test, the archive), while the
driver sees the files. A read, a stream and an archive each fail with a sentence naming
the file and the host, never returning partial data; retention then deletes nothing."""

from __future__ import annotations

import socket

import pytest

from storeadapter.spark.standalone import StandaloneCluster, can_blind
from tests.engine.storetools import small_config
from tests.spark.clusterdriver import ClusterDriver, ClusterJobError
from tests.spark.sparktools import HOUR_MS, SHORT_LIVED_JVM, fill

NOT_THERE = "the file does not exist there, but the read was planned with it"


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """What the blind worker sees as an empty directory."""
    return tmp_path_factory.mktemp("hidden")


@pytest.fixture(scope="module")
def driver(tmp_path_factory, hidden):
    if not can_blind():
        pytest.skip("a blind worker needs root and unshare (its own mount namespace)")
    workdir = tmp_path_factory.mktemp("blind-cluster")
    with StandaloneCluster(
        workers=1, blind=[[str(hidden)]], workdir=workdir, java_options=SHORT_LIVED_JVM
    ) as cluster:
        config = {**cluster.driver_config(), "spark.task.maxFailures": "1"}
        found = ClusterDriver(cluster.master_url, config)
        yield found
        found.close()


@pytest.fixture
def store_path(hidden, request):
    return hidden / request.node.name / "store"


@pytest.fixture
def old_store(open_store, fake_clock):
    """Several sealed segments past retention (1 hour) and a newer one."""

    def make(path=None):
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


def test_a_read_fails_naming_the_segment_and_the_host(driver, open_store, store_path):
    store = open_store()
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=1)
    fill(store, 0, 300)
    with pytest.raises(ClusterJobError) as failure:
        driver.run("read_totals", path=str(store_path))
    assert_not_visible(failure.value, store_path)


def test_a_stream_fails_and_commits_no_batch(driver, open_store, store_path, tmp_path):
    store = open_store()
    store.create_topic("orders", queues=2)
    store.create_topic("audit", queues=1)
    fill(store, 0, 300)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    with pytest.raises(ClusterJobError) as failure:
        driver.run(
            "stream_to_parquet", path=str(store_path), sink=str(sink), checkpoint=str(checkpoint)
        )
    assert_not_visible(failure.value, store_path)
    assert not list((checkpoint / "commits").glob("[0-9]*"))
    assert not list(sink.glob("*.parquet"))


def test_the_archive_fails_and_retention_deletes_nothing(driver, old_store, store_path, tmp_path):
    store = old_store()
    plan = store.retention_plan()
    out = str(tmp_path / "archive")
    with pytest.raises(ClusterJobError) as failure:
        driver.run("archive", store=str(store_path), out=out)
    assert_not_visible(failure.value, store_path)

    verified = set(driver.run("verified", out=out))
    assert verified == set()
    report = store.delete_expired(may_delete=lambda segment: segment["name"] in verified)
    assert report.deleted_segments == []
    assert [s["name"] for s in report.held_segments] == [s["name"] for s in plan]


def test_an_archive_the_executors_do_not_share_is_not_recorded(driver, old_store, hidden, tmp_path):
    visible = tmp_path / "store"  # the executor sees the store, not the archive
    store = old_store(visible)
    plan = store.retention_plan()
    out = str(hidden / "unshared-archive")
    with pytest.raises(ClusterJobError) as failure:
        driver.run("archive", store=str(visible), out=out)
    text = str(failure.value)
    assert "ArchiveVerificationError" in text
    assert f"the archive of segment {plan[0]['name']}" in text
    assert "read back 0 of its" in text
    assert "must share the archive directory" in text

    verified = set(driver.run("verified", out=out))
    assert verified == set()
    report = store.delete_expired(may_delete=lambda segment: segment["name"] in verified)
    assert report.deleted_segments == []
