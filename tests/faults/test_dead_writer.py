"""A writer killed before it published, while another process keeps the store open
and a third writes on: what the dead one left past the published tail must not
trouble the next writer, nor come back at the next recovery.

Rolled to a new segment:
The next writer clears the dead one's bytes after the published tail, end marker
included. The new segment file the dead one created must go too: else, at the next
recovery, the old segment looks damaged (zeros where the marker was: a corruption
report) and the dead writer's unacknowledged records in the new file come back, with
queue offsets that leave gaps or collide with later messages.

Indexed its keys: the next writer must cut those entries before it indexes its own
(keys are indexed in commit-offset order).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.faultharness import (
    TOPIC,
    check_store,
    create_store,
    fault_config,
    populate,
    read_acks,
    start_holder,
)
from tests.faults.forkserver import ForkServer

ENGINE = "storeadapter.engine"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


def _writer_died_after_rolling(server: ForkServer, tmp_path, path, mode: str) -> tuple:
    """A store with a few messages and a member holding it open, whose last writer
    rolled (end marker, next segment, records there) and died unpublished; returns the
    member and the acknowledged messages."""
    create_store(path, mode)
    acked = populate(path, mode, 3, 1, tmp_path / "acks-0.txt")
    holder = start_holder(server, tmp_path, path, mode)
    outcome = server.run(
        "tests.faults.faultharness:write_until_killed",
        tmp_path / "a.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-a.txt"),
        seed=2,
        kill={
            "target": f"{ENGINE}.commitlog:CommitLog.write",
            "when": "after",
            "where": "args[2] == 0",
        },
        limit=1000,
    )
    assert outcome.killed, outcome
    return holder, acked + read_acks(tmp_path / "acks-a.txt")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unpublished_segment_of_a_dead_writer_is_not_recovered_over_later_writes(
    server, tmp_path, mode
):
    path = tmp_path / "store"
    holder, acked = _writer_died_after_rolling(server, tmp_path, path, mode)
    # The next writer clears what it left after the published tail, appends one small
    # message there (in the old segment) and leaves; then the last member dies.
    outcome = server.run(
        "tests.faults.faultharness:append_small",
        tmp_path / "b.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-b.txt"),
    )
    assert outcome.exit_code == 0, outcome
    acked += read_acks(tmp_path / "acks-b.txt")
    holder.kill()
    assert holder.wait().killed
    with MessageStore.open(path, fault_config(mode)) as store:
        assert store.last_recovery.clean_shutdown is False
        found = check_store(store, acked, context=mode)
        assert found.lost == [], found.lost
        assert store.last_recovery.redispatched == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_next_writer_killed_while_clearing_a_dead_writers_roll_leaves_no_damage(
    server, tmp_path, mode
):
    """The next writer dies too, just after zeroing the dead one's end marker: the dead
    one's new segment must already be gone, else recovery finds zeros where the marker
    was, with a segment after them (a corruption report)."""
    path = tmp_path / "store"
    holder, acked = _writer_died_after_rolling(server, tmp_path, path, mode)
    outcome = server.run(
        "tests.faults.faultharness:write_until_killed",
        tmp_path / "b.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-b.txt"),
        seed=3,
        kill={
            "target": f"{ENGINE}.fileio:pwrite_all",
            "caller": "CommitLog.clear_after_tail",
            "when": "after",
        },
        limit=1000,
    )
    assert outcome.killed, f"the writer never cleared after the tail: {outcome}"
    assert read_acks(tmp_path / "acks-b.txt") == []
    holder.kill()
    assert holder.wait().killed
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked, context=mode)
        assert found.lost == [], found.lost


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_next_writer_indexes_keys_after_a_writer_died_having_indexed_its_own(
    server, tmp_path, mode
):
    path = tmp_path / "store"
    create_store(path, mode)
    acked = populate(path, mode, 3, 1, tmp_path / "acks-0.txt")
    holder = start_holder(server, tmp_path, path, mode)
    outcome = server.run(
        "tests.faults.faultharness:write_until_killed",
        tmp_path / "a.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-a.txt"),
        seed=2,
        kill={"target": f"{ENGINE}.keyindex:KeyIndex.put_many", "when": "after"},
        limit=1000,
    )
    assert outcome.killed, outcome
    acked += read_acks(tmp_path / "acks-a.txt")
    outcome = server.run(
        "tests.faults.faultharness:append_small",
        tmp_path / "b.stderr",
        path=str(path),
        mode=mode,
        acks=str(tmp_path / "acks-b.txt"),
        keyed=True,
    )
    assert outcome.exit_code == 0, outcome
    keyed = read_acks(tmp_path / "acks-b.txt")
    assert len(keyed) == 2
    holder.kill()
    assert holder.wait().killed
    with MessageStore.open(path, fault_config(mode)) as store:
        found = check_store(store, acked + keyed, context=mode)
        assert found.lost == [], found.lost
        by_key = {m.message_id for m in store.query_by_key(TOPIC, "k1", limit=1000)}
        assert {a.message_id for a in keyed} <= by_key
