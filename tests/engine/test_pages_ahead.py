"""A batch's log pages made ahead of the tail (``pagesahead.PagesAhead``): the page-cache
pages past the tail are made by reading them on a thread of the store's own, so that the
next batch's ``pwrite`` under the pen only copies into them (docs/PERFORMANCE.md,
procs31-s58). Reading changes no byte."""

from __future__ import annotations

import mmap
import time

from storeadapter.engine.pagesahead import AHEAD_BYTES
from tests.engine.storetools import read_all, segment_paths, small_config, tail
from tests.engine.test_log_cache_behind import _kept, _resident

MIB = 1 << 20
QUEUES = 4


def _bodies(start: int, count: int) -> list[bytes]:
    return [f"{i:07d}".encode() * 90 for i in range(start, start + count)]


def _ahead(store_path, end: int, length: int) -> list[tuple[int, bool]]:
    """(log offset, resident) of the active segment's whole pages in [end, end + length)."""
    path = segment_paths(store_path)[-1]
    base = int(path.name)
    return [
        (base + i * mmap.PAGESIZE, resident)
        for i, resident in enumerate(_resident(path))
        if base + i * mmap.PAGESIZE >= end
        and base + (i + 1) * mmap.PAGESIZE <= min(end + length, base + path.stat().st_size)
    ]


def _wait_kept(store_path, end: int, length: int) -> tuple[bool, str]:
    kept, why = False, "never looked"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kept, why = _kept(_ahead(store_path, end, length))
        if kept:
            break
        time.sleep(0.02)
    return kept, why


def test_batches_have_the_pages_past_the_tail_made_in_the_page_cache(open_store, store_path):
    store = open_store(cfg=small_config(segment_bytes=16 * MIB, max_message_bytes=4096))
    store.create_topic("t", queues=QUEUES)
    bodies = _bodies(0, 1000)  # about 700 KiB of log: past one ask (256 KiB)
    for at in range(0, len(bodies), 100):
        store.append_batch("t", bodies[at : at + 100])
    end = tail(store)
    kept, why = _wait_kept(store_path, end, 2 * MIB)
    assert kept, f"the pages past the tail {end} were not made: {why}"


def test_pages_made_ahead_change_no_byte_and_every_message_reads_back(open_store, store_path):
    store = open_store(cfg=small_config(segment_bytes=16 * MIB, max_message_bytes=4096))
    store.create_topic("t", queues=QUEUES)
    bodies = _bodies(0, 1000)
    for at in range(0, len(bodies), 100):
        store.append_batch("t", bodies[at : at + 100])
    end = tail(store)
    kept, why = _wait_kept(store_path, end, 2 * MIB)
    assert kept, why
    path = segment_paths(store_path)[-1]
    past = path.read_bytes()[end - int(path.name) :][:AHEAD_BYTES]
    assert past == bytes(len(past))  # zeros past the tail, as before
    more = _bodies(1000, 1000)
    for at in range(0, len(more), 100):
        store.append_batch("t", more[at : at + 100])
    store.close()
    reopened = open_store(cfg=small_config(segment_bytes=16 * MIB, max_message_bytes=4096))
    got = sorted(m.body for q in range(QUEUES) for m in read_all(reopened, "t", q))
    assert got == sorted(bodies + more)
