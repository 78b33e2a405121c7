"""The systems `make bench` measures beside Tidemark, one module each (see base.py).

``PEERS`` maps a peer's name to a factory taking no argument; every peer has the same
small interface (`base.Peer`): ``setup``, ``prepare``, ``append``, ``batches``,
``read_all``, ``teardown``.
"""

from __future__ import annotations

from collections.abc import Callable

from peers.base import Peer
from peers.jetstream import JetStreamPeer
from peers.persist_queue import PersistQueuePeer
from peers.queuelib_fifo import QueuelibPeer
from peers.redis_streams import RedisStreamsPeer
from peers.sqlite_queue import SqliteQueuePeer
from peers.sqlite_table import SqliteTablePeer

PEERS: dict[str, Callable[[], Peer]] = {
    "sqlite_queue": SqliteQueuePeer,
    "sqlite": lambda: SqliteTablePeer(synchronous="NORMAL"),
    "sqlite_full": lambda: SqliteTablePeer(synchronous="FULL"),
    "redis_everysec": lambda: RedisStreamsPeer(appendfsync="everysec"),
    "redis_always": lambda: RedisStreamsPeer(appendfsync="always"),
    "jetstream": JetStreamPeer,
    "persist_queue": PersistQueuePeer,
    "queuelib": QueuelibPeer,
}

__all__ = ["PEERS", "Peer"]
