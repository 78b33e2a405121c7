"""A checkpoint written by a process that did not write (issue 17, case 9).

A writer fills one key-index file and rolls to a new one; another process, which joined
before the roll and never wrote, flushes and saves a checkpoint covering those records.
Its flush must fsync every key-index file past the last checkpoint first: the checkpoint
claims their entries durable, so recovery after a power loss starts past them and never
indexes those keys again (lookups miss them, dedup ids are accepted twice).
"""

from __future__ import annotations

from storeadapter.engine import STATUS_DUPLICATE, MessageStore, StoreConfig
from tests.faults.faultharness import TOPIC
from tests.faults.faultyfs import FaultyFS

ENTRIES = 64


def config() -> StoreConfig:
    return StoreConfig(
        segment_bytes=1 << 20,
        max_message_bytes=4096,
        index_slots=16,
        index_entries=ENTRIES,
        flush_mode="async",
        flush_interval_ms=600_000,
        flush_dirty_bytes=1 << 30,
        disk_warn_ratio=1.0,
        disk_force_ratio=1.0,
        disk_reject_ratio=1.0,
    )


def test_a_checkpoint_by_a_process_that_did_not_write_covers_only_synced_index_files(tmp_path):
    path = tmp_path / "store"
    with FaultyFS(path) as fs:
        writer = MessageStore.open(path, config())
        writer.create_topic(TOPIC, queues=2)
        writer.flush()
        flusher = MessageStore.open(path, config())  # joins before the index rolls
        for number in range(3 * ENTRIES):
            writer.append(TOPIC, f"m{number}".encode(), key=f"k{number}", dedup_id=f"d{number}")
        index_files = sorted(p.name for p in (path / "index").iterdir() if p.name.isdigit())
        assert len(index_files) >= 3, index_files
        flusher.flush()  # the writer never flushes
        image = fs.capture("after the other process's checkpoint")
        flusher.close()
        writer.close()
    # Every directory entry survived (the first queue files are not fsynced at creation:
    # losing them makes recovery rebuild the queues, keys included, from the log).
    recovered = image.materialize(tmp_path / "image", live_entries=True)
    with MessageStore.open(recovered, config()) as store:
        last = 3 * ENTRIES - 1
        assert [m.body for m in store.query_by_key(TOPIC, f"k{last}")] == [f"m{last}".encode()]
        again = store.append(TOPIC, b"again", key="k-again", dedup_id=f"d{last}")
        assert again.status == STATUS_DUPLICATE
