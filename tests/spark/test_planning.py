"""Planning costs the same however many records the log holds: byte cuts, no record walked,
and a bounded number of consume-queue searches."""

from __future__ import annotations

import pytest

from storeadapter.engine import Message
from storeadapter.spark import logview, planning
from storeadapter.spark.queueindex import QueueIndex
from tests.engine.storetools import SHARED_LAYOUT, small_config

#: Whatever TIDEMARK_TEST_LAYOUT says: queues with files of their own (searched per cut), and
#: queues sharing block files (not searched: no expected counts).
LAYOUTS = {"per_queue": {"shared_layout_above": 1024}, "shared": SHARED_LAYOUT}


def _planned(store_path, split_bytes: int, monkeypatch) -> tuple[list, int, int]:
    mapped = []
    opened = planning.ReadOnlySegment

    def counting(*args, **kwargs):
        mapped.append(args[0])
        return opened(*args, **kwargs)

    monkeypatch.setattr(planning, "ReadOnlySegment", counting)
    snap = logview.snapshot(store_path)
    wanted = planning.Selection().resolve(snap.topics)
    with QueueIndex(snap) as index:
        ranges = planning.plan_ranges(snap, wanted, split_bytes=split_bytes, index=index)
        return ranges, len(mapped), index.lookups


@pytest.mark.parametrize("layout", LAYOUTS)
def test_planning_reads_no_record_and_searches_the_queues_per_cut(
    open_store, store_path, monkeypatch, layout
):
    config = small_config(segment_bytes=256 << 10, max_message_bytes=4096, **LAYOUTS[layout])
    store = open_store(config=config)
    store.create_topic("t", queues=3)
    for i in range(0, 6000, 100):
        store.append_batch("t", [Message(f"m{j} ".encode() * 10) for j in range(i, i + 100)])

    ranges, mapped, lookups = _planned(store_path, 64 << 10, monkeypatch)

    assert mapped == 0  # not a byte of the log was read to plan
    assert len(ranges) > 1
    if layout == "shared":
        assert [r.expected for r in ranges] == [None] * len(ranges)
        assert lookups == 0
        return
    assert sum(r.expected for r in ranges) == 6000
    positions = {r.first_offset for r in ranges} | {r.stop_offset for r in ranges}
    assert lookups == 3 * len(positions)  # one search per queue and cut, not per record
