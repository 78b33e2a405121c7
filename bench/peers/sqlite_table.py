"""The SQLite table store: the design EQueue moved away from (bench/baseline_sqlite.py).

One table keyed by (topic, queue, queue_offset), WAL journal, messages round-robin over 4
queues, ``batch`` rows per transaction; read back by range selects of ``batch`` rows per
queue, queues visited in turn. ``synchronous=NORMAL`` (the baseline's setting: a commit
is durable once the WAL is checkpointed or synced, so a power loss may lose the last
commits, as Tidemark's async mode may) or ``FULL`` (the WAL is synced at every commit,
like Tidemark's sync mode).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from baseline_sqlite import QUEUES, SCHEMA, SELECT_SQL, TOPIC, _append, _connect, _remove_db

from peers.base import Peer


class SqliteTablePeer(Peer):
    def __init__(self, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError("synchronous must be NORMAL or FULL")
        self.synchronous = synchronous
        self.name = "sqlite" if synchronous == "NORMAL" else "sqlite_full"
        self.durability = (
            "WAL, synchronous=NORMAL: not synced per commit"
            if synchronous == "NORMAL"
            else "WAL, synchronous=FULL: synced per commit"
        )
        self.method = "INSERT of `batch` rows per transaction; range SELECT of `batch` rows/queue"
        self.path: Path | None = None
        self.conn: sqlite3.Connection | None = None
        self.keys: list[str] = []
        self.count = 0

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        conn = _connect(self.path)
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return conn

    def setup(self, workdir: Path, size: int) -> None:
        self.path = Path(workdir) / f"{self.name}-{size}.db"
        _remove_db(self.path)
        self.conn = self._connect()
        self.conn.execute(SCHEMA)

    def prepare(self, bodies: list[bytes]) -> None:
        self.keys = [f"key-{i}" for i in range(len(bodies))]

    def append(self, bodies: list[bytes], batch: int) -> None:
        assert self.conn is not None
        _append(self.conn, bodies, self.keys, batch)
        self.count += len(bodies)

    def finish_append(self) -> None:
        # As the baseline does: the writer's close (a WAL checkpoint) is not timed.
        assert self.conn is not None
        self.conn.close()
        self.conn = self._connect()

    def batches(self, batch: int) -> Iterator[list[bytes]]:
        assert self.conn is not None
        per_queue = [self.count // QUEUES + (q < self.count % QUEUES) for q in range(QUEUES)]
        execute = self.conn.execute
        for lo in range(0, max(per_queue), batch):
            for queue in range(QUEUES):
                if lo < per_queue[queue]:
                    rows = execute(SELECT_SQL, (TOPIC, queue, lo, lo + batch)).fetchall()
                    yield [row[6] for row in rows]

    def order(self, bodies: list[bytes], batch: int) -> list[bytes]:
        """The order ``batches`` returns ``bodies`` in: windows of each queue in turn."""
        queues = [bodies[q::QUEUES] for q in range(QUEUES)]
        result: list[bytes] = []
        for lo in range(0, len(queues[0]), batch):
            for queue in queues:
                result.extend(queue[lo : lo + batch])
        return result

    def teardown(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.path is not None:
            _remove_db(self.path)
        self.keys = []
        self.count = 0
