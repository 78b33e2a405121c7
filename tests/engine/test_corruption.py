"""Bad bytes in the middle of the log: reported with their offset, skipped, never fatal."""

from __future__ import annotations

import json

import pytest

from storeadapter.engine import (
    CorruptRecordError,
    MessageNotFoundError,
    MessageStore,
    StoreFormatError,
)
from tests.engine.storetools import (
    SEGMENT_BYTES,
    flip_bit,
    lose_queue_files,
    read_all,
    read_everything,
    record_length,
    rescan_from_start,
    segment_paths,
    simulate_crash,
    tail,
    write_log_bytes,
)

# Byte positions inside a record (docs/FORMAT.md): leading length, magic, commit offset,
# queue offset, store time, queue id, topic, body, CRC32C, trailing length.
FLIPS = {
    "length": 0,
    "commit-offset": 8,
    "queue-offset": 16,
    "store-time": 32,
    "queue-id": 40,
    "topic": 56,
    "body": 70,
    "crc": -8,
    "trailing-length": -4,
}


def _populate(store: MessageStore) -> list:
    store.create_topic("t", queues=2)
    return [store.append("t", f"record {i} ".encode() * 20, queue=i % 2) for i in range(40)]


def _victim(results, store_path):
    """A record in the first (sealed) segment, not the first of its queue nor the last."""
    victim = results[6]
    assert victim.commit_offset + record_length(store_path, victim.commit_offset) < SEGMENT_BYTES
    assert len(segment_paths(store_path)) >= 3
    return victim


def _flip(store_path, victim, where: str) -> None:
    position = FLIPS[where]
    if position < 0:
        position += record_length(store_path, victim.commit_offset)
    flip_bit(store_path, victim.commit_offset + position, bit=2)


def _without(before: dict, victim) -> dict:
    return {
        key: [m for m in messages if m.message_id != victim.message_id]
        for key, messages in before.items()
    }


@pytest.mark.parametrize("where", list(FLIPS))
def test_flipped_bit_in_an_old_record_is_reported_by_recovery_and_skipped(
    open_store, store_path, where
):
    store = open_store()
    results = _populate(store)
    before = read_everything(store)
    end = tail(store)
    store.close()
    victim = _victim(results, store_path)
    _flip(store_path, victim, where)
    simulate_crash(store_path)

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert victim.commit_offset in [c.commit_offset for c in report.corruptions]
    assert report.truncated_at is None
    assert tail(reopened) == end
    assert read_everything(reopened) == _without(before, victim)
    assert victim.commit_offset in [c.commit_offset for c in reopened.stats().corruptions]


@pytest.mark.parametrize("where", list(FLIPS))
def test_flipped_bit_in_an_old_record_is_skipped_and_reported_by_readers(
    open_store, store_path, where
):
    store = open_store()
    results = _populate(store)
    before = read_everything(store)
    store.close()
    victim = _victim(results, store_path)
    _flip(store_path, victim, where)

    reopened = open_store()  # clean shutdown: recovery does not rescan the old segment

    assert read_all(reopened, "t", victim.queue) == _without(before, victim)[("t", victim.queue)]
    corruptions = reopened.stats().corruptions
    assert [c.commit_offset for c in corruptions] == [victim.commit_offset]
    assert corruptions[0].reason


@pytest.mark.parametrize("where", list(FLIPS))
def test_get_of_a_record_with_a_flipped_bit_raises_corrupt_record(open_store, store_path, where):
    store = open_store()
    results = _populate(store)
    store.close()
    victim = _victim(results, store_path)
    _flip(store_path, victim, where)

    reopened = open_store()

    with pytest.raises(CorruptRecordError) as raised:
        reopened.get(victim.message_id)
    assert raised.value.offset == victim.commit_offset
    assert str(victim.commit_offset) in str(raised.value)


def test_get_of_a_record_with_a_flipped_magic_is_a_typed_error(open_store, store_path):
    store = open_store()
    results = _populate(store)
    store.close()
    victim = _victim(results, store_path)
    flip_bit(store_path, victim.commit_offset + 4, bit=1)

    reopened = open_store()

    with pytest.raises((CorruptRecordError, MessageNotFoundError)):
        reopened.get(victim.message_id)


def test_records_after_a_corrupt_one_stay_readable_and_writable(open_store, store_path):
    store = open_store()
    results = _populate(store)
    store.close()
    victim = _victim(results, store_path)
    _flip(store_path, victim, "body")
    simulate_crash(store_path)

    reopened = open_store()
    result = reopened.append("t", b"after the damage", queue=victim.queue)

    for other in results:
        if other is not victim:
            assert (
                reopened.get(other.message_id).body
                == f"record {results.index(other)} ".encode() * 20
            )
    assert result.commit_offset == results[-1].commit_offset + record_length(
        store_path, results[-1].commit_offset
    )
    assert result.queue_offset == 20


def test_corrupt_record_in_the_last_segment_does_not_truncate_what_follows(open_store, store_path):
    store = open_store()
    results = _populate(store)
    before = read_everything(store)
    end = tail(store)
    store.close()
    last_base = int(segment_paths(store_path)[-1].name)
    in_last = [r for r in results if r.commit_offset >= last_base]
    assert len(in_last) >= 3
    victim = in_last[0]
    _flip(store_path, victim, "body")
    simulate_crash(store_path, keep_checkpoint=True)
    rescan_from_start(store_path)  # the checkpoint still says the whole log was durable

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert [c.commit_offset for c in report.corruptions] == [victim.commit_offset]
    assert report.truncated_at is None
    assert tail(reopened) == end
    assert read_everything(reopened) == _without(before, victim)


def test_without_a_checkpoint_a_bad_record_in_the_last_segment_ends_the_log(open_store, store_path):
    """No durable watermark is known: the bad record may be a torn write, and records
    after a gap are never resynced onto (a power loss may have kept them past a hole)."""
    store = open_store()
    results = _populate(store)
    store.close()
    last_base = int(segment_paths(store_path)[-1].name)
    victim = [r for r in results if r.commit_offset >= last_base][0]
    _flip(store_path, victim, "body")
    simulate_crash(store_path)

    reopened = open_store()

    report = reopened.stats().last_recovery
    assert report.truncated_at == victim.commit_offset
    assert tail(reopened) == victim.commit_offset
    assert [r for r in results if r.commit_offset >= victim.commit_offset] != []
    after = reopened.append("t", b"after the cut", queue=victim.queue)
    assert after.commit_offset == victim.commit_offset


def test_corrupt_record_is_skipped_when_consume_queues_are_rebuilt(open_store, store_path):
    store = open_store()
    results = _populate(store)
    before = read_everything(store)
    store.close()
    victim = _victim(results, store_path)
    _flip(store_path, victim, "body")
    lose_queue_files(store_path, "t", queues=(0, 1))
    simulate_crash(store_path)

    reopened = open_store()

    assert read_everything(reopened) == _without(before, victim)
    assert reopened.queue_range("t", victim.queue) == (0, 20)
    assert reopened.append("t", b"next", queue=victim.queue).queue_offset == 20


def test_zeroed_record_below_the_checkpoint_is_corruption_not_the_tail(open_store, store_path):
    store = open_store()
    results = _populate(store)
    before = read_everything(store)
    end = tail(store)
    store.close()
    last_base = int(segment_paths(store_path)[-1].name)
    victim = next(r for r in results if r.commit_offset >= last_base)
    length = record_length(store_path, victim.commit_offset)
    write_log_bytes(store_path, victim.commit_offset, bytes(length))
    simulate_crash(store_path, keep_checkpoint=True)

    reopened = open_store()

    assert read_everything(reopened) == _without(before, victim)
    assert tail(reopened) == end
    assert reopened.append("t", b"next").commit_offset == end


def test_unreadable_store_json_raises_store_format_error(open_store, store_path):
    open_store().close()
    (store_path / "store.json").write_text("{not json")

    with pytest.raises(StoreFormatError):
        open_store()


def test_store_of_an_unknown_format_version_raises_store_format_error(open_store, store_path):
    open_store().close()
    identity = json.loads((store_path / "store.json").read_text())
    identity["format_version"] = 99
    (store_path / "store.json").write_text(json.dumps(identity))

    with pytest.raises(StoreFormatError, match="99"):
        open_store()


def test_gap_between_segments_raises_store_format_error(open_store, store_path):
    store = open_store()
    _populate(store)
    store.close()
    segment_paths(store_path)[1].unlink()

    with pytest.raises(StoreFormatError, match="gap"):
        open_store()


def test_failed_open_releases_the_lock(open_store, store_path):
    open_store().close()
    (store_path / "topics.json").write_text("[]")

    for _ in range(2):
        with pytest.raises(StoreFormatError):
            open_store()
    (store_path / "topics.json").write_text(json.dumps({"version": 1, "topics": []}))

    assert open_store().topics() == []  # the failed opens let go of their locks


def _flip_inside(path, text: str) -> None:
    """Flip the low bit of the last character of ``text`` where the file holds it, so
    that the JSON stays valid ('t' -> 'u', a digit -> another digit)."""
    data = bytearray(path.read_bytes())
    data[data.index(text.encode()) + len(text) - 1] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_topic_name_damaged_into_another_valid_name_is_refused(open_store, store_path):
    store = open_store()
    store.create_topic("tt", queues=1)
    store.close()
    _flip_inside(store_path / "topics.json", '"tt')

    with pytest.raises(StoreFormatError, match="topics.json fails its CRC32C check"):
        open_store()


def test_a_number_damaged_in_store_json_is_refused(open_store, store_path):
    open_store().close()
    identity = json.loads((store_path / "store.json").read_text())
    _flip_inside(store_path / "store.json", str(identity["created_ms"]))

    with pytest.raises(StoreFormatError, match="store.json fails its CRC32C check"):
        open_store()


def test_a_damaged_field_name_in_topics_json_is_refused(open_store, store_path):
    store = open_store()
    store.create_topic("t", queues=1)
    store.close()
    _flip_inside(store_path / "topics.json", '"last_id')

    with pytest.raises(StoreFormatError, match="fields this engine does not know"):
        open_store()


def test_metadata_written_without_a_checksum_is_taken_as_it_is(open_store, store_path):
    open_store().close()
    identity = json.loads((store_path / "store.json").read_text())
    del identity["crc32c"]
    (store_path / "store.json").write_text(json.dumps(identity))

    assert open_store().topics() == []
