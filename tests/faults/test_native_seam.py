"""The native append steps aside for every installed fault plan (nativeappend.py, seam.py).

The core checks one counter per call, the seam generation, instead of looking up the
long way's functions: installing a plan (a failing disk in ``fileio``, a kill point on
an engine method, a test's ``monkeypatch``) moves the counter, and the core then finds
the replaced function and declines until the genuine one is back.
"""

from __future__ import annotations

import errno

import pytest

from storeadapter.engine import DiskFullError, MessageStore, StoreConfig, dataplane
from storeadapter.engine.consumequeue import QueueFile
from storeadapter.engine.writer import Writer
from tests.engine.storetools import read_all
from tests.faults.faultharness import arm_kill
from tests.faults.faultyfs import FaultyFS


def _config() -> StoreConfig:
    return StoreConfig(flush_mode="async", flush_interval_ms=600_000)


def _open(path):
    store = MessageStore.open(path, _config())
    store.create_topic("t", queues=1, layout="files")
    store.append("t", b"first")  # a time mark: the long way
    return store


def _native_now(store) -> bool:
    before = store._appender.appended
    store.append("t", b"probe")
    return store._appender.appended == before + 1


def test_a_failing_disk_installed_after_native_appends_turns_them_down(tmp_path):
    store = _open(tmp_path / "s")
    try:
        assert _native_now(store)
        generation = dataplane.seam_generation()
        with FaultyFS(tmp_path) as fs:
            assert dataplane.seam_generation() > generation
            fs.fail("pwrite_all", errno.ENOSPC, path_part="consumequeue")
            before = store._appender.appended
            with pytest.raises(DiskFullError):
                store.append("t", b"refused")
            assert store._appender.appended == before
            assert fs.failures, "the plan saw the write"
    finally:
        store.close()


def test_a_kill_point_on_an_engine_method_turns_the_native_append_down(tmp_path, monkeypatch):
    hits = []
    genuine = QueueFile.pwrite

    def counting(self, *args):
        hits.append(args)
        return genuine(self, *args)

    store = _open(tmp_path / "s")
    try:
        assert _native_now(store)
        monkeypatch.setattr(QueueFile, "pwrite", counting)
        assert not _native_now(store)
        assert hits, "the long way wrote the entry through the replaced method"
        monkeypatch.undo()
        assert _native_now(store), "the genuine method is back: the native append again"
        assert [m.body for m in read_all(store, "t", 0)][-3:] == [b"probe"] * 3
    finally:
        store.close()


def test_arming_a_kill_moves_the_seam_generation(monkeypatch):
    genuine = Writer.write_group
    generation = dataplane.seam_generation()
    try:
        arm_kill("storeadapter.engine.writer:Writer.write_group", nth=10**9)
        assert dataplane.seam_generation() > generation
    finally:
        Writer.write_group = genuine
