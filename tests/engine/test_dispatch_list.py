"""Every path that puts records into the indexes, or takes them out, goes through the
store's one list of dispatchers (dispatch.py): a recording dispatcher added where the
list is made sees the writer's runs, recovery's, a restore's and the catch-up's, and
the truncation of a dead writer's clearing and of a failed write's."""

from __future__ import annotations

import pytest

from storeadapter.engine import MessageStore, StoreConfig
from storeadapter.engine import store as store_module
from storeadapter.engine.dispatch import FOLLOWED, REPLAYED, WRITTEN, Run
from storeadapter.engine.errors import StoreFailedError


class Recorder:
    """A dispatcher that notes what it is handed: (mode, {queue id: queue offsets}),
    and ("truncate", offset, extent); ``fail`` makes its next dispatch raise."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []
        self.fail: OSError | None = None

    def dispatch(self, run: Run) -> int:
        if run.events is not None:
            self.seen.append((run.mode, "events"))
        spans: dict[int, list[int]] = {}
        for queue, first, data in run.entries:
            end = data if run.mode == FOLLOWED else first + len(data) // 20
            spans.setdefault(queue.owner[1], []).extend(range(first, end))
        self.seen.append((run.mode, spans))
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error
        return 0

    def truncate_from(self, offset: int, extent: int) -> int:
        self.seen.append(("truncate", offset, extent))
        return 0

    def modes(self) -> list:
        return [seen[0] for seen in self.seen]


@pytest.fixture
def recorders(monkeypatch) -> list[Recorder]:
    """A recorder at the end of the list of every store opened, in order of opening."""
    made: list[Recorder] = []
    real = store_module.make_dispatchers

    def with_recorder(*args):
        recorder = Recorder()
        made.append(recorder)
        return [*real(*args), recorder]

    monkeypatch.setattr(store_module, "make_dispatchers", with_recorder)
    return made


def _config() -> StoreConfig:
    return StoreConfig(segment_bytes=1 << 20, flush_mode="async")


def test_the_writers_runs_reach_the_list(tmp_path, recorders):
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=2)
        store.append_batch("t", [b"a", b"b", b"c"])
        store.append("t", b"d", key="k", queue=1)
    [recorder] = recorders
    written = [spans for mode, *rest in recorder.seen if mode == WRITTEN for spans in rest]
    assert written == [{0: [0, 1], 1: [0]}, {1: [1]}]


def test_recoverys_runs_reach_the_list(tmp_path, recorders):
    path = tmp_path / "s"
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=1)
        store.append_batch("t", [b"a", b"b"])
    (path / "checkpoint").unlink()  # nothing vouched for: the whole log is replayed
    with MessageStore.open(path, _config()):
        pass
    replayed = [seen[1] for seen in recorders[1].seen if seen[0] == REPLAYED]
    assert replayed == [{0: [0, 1]}]


def test_the_event_indexs_recovery_reaches_the_list(tmp_path, recorders):
    path = tmp_path / "s"
    with MessageStore.open(path, _config()) as store:
        store.create_stream_topic("accounts", queues=1)
        store.append_event("accounts", "s-1", b"e1")
    (path / "consumequeue" / "accounts" / "events").unlink()  # indexed again from the log
    with MessageStore.open(path, _config()) as store:
        assert store.stream_version("accounts", "s-1") == 1
    assert (WRITTEN, "events") in recorders[0].seen
    assert (REPLAYED, "events") in recorders[1].seen


def test_the_restore_of_a_lost_queue_end_reaches_the_list(tmp_path, recorders):
    path = tmp_path / "s"
    with MessageStore.open(path, _config()) as store:
        store.create_topic("t", queues=1, layout="files")
        store.append_batch("t", [b"a", b"b", b"c"])
    queue_file = path / "consumequeue" / "t" / "0" / "00000000000000000000"
    with open(queue_file, "r+b") as handle:
        handle.truncate(20)  # entries 1 and 2 lost below the checkpoint
    with MessageStore.open(path, _config()) as store:
        assert [m.body for m in store.read("t", 0, 0)] == [b"a", b"b", b"c"]
    assert (REPLAYED, {0: [1, 2]}) in recorders[1].seen


def test_what_another_store_published_reaches_the_list_as_followed(tmp_path, recorders):
    path = tmp_path / "s"
    with MessageStore.open(path, _config()) as first, MessageStore.open(path, _config()) as second:
        first.create_topic("t", queues=1)
        first.append("t", b"a")
        assert [m.body for m in second.read("t", 0, 0)] == [b"a"]  # its queue loaded
        first.append_batch("t", [b"b", b"c"])
        assert [m.body for m in second.read("t", 0, 0)] == [b"a", b"b", b"c"]
        second.append("t", b"d")  # its write session catches up first
    assert (FOLLOWED, {0: [1, 2]}) in recorders[1].seen
    assert (WRITTEN, {0: [3]}) in recorders[1].seen


def test_what_another_store_published_reaches_the_list_when_its_notes_are_gone(tmp_path, recorders):
    path = tmp_path / "s"
    with MessageStore.open(path, _config()) as first, MessageStore.open(path, _config()) as second:
        first.create_topic("t", queues=1)
        first.append("t", b"a")
        assert [m.body for m in second.read("t", 0, 0)] == [b"a"]
        second._shared.notes = lambda since, until: None  # the ring moved past them
        first.append_batch("t", [b"b", b"c"])
        assert [m.body for m in second.read("t", 0, 0)] == [b"a", b"b", b"c"]
    assert (FOLLOWED, {0: [1, 2]}) in recorders[1].seen


def test_a_dead_writers_clearing_truncates_through_the_list(tmp_path, recorders):
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=1)
        store.append("t", b"a")
        tail = store.commitlog.tail
        store._shared.begin_write(tail)  # a writer began here and never finished
        store._shared.raise_extent(tail + 100)
        store.append("t", b"b")
    assert ("truncate", tail, tail + 100) in recorders[0].seen


def test_a_failed_writes_clearing_truncates_through_the_list(tmp_path, recorders):
    with MessageStore.open(tmp_path / "s", _config()) as store:
        store.create_topic("t", queues=1)
        store.append("t", b"a")
        tail = store.commitlog.tail
        [recorder] = recorders
        recorder.fail = OSError(5, "injected")
        with pytest.raises(StoreFailedError):
            store.append("t", b"b")
        assert recorder.seen[-1][0] == "truncate" and recorder.seen[-1][1] == tail
