"""The plain SQLite queue table: ``id INTEGER PRIMARY KEY`` and the body, nothing else.

What an application that just needs a durable queue would write: rows appended ``batch``
per transaction (the id is SQLite's rowid, so an insert is an append to the table's
B-tree), read back by id range, ``batch`` rows a query (``id`` and ``body``). WAL journal;
``synchronous=NORMAL`` (a commit is durable once the WAL is checkpointed or synced, as
Tidemark's async mode). Issue 22's targets are stated against this peer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from baseline_sqlite import _connect, _remove_db

from peers.base import Peer

SCHEMA = "CREATE TABLE queue(id INTEGER PRIMARY KEY, body BLOB)"
INSERT_SQL = "INSERT INTO queue(body) VALUES (?)"
SELECT_SQL = "SELECT id, body FROM queue WHERE id >= ? AND id < ? ORDER BY id"


class SqliteQueuePeer(Peer):
    name = "sqlite_queue"
    durability = "WAL, synchronous=NORMAL: not synced per commit"
    method = "INSERT of `batch` rows per transaction; SELECT id, body by id range of `batch`"

    def __init__(self) -> None:
        self.path: Path | None = None
        self.conn: sqlite3.Connection | None = None
        self.count = 0

    def setup(self, workdir: Path, size: int) -> None:
        self.path = Path(workdir) / f"{self.name}-{size}.db"
        _remove_db(self.path)
        self.conn = _connect(self.path)
        self.conn.execute(SCHEMA)

    def append(self, bodies: list[bytes], batch: int) -> None:
        assert self.conn is not None
        execute = self.conn.execute
        for lo in range(0, len(bodies), batch):
            execute("BEGIN")
            self.conn.executemany(INSERT_SQL, [(body,) for body in bodies[lo : lo + batch]])
            execute("COMMIT")
        self.count += len(bodies)

    def finish_append(self) -> None:
        # As the other SQLite peers: the writer's close (a WAL checkpoint) is not timed.
        assert self.conn is not None and self.path is not None
        self.conn.close()
        self.conn = _connect(self.path)

    def batches(self, batch: int) -> Iterator[list[bytes]]:
        assert self.conn is not None
        execute = self.conn.execute
        for lo in range(1, self.count + 1, batch):
            yield [row[1] for row in execute(SELECT_SQL, (lo, lo + batch)).fetchall()]

    def teardown(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.path is not None:
            _remove_db(self.path)
        self.count = 0
