"""Children for the durability tests with several processes (issue 27): writers that
hand their power-loss model (``FaultyFS.save_model``) to the test before they are
SIGKILLed, so that the test opens the store after them and then loses power, with what
the dead writer never fsynced still unsynced.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

from storeadapter.engine import STATUS_OK, MessageStore
from tests.faults.faultharness import (
    QUEUES,
    TOPIC,
    Ack,
    AckWriter,
    append_some,
    arm_kill,
    body_digest,
    fault_config,
    make_body,
    read_acks,
    sized_body,
)
from tests.faults.faultyfs import FaultyFS

#: No full flush of its own: only the sync appends' fsyncs (and the open) make it durable.
NO_FLUSH = {"flush_interval_ms": 600_000, "flush_dirty_bytes": 1 << 30}
LAYOUTS = ("files", "shared")
# A shared topic's blocks and block files, tiny: they roll often.
SHARED_BLOCKS = {"shared_block_entries": 4, "shared_blocks_per_file": 8}


def create_topic_store(path: Path, mode: str, layout: str, queues: int = QUEUES) -> None:
    """A store with topic ``TOPIC`` of ``layout`` (files per queue, or shared blocks)."""
    with MessageStore.open(path, fault_config(mode, **SHARED_BLOCKS)) as store:
        store.create_topic(TOPIC, queues=queues, layout=layout)


def append_then_die_modelled(
    path: str,
    mode: str,
    acks: str,
    model: str,
    count: int,
    seed: int = 1,
    overrides: dict | None = None,
    flushed: str | None = None,
    flush_every: int = 0,
) -> None:
    """A child: under FaultyFS (what the store held before is durable), append ``count``
    messages, then save the model to ``model`` and die by SIGKILL.

    ``flush_every``: call ``flush()`` after about that many messages, and append to
    ``flushed`` how many acknowledgements were written before each one that completed.
    """
    fs = FaultyFS(Path(path))
    fs.install()
    fs.adopt()
    rng = random.Random(seed)
    writer = AckWriter(acks)
    store = MessageStore.open(path, fault_config(mode, **(overrides or {})))
    number = since_flush = 0
    while number < count:
        appended = append_some(store, rng, f"m{seed}", number, writer)
        number += appended
        since_flush += appended
        if flush_every and since_flush >= flush_every:
            before = len(read_acks(Path(acks)))
            store.flush()
            since_flush = 0
            if flushed is not None:
                with open(flushed, "a") as out:
                    out.write(f"{before}\n")
    core = store._appender
    native = 0 if core is None else core.appended + core.batched
    Path(f"{model}.native").write_text(str(native))  # what the store core wrote
    fs.save_model_and_die(Path(model))


def flushed_count(path: Path) -> int:
    """How many acknowledgements were written before the last completed flush."""
    if not path.exists():
        return 0
    lines = path.read_text().split("\n")[:-1]
    return int(lines[-1]) if lines else 0


def lower_watermark_then_die(path: str, acks: str, count: int) -> None:
    """A child: a sync writer and a peer opened in one process; while the peer's full
    flush is between choosing its target and saving its checkpoint, the writer appends
    ``count`` acknowledged messages (each fsync raises the durable watermark past the
    peer's target; three came before it chose its target); then the peer saves, and the
    process dies by SIGKILL."""
    config = fault_config("sync", **NO_FLUSH)
    writer_store = MessageStore.open(path, config)
    peer = MessageStore.open(path, config)
    rng = random.Random(5)
    writer = AckWriter(acks)
    save = peer._checkpoint.save

    def append(count: int) -> None:
        for _ in range(count):
            body = make_body(rng, "w", rng.randrange(1 << 30))
            writer.write([writer_store.append(TOPIC, body)], [body])

    def save_after_the_writer(*args: int) -> None:
        append(count)
        save(*args)

    append(3)  # the peer's target lies past the checkpoint's dispatched offset

    peer._checkpoint.save = save_after_the_writer
    peer.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def append_until_killed_modelled(
    path: str, mode: str, model: str, kill: dict, count: int, queue: int = 0
) -> None:
    """A child: under FaultyFS, open the store, arm the kill point (the model is saved
    just before the kill), append up to ``count`` messages to ``queue``, never
    acknowledged (the kill point is meant to be among them)."""
    fs = FaultyFS(Path(path))
    fs.install()
    fs.adopt()
    store = MessageStore.open(path, fault_config(mode, **NO_FLUSH))
    arm_kill(**kill, before_death=lambda: fs.save_model(Path(model)))
    for number in range(count):
        store.append(TOPIC, sized_body("killed", number, 40), queue=queue)
    store.close()


def commit_until_killed_modelled(path: str, model: str, kill: dict, offset: int) -> None:
    """A child: under FaultyFS, with a journal compacted after every commit, arm the
    kill point (the model is saved just before the kill) and commit group ``g`` to
    ``offset`` on queue 0: acknowledged, then compacted (the kill point is meant to be
    in the compaction)."""
    from storeadapter.engine import offsets

    offsets.OffsetStore.__init__.__defaults__ = (1, True)
    fs = FaultyFS(Path(path))
    fs.install()
    fs.adopt()
    store = MessageStore.open(path, fault_config("sync", **NO_FLUSH))
    arm_kill(**kill, before_death=lambda: fs.save_model(Path(model)))
    store.commit_offset("g", TOPIC, 0, offset)
    store.close()


class AckList:
    """Acknowledgements kept in memory (``append_some`` writes to it as to an AckWriter)."""

    def __init__(self) -> None:
        self.acks: list[Ack] = []

    def write(self, results, bodies) -> None:
        self.acks.extend(
            Ack(r.message_id, r.queue, r.queue_offset, r.commit_offset, body_digest(b))
            for r, b in zip(results, bodies, strict=True)
            if r.status == STATUS_OK
        )

    def __len__(self) -> int:
        return len(self.acks)
