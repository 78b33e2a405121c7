"""A batch of dict items written by one native call (``AppendCore.append_items``)
against the long way (``Writer._write_general``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.engine.writer import Writer
from tests.engine.storetools import read_all, small_config

_ROOMY = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}
_ROOMY_BLOCKS = {"shared_block_entries": 64, "shared_blocks_per_file": 64}


def _config() -> StoreConfig:
    return small_config(flush_mode="async", **_ROOMY)


def _items(b: int) -> list:
    items = []
    for i in range(60):
        item: dict = {"body": f"b{b}-{i}-ünï" if i % 3 else b"raw-%d" % i}
        if i % 2:
            item["tag"] = ["paid", "näh", "x" * 40][i % 3]
        if i % 4 == 1:
            item["key"] = f"k{i % 7}-é"
        if i % 5 == 2:
            item["key"] = [f"a{i}", f"b{i % 3}"]
        if i % 6 == 3:
            item["properties"] = {"region": "eu", "ñ": str(i)}
        if i % 9 == 4:
            item["queue"] = i % 3
        items.append(item)
    return items


def _records(store: MessageStore) -> list[tuple]:
    """What is deterministic of each record: its place, body, tag, keys, properties."""
    return sorted(
        (m.queue, m.queue_offset, m.commit_offset, m.body, m.tag, m.keys, m.properties)
        for q in range(3)
        for m in read_all(store, "t", q)
    )


def _write(path: Path, native: bool) -> tuple[list, int, list, dict]:
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=3, layout="files")
        if not native:
            store._appender = None
        results = [r for b in range(4) for r in store.append_batch("t", _items(b))]
        taken = 0 if store._appender is None else store._appender.batched
        records = _records(store)
        found = {
            key: sorted(m.commit_offset for m in store.query_by_key("t", key, limit=500))
            for key in ["k1-é", "k5-é", "a7", "b1", "b2"]
        }
    return results, taken, records, found


def _queue_entries(path: Path) -> dict[str, bytes]:
    root = path / "consumequeue"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name.isdigit()
    }


def test_dict_batches_take_one_native_call_and_match_the_long_way(tmp_path):
    native, taken, native_records, native_found = _write(tmp_path / "n", True)
    python, _, python_records, python_found = _write(tmp_path / "p", False)

    # The first batch makes each queue's first file (the long way); the others native.
    assert taken == 3
    assert [r[1:5] for r in native] == [r[1:5] for r in python]
    assert native_records == python_records
    assert _queue_entries(tmp_path / "n") == _queue_entries(tmp_path / "p")
    assert native_found == python_found
    assert all(native_found.values())


def test_natively_written_items_are_found_by_key_and_tag_after_a_reopen(tmp_path):
    path = tmp_path / "s"
    results, taken, _, _ = _write(path, True)
    assert taken == 3

    with MessageStore.open(path, _config()) as store:
        paid = [m for q in range(3) for m in store.read("t", q, 0, 500, tag="paid")]
        assert len(paid) == 4 * sum(1 for i in range(60) if i % 2 and i % 3 == 0)
        assert {m.tag for m in paid} == {"paid"}
        keyed = store.query_by_key("t", "b2", limit=500)
        assert keyed and all("b2" in m.keys for m in keyed)
        last = store.get(results[-1].message_id)
        assert last.body == "b3-59-ünï".encode()


def test_a_replaced_write_path_function_turns_the_native_dict_batch_down(tmp_path, monkeypatch):
    calls = []
    genuine = Writer._write_general

    def recording(self, *args):
        calls.append(1)
        return genuine(self, *args)

    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=3, layout="files")
        store.append_batch("t", _items(0))  # the queues' first files: the long way
        store.append_batch("t", _items(0))
        assert store._appender.batched == 1
        monkeypatch.setattr(Writer, "_write_general", recording)
        store.append_batch("t", _items(1))
        assert (store._appender.batched, len(calls)) == (1, 1)
        monkeypatch.undo()
        store.append_batch("t", _items(2))
        assert store._appender.batched == 2
        assert len(_records(store)) == 240


def test_dedup_ids_go_the_long_way(tmp_path):
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=3, layout="files")
        store.append_batch("t", [{"body": b"x", "queue": 0}])  # its first file
        store.append_batch("t", [{"body": b"y", "queue": 0, "dedup_id": "d1"}])
        assert store._appender.batched == 0
        assert len(_records(store)) == 2


def _born(path: Path, native: bool, layout: str) -> tuple[list, int, list]:
    # Blocks with room for every entry (the shared test layout's tiny ones would make
    # batches open new block files, a step the core leaves to the long way).
    roomy = small_config(flush_mode="async", **_ROOMY, **_ROOMY_BLOCKS)
    with MessageStore.open(path, roomy) as store:
        store.create_topic("t", queues=3, layout=layout)
        store.append_batch("t", [{"body": b"first", "queue": q} for q in range(3)])
        if not native:
            store._appender = None
        batch = [
            {"body": b"b%d" % i, "born_time_ms": 1_000 * i, "tag": "x"} if i % 2 else b"p%d" % i
            for i in range(30)
        ]
        results = [r[1:5] for _ in range(3) for r in store.append_batch("t", batch)]
        taken = 0 if store._appender is None else store._appender.batched
        born = sorted(
            (m.commit_offset, m.born_time_ms == m.store_time_ms, m.born_time_ms)
            for q in range(3)
            for m in read_all(store, "t", q)
            if m.body.startswith(b"b")
        )
        return results, taken, born


@pytest.mark.parametrize("layout", ["files", "shared"])
def test_born_times_take_the_native_call_and_are_kept(tmp_path, layout):
    native = _born(tmp_path / "n", True, layout)
    python = _born(tmp_path / "p", False, layout)

    assert native[1] == 3
    assert native[0] == python[0]
    assert native[2] == python[2]
    assert sorted(b for _, _, b in native[2]) == sorted([1_000 * i for i in range(1, 30, 2)] * 3)


def test_a_batch_over_more_queue_files_than_the_core_keeps_open_is_written(tmp_path):
    # max_open_queue_files bounds the core's descriptors too: a batch over more queues
    # goes the long way; one over fewer makes room first (taking a descriptor never
    # closes another of the same batch).
    config = small_config(flush_mode="async", max_open_queue_files=8, **_ROOMY)
    with MessageStore.open(tmp_path / "s", config) as store:
        store.create_topic("t", queues=12, layout="files")

        def spread(queues) -> list:
            return [{"body": b"%d" % q, "queue": q, "tag": "x"} for q in queues for _ in range(3)]

        store.append_batch("t", spread(range(12)))  # the first files: the long way
        store.append_batch("t", spread(range(12)))
        assert store._appender.batched == 0
        store.append_batch("t", spread(range(6)))
        store.append_batch("t", spread(range(6, 12)))
        store.append_batch("t", spread(range(3, 9)))
        assert store._appender.batched == 3
        counts = [len(read_all(store, "t", q)) for q in range(12)]
        assert counts == [9, 9, 9, 12, 12, 12, 12, 12, 12, 9, 9, 9]
