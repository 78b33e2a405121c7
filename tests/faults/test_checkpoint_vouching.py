"""A checkpoint vouches only for what its writer made durable (issue 27, cases 1 and 2).

A sync append fsyncs the commit log; its consume-queue entries are fsynced by the next
full flush. A checkpoint saying ``dispatched = T`` tells recovery never to look at the
records below T again, so whoever saves it must first have made durable every queue
file holding entries of records up to T, whoever wrote them:

* a process that recovers after a writer was SIGKILLed finds the writer's entries
  already in place (in the page cache), and must still fsync them before vouching;
* a process that merely opens beside a writer, and flushes, must fsync the writer's
  entries it never saw written before its checkpoint covers them.

Each test loses power right after that checkpoint and counts the acknowledged messages.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from storeadapter.engine import MessageStore
from tests.faults.durableharness import LAYOUTS, NO_FLUSH, create_topic_store
from tests.faults.faultharness import (
    AckWriter,
    append_some,
    check_store,
    fault_config,
    read_acks,
)
from tests.faults.faultyfs import FaultyFS
from tests.faults.forkserver import ForkServer


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer() as running:
        yield running


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_restart_after_a_killed_writer_vouches_only_for_entries_it_fsynced(
    server, tmp_path, layout
):
    path = tmp_path / "store"
    create_topic_store(path, "sync", layout)
    model = tmp_path / "model"
    outcome = server.run(
        "tests.faults.durableharness:append_then_die_modelled",
        tmp_path / "child.stderr",
        path=str(path),
        mode="sync",
        acks=str(tmp_path / "acks.txt"),
        model=str(model),
        count=30,
        overrides=NO_FLUSH,
    )
    assert outcome.killed, outcome
    acked = read_acks(tmp_path / "acks.txt")
    assert len(acked) >= 30
    with FaultyFS(path) as fs:
        fs.load_model(model)
        store = MessageStore.open(path, fault_config("sync", **NO_FLUSH))
        store.flush()
        image = fs.capture("after the restart's checkpoint")
        store.close()
    with MessageStore.open(image.materialize(tmp_path / "image"), fault_config("sync")) as store:
        found = check_store(store, acked, context="after the power loss")
        assert found.lost == [], f"{len(found.lost)} acknowledged messages lost"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_process_opened_beside_a_writer_vouches_only_for_entries_it_fsynced(
    tmp_path, mode, layout
):
    path = tmp_path / "store"
    create_topic_store(path, mode, layout)
    config = fault_config(mode, **NO_FLUSH)
    acks = AckWriter(tmp_path / "acks.txt")
    with FaultyFS(path) as fs:
        fs.adopt()
        writer = MessageStore.open(path, config)
        rng = random.Random(3)
        number = 0
        while number < 30:
            number += append_some(writer, rng, "w", number, acks)
        joiner = MessageStore.open(path, config)
        joiner.flush()
        image = fs.capture("after the joiner's checkpoint")
        joiner.close()
        writer.close()
    acked = read_acks(tmp_path / "acks.txt")
    with MessageStore.open(image.materialize(tmp_path / "image"), fault_config(mode)) as store:
        found = check_store(store, acked, context="after the power loss")
        assert found.lost == [], f"{len(found.lost)} acknowledged messages lost"
