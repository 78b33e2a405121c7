"""persist-queue's file queue (``persistqueue.Queue``): a directory of chunk files.

Used as its documentation says: ``put`` per message (each is pickled, written and
flushed, and the queue's info file is rewritten and renamed into place; the chunk file is
fsynced when it fills, every ``chunksize`` = 100 entries by default), ``get`` per
message and ``task_done`` for each one got (the default ``autosave=False``: the tail
position is saved at the first ``task_done`` after gets, so once per read batch here).
No batch API: ``batch`` only sets how many gets come before their ``task_done`` calls.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import persistqueue

from peers.base import Peer


class PersistQueuePeer(Peer):
    name = "persist_queue"
    durability = "flush per put, fsync per 100-entry chunk"
    method = "put per message; get per message, task_done per batch of gets"

    def __init__(self) -> None:
        self.path: Path | None = None
        self.queue: persistqueue.Queue | None = None

    def setup(self, workdir: Path, size: int) -> None:
        self.path = Path(workdir) / f"persist-queue-{size}"
        shutil.rmtree(self.path, ignore_errors=True)
        # tempdir next to the data: the info file is renamed into place, which needs one
        # file system (the default, the system's temp directory, may be another one).
        self.queue = persistqueue.Queue(str(self.path), tempdir=str(workdir))

    def append(self, bodies: list[bytes], batch: int) -> None:
        assert self.queue is not None
        put = self.queue.put
        for body in bodies:
            put(body)

    def batches(self, batch: int) -> Iterator[list[bytes]]:
        assert self.queue is not None
        queue = self.queue
        get, task_done = queue.get_nowait, queue.task_done
        while True:
            got = []
            try:
                for _ in range(batch):
                    got.append(get())
            except persistqueue.Empty:
                pass
            for _ in got:
                task_done()
            if got:
                yield got
            if len(got) < batch:
                return

    def teardown(self) -> None:
        self.queue = None
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
