"""queuelib's ``FifoDiskQueue``: a directory of chunk files, one ``push``/``pop`` each.

No batch API and no sync at all: ``push`` is one ``os.write`` (page cache only; the
queue's state file is written at ``close``), ``pop`` one or two ``os.read`` calls. So
its durability is below Tidemark's async mode: a crash of the process before ``close``
loses the queue's position.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from queuelib import FifoDiskQueue

from peers.base import Peer


class QueuelibPeer(Peer):
    name = "queuelib"
    durability = "no fsync; state saved at close"
    method = "push per message; pop per message"

    def __init__(self) -> None:
        self.path: Path | None = None
        self.queue: FifoDiskQueue | None = None

    def setup(self, workdir: Path, size: int) -> None:
        self.path = Path(workdir) / f"queuelib-{size}"
        shutil.rmtree(self.path, ignore_errors=True)
        self.queue = FifoDiskQueue(str(self.path))

    def append(self, bodies: list[bytes], batch: int) -> None:
        assert self.queue is not None
        push = self.queue.push
        for body in bodies:
            push(body)

    def batches(self, batch: int) -> Iterator[list[bytes]]:
        assert self.queue is not None
        pop = self.queue.pop
        while True:
            got = []
            for _ in range(batch):
                body = pop()
                if body is None:
                    break
                got.append(body)
            if got:
                yield got
            if len(got) < batch:
                return

    def teardown(self) -> None:
        if self.queue is not None:
            self.queue.close()
            self.queue = None
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None
