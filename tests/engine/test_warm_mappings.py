"""Warm mappings (issue 29): a background thread maps in the pages of what was written
since its last step (``MADV_POPULATE_READ``), so that a reader does not pay each page's
first touch of the segment's mapping."""

from __future__ import annotations

import os
import time

from storeadapter.engine.warming import Warmer
from tests.engine.storetools import segment_paths, small_config

SEGMENT = 8 << 20
BODY = bytes(range(256)) * 4
#: This VM's kernel pages out clean page-cache pages of memory regions it saw unaccessed
#: (a DAMON ``pageout`` scheme), mapped ones too: a page mapped in may be gone again by the
#: time it is counted. Mapped in means at least this share of what was written.
MAPPED_IN_AT_LEAST = 0.9


def _resident(path) -> int:
    """Bytes of ``path``'s mapping in this process that its page tables map now."""
    total = 0
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                inside = line.rstrip().endswith(str(path))
            elif inside and first == "Rss:":
                total += int(line.split()[1]) * 1024
    return total


def _append(store, count: int) -> int:
    for _ in range(count // 500):
        store.append_batch("t", [BODY] * 500)
    return store.commitlog.tail


def _quiet_config():
    """A flush thread that does not wake by itself while a test runs (nor asks for warming)."""
    return small_config(segment_bytes=SEGMENT, flush_interval_ms=600_000, flush_dirty_bytes=1 << 40)


def _wait_resident(segment, least: int) -> int:
    deadline = time.monotonic() + 10
    while _resident(segment) < least and time.monotonic() < deadline:
        time.sleep(0.01)
    return _resident(segment)


def test_a_process_that_only_appends_maps_nothing_in(open_store, store_path):
    store = open_store(cfg=small_config(segment_bytes=SEGMENT, flush_interval_ms=10))
    store.create_topic("t", queues=2)
    written = _append(store, 3000)
    segment = segment_paths(store_path)[0]
    store.flush()
    time.sleep(0.2)  # flushes ran, and would have asked for warming

    assert store._warm.engaged is False
    assert _resident(segment) < written // 2


def test_at_the_first_read_what_was_appended_is_mapped_in(open_store, store_path):
    store = open_store(cfg=small_config(segment_bytes=SEGMENT, flush_interval_ms=10))
    store.create_topic("t", queues=2)
    written = _append(store, 3000)
    segment = segment_paths(store_path)[0]

    store.read("t", 0, 0, 1)

    assert _wait_resident(segment, written * MAPPED_IN_AT_LEAST) >= written * MAPPED_IN_AT_LEAST


def test_after_the_first_get_what_is_appended_next_is_mapped_in(open_store, store_path):
    store = open_store(cfg=small_config(segment_bytes=SEGMENT, flush_interval_ms=10))
    store.create_topic("t", queues=2)
    first = store.append("t", BODY)
    store.get(first.message_id)
    written = _append(store, 3000)
    segment = segment_paths(store_path)[0]

    assert _wait_resident(segment, written * MAPPED_IN_AT_LEAST) >= written * MAPPED_IN_AT_LEAST


def test_a_pass_maps_in_at_most_its_bound_and_the_next_goes_on_from_there(open_store, store_path):
    store = open_store(cfg=_quiet_config())
    store.create_topic("t", queues=2)
    warmer = Warmer(store.commitlog, store.commitlog.tail, bound=1 << 20)
    written = _append(store, 3000)
    segment = segment_paths(store_path)[0]

    assert warmer.step() is True
    first = _resident(segment)
    while warmer.step():
        pass

    assert first <= (1 << 20) + 8192
    assert _resident(segment) >= written * MAPPED_IN_AT_LEAST


def test_records_from_before_the_store_opened_are_not_mapped_in(open_store, store_path):
    store = open_store(cfg=_quiet_config())
    store.create_topic("t", queues=2)
    before = _append(store, 3000)
    store.close()
    store = open_store(cfg=_quiet_config())
    warmer = Warmer(store.commitlog, store.commitlog.tail)
    after = _append(store, 500)
    segment = segment_paths(store_path)[0]
    resident = _resident(segment)  # the open's own reads near the tail

    assert warmer.step() is False
    assert _resident(segment) - resident <= (after - before) + 8192


def test_a_segment_cut_short_under_an_open_store_is_passed_over(open_store, store_path):
    store = open_store(cfg=_quiet_config())
    store.create_topic("t", queues=2)
    warmer = Warmer(store.commitlog, store.commitlog.tail)
    _append(store, 3000)
    os.truncate(segment_paths(store_path)[0], 4096)  # a SIGBUS for a load past here

    assert warmer.step() is False
    assert warmer.warmed == store.commitlog.tail
