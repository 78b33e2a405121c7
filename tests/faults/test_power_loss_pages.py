"""Power losses that keep a later unsynced page and lose an earlier one (issue 17, case 3).

Disks and the page cache write pages back in no set order, so after a power loss the
unsynced part of a segment may hold a hole with intact records after it. Recovery takes
the hole for the end of the log; nothing past it may be trusted afterwards: it is cleared
before the first new append, else records written after the recovery end among the old
ones and a later restart serves the old records in their place.
"""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from tests.faults.faultharness import TOPIC, Ack, body_digest, check_store, sized_body
from tests.faults.faultyfs import PAGE, FaultyFS

SEGMENT = 64 << 10


def config(mode: str) -> StoreConfig:
    return StoreConfig(
        segment_bytes=SEGMENT,
        max_message_bytes=4096,
        index_slots=64,
        index_entries=512,
        flush_mode=mode,
        flush_interval_ms=600_000,
        flush_timeout_ms=600_000,
        flush_dirty_bytes=1 << 30,
        disk_warn_ratio=1.0,
        disk_force_ratio=1.0,
        disk_reject_ratio=1.0,
    )


def _append(store: MessageStore, label: str, count: int) -> list[Ack]:
    bodies = [sized_body(label, n, 280) for n in range(count)]
    results = store.append_batch(TOPIC, bodies)
    return [
        Ack(r.message_id, r.queue, r.queue_offset, r.commit_offset, body_digest(b))
        for r, b in zip(results, bodies, strict=True)
    ]


@pytest.mark.parametrize("lost_page", [0, 1])
def test_records_after_a_lost_page_are_never_served_in_place_of_later_ones(tmp_path, lost_page):
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        store = MessageStore.open(path, config("async"))
        store.create_topic(TOPIC, queues=2)
        durable = _append(store, "durable", 10)
        store.flush()
        tail = store.stats().commit_log.tail
        _append(store, "unflushed", 50)  # acknowledged (async), never flushed
        first_changed = tail // PAGE
        image = fs.capture("after the unflushed batch")
        store.close()
    lost = first_changed + lost_page
    image_path = image.materialize(
        tmp_path / "image", pages=lambda name, page: name.startswith("commitlog/") and page == lost
    )
    with MessageStore.open(image_path, config("sync")) as recovered:
        after = _append(recovered, "after", 50)
    with MessageStore.open(image_path, config("sync")) as reopened:
        found = check_store(reopened, durable + after, context="after a clean restart")
        assert found.lost == [], f"acknowledged messages lost or replaced: {found.lost[:3]}"
        old = [m for m in found.messages.values() if b"unflushed:" in m.body[:40]]
        positions = sorted((m.queue, m.queue_offset) for m in old)
        taken = {(a.queue, a.queue_offset) for a in after}
        assert not taken.intersection(positions)
