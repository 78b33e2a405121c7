"""A segment file cut short inside its last (acknowledged) record (issue 29).

The store serves every intact message and reports the cut record as corruption (a
``StoreError`` in ``stats().corruptions`` or raised by ``get``), never an untyped
error from unpacking bytes the file no longer has. The file is cut under an open store
(the cut stays inside the record's last page: a page wholly past the end of a mapped
file would not be readable at all) and before a fresh open after a crash.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreError
from tests.engine.storetools import segment_paths, simulate_crash, small_config

BODY = b"x" * 91


def _filled(path: Path, layout: str, extra: int) -> tuple[list[str], int]:
    """A closed store whose second segment holds ``extra`` + 1 records after its first
    is full: the acknowledged ids, and the commit offset of the last record."""
    store = MessageStore.open(path, small_config(flush_mode="sync"))
    store.create_topic("t", queues=1, layout=layout)
    ids = []
    while len(segment_paths(path)) < 2:
        ids.append(store.append("t", BODY, queue=0, key="k").message_id)
    for _ in range(extra):
        ids.append(store.append("t", BODY, queue=0, key="k").message_id)
    last = store.get(ids[-1]).commit_offset
    store.close()
    return ids, last


def _cut_inside(path: Path, commit_offset: int, keep: int) -> None:
    """Cut the last segment ``keep`` bytes into the record at ``commit_offset``."""
    segment = segment_paths(path)[-1]
    os.truncate(segment, commit_offset - int(segment.name) + keep)


def _check_served(store: MessageStore, ids: list[str]) -> None:
    stats = store.stats()
    served = store.read("t", 0, 0, 100)
    assert [m.message_id for m in served] == ids[:-1]
    with pytest.raises(StoreError):
        store.get(ids[-1])
    assert store.stats().corruptions, stats.corruptions


@pytest.mark.parametrize("layout", ["files", "shared"])
@pytest.mark.parametrize("keep", [4, 20, 60])
def test_segment_cut_inside_last_record_before_a_fresh_open(
    tmp_path: Path, layout: str, keep: int
) -> None:
    path = tmp_path / "store"
    ids, last = _filled(path, layout, extra=3)
    simulate_crash(path, keep_checkpoint=True)
    _cut_inside(path, last, keep)
    store = MessageStore.open(path, small_config(flush_mode="sync"))
    try:
        _check_served(store, ids)
    finally:
        store.close()


@pytest.mark.parametrize("layout", ["files", "shared"])
def test_segment_cut_inside_last_record_under_an_open_store(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "store"
    ids, last = _filled(path, layout, extra=3)
    store = MessageStore.open(path, small_config(flush_mode="sync"))
    try:
        _cut_inside(path, last, 20)
        _check_served(store, ids)
    finally:
        store.close()


@pytest.mark.parametrize("layout", ["files", "shared"])
def test_segment_cut_inside_its_only_record_before_a_fresh_open(
    tmp_path: Path, layout: str
) -> None:
    path = tmp_path / "store"
    ids, last = _filled(path, layout, extra=0)
    simulate_crash(path, keep_checkpoint=True)
    _cut_inside(path, last, 4)
    store = MessageStore.open(path, small_config(flush_mode="sync"))
    try:
        _check_served(store, ids)
    finally:
        store.close()
