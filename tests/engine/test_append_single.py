"""A single ``append`` with an explicit queue, a tag, keys or properties takes the one
native call (``AppendCore.append_or_long_way``) as a plain one does, and writes what the
long way writes; what the long way refuses it leaves to the long way, which raises the
same typed error with nothing written (issue 31, "one native call per append")."""

from __future__ import annotations

from pathlib import Path

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.engine.errors import InvalidMessageError, QueueFrozenError, QueueNotFoundError
from tests.engine.storetools import read_all, small_config

QUEUES = 3
_ROOMY = {"segment_bytes": 1 << 20, "queue_file_entries": 4096}


def _config(layout: str) -> StoreConfig:
    shared = {"shared_layout_above": 0, "shared_block_entries": 4, "shared_blocks_per_file": 64}
    return small_config(flush_mode="async", **_ROOMY, **(shared if layout == "shared" else {}))


def _calls(i: int) -> tuple[bytes | str, dict]:
    """The i-th append's body and arguments: explicit queues, tags, keys, properties,
    str bodies, and plain bodies between them (the round-robin)."""
    body: bytes | str = f"m{i}-ü" if i % 5 == 4 else b"m%d" % i
    kwargs: dict = {}
    if i % 3 == 0:
        kwargs["queue"] = (i // 3) % QUEUES
    if i % 4 == 1:
        kwargs["tag"] = ["paid", "näh"][i % 2]
    if i % 6 == 2:
        kwargs["properties"] = {"region": "eu", "ñ": str(i)}
    return body, kwargs


def _keyed(i: int) -> dict:
    return {"key": [f"a{i % 4}", "b"] if i % 2 else f"k{i % 5}"}


def _records(store: MessageStore) -> list[tuple]:
    return sorted(
        (m.queue, m.queue_offset, m.commit_offset, m.body, m.tag, m.keys, m.properties)
        for q in range(QUEUES)
        for m in read_all(store, "t", q)
    )


def _append(path: Path, layout: str, native: bool, count: int, keys: bool = False) -> tuple:
    """``count`` appends after one plain append to each queue (their first queue files,
    block files: the long way); their results, how many the native call took, and what
    the store then reads back (by queue, and by key)."""
    with MessageStore.open(path, _config(layout)) as store:
        store.create_topic("t", queues=QUEUES, layout=layout)
        for _ in range(QUEUES):
            store.append("t", b"first")
        if not native:
            store._appender = None
        before = 0 if store._appender is None else store._appender.appended
        results = []
        for i in range(count):
            body, kwargs = _calls(i)
            if keys:
                kwargs.update(_keyed(i))
            results.append(store.append("t", body, **kwargs))
        taken = 0 if store._appender is None else store._appender.appended - before
        found = sorted(
            m.commit_offset
            for k in ["k1", "a3", "b"]
            for m in store.query_by_key("t", k, limit=500)
        )
        return [r[1:5] for r in results], taken, _records(store), found


def _queue_files(path: Path) -> dict[str, bytes]:
    root = path / "consumequeue"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name.isdigit()
    }


@pytest.mark.parametrize("layout", ["files", "shared"])
def test_appends_with_a_queue_tag_or_properties_take_the_native_call(tmp_path, layout):
    native = _append(tmp_path / "n", layout, True, 120)
    python = _append(tmp_path / "p", layout, False, 120)

    assert native[1] == 120
    assert native[0] == python[0]
    assert native[2] == python[2]
    if layout == "files":
        assert _queue_files(tmp_path / "n") == _queue_files(tmp_path / "p")


@pytest.mark.parametrize("layout", ["files", "shared"])
def test_keyed_appends_take_the_native_call_and_are_found_by_key(tmp_path, layout):
    native = _append(tmp_path / "n", layout, True, 120, keys=True)
    python = _append(tmp_path / "p", layout, False, 120, keys=True)

    assert native[1] == 120
    assert native[0] == python[0]
    assert native[2] == python[2]
    assert native[3] == python[3] and native[3]
    if layout == "files":
        assert _queue_files(tmp_path / "n") == _queue_files(tmp_path / "p")


def test_an_explicit_queue_leaves_the_round_robin_where_it_was(tmp_path):
    with MessageStore.open(tmp_path / "s", _config("files")) as store:
        store.create_topic("t", queues=QUEUES, layout="files")
        assert [store.append("t", b"x").queue for _ in range(QUEUES)] == [0, 1, 2]
        before = store._appender.appended
        assert store.append("t", b"q", queue=2).queue == 2
        assert store.append("t", b"q", queue=2).queue == 2
        assert [store.append("t", b"y").queue for _ in range(QUEUES)] == [0, 1, 2]
        assert store._appender.appended - before == 5


_BAD = [
    ({"queue": -1}, QueueNotFoundError),
    ({"queue": QUEUES}, QueueNotFoundError),
    ({"queue": 1 << 70}, QueueNotFoundError),
    ({"queue": "1"}, QueueNotFoundError),
    ({"queue": True}, QueueNotFoundError),
    ({"queue": 1.0}, QueueNotFoundError),
    ({"queue": 1, "tag": "paid"}, QueueFrozenError),
    ({"queue": 1}, QueueFrozenError),
    ({"queue": 7, "tag": "paid"}, QueueNotFoundError),
    ({"queue": 0, "tag": "a\x1fb"}, InvalidMessageError),
    ({"queue": 0, "key": ""}, InvalidMessageError),
    ({"properties": {"DEDUP_ID": "x"}}, InvalidMessageError),
    ({"queue": 0, "properties": {"a": 1}}, InvalidMessageError),
]


def _refusal(path: Path, layout: str, native: bool, kwargs: dict) -> tuple:
    with MessageStore.open(path, _config(layout)) as store:
        store.create_topic("t", queues=QUEUES, layout=layout)
        for _ in range(QUEUES):
            store.append("t", b"first")
        store.freeze_queue("t", 1)
        if not native:
            store._appender = None
        tail = store.commitlog.tail
        with pytest.raises(Exception) as caught:
            store.append("t", b"body", **kwargs)
        assert store.commitlog.tail == tail, "nothing written"
        assert store.append("t", b"after", queue=0).queue_offset == 1
        return type(caught.value), str(caught.value), _records(store)


@pytest.mark.parametrize("layout", ["files", "shared"])
@pytest.mark.parametrize(("kwargs", "error"), _BAD)
def test_a_refused_append_raises_the_long_ways_typed_error_and_writes_nothing(
    tmp_path, layout, kwargs, error
):
    native = _refusal(tmp_path / "n", layout, True, kwargs)
    python = _refusal(tmp_path / "p", layout, False, kwargs)

    assert native[0] is error
    assert native == python


def _tagged(path: Path, native: bool) -> list[tuple]:
    with MessageStore.open(path, _config("files")) as store:
        store.create_topic("t", queues=QUEUES, layout="files")
        for _ in range(QUEUES):
            store.append("t", b"first")
        if not native:
            store._appender = None
        before = store._appender.appended if native else 0
        # More distinct tags than the core keeps hashes of, each seen again later.
        results = [store.append("t", b"m%d" % i, tag=f"t{i % 40}-ü")[1:5] for i in range(160)]
        if native:
            assert store._appender.appended - before == 160  # all natively
        paid = [m.body for q in range(QUEUES) for m in store.read("t", q, 0, 500, tag="t7-ü")]
        return [results, paid]


def test_many_distinct_tags_are_hashed_as_the_long_way_hashes_them(tmp_path):
    native = _tagged(tmp_path / "n", True)
    python = _tagged(tmp_path / "p", False)

    assert native == python
    assert sorted(native[1]) == sorted(b"m%d" % i for i in range(7, 160, 40))
    assert _queue_files(tmp_path / "n") == _queue_files(tmp_path / "p")
