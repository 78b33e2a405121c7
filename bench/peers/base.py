"""The interface every peer implements, and the one way they are all timed.

A peer is used once per body size: ``setup(workdir, size)`` makes a fresh store (a file,
a directory, a private server or a uniquely named stream), ``prepare(bodies)`` does what
should not be timed (keys, rows), ``append(bodies, batch)`` writes every body in order,
``finish_append()`` ends the writing side outside the timed region, ``batches(batch)``
yields the bodies back in order, a list per round trip, and ``teardown()`` removes
everything ``setup`` made. `measure` times ``append`` and ``read_all`` and checks that
every message came back.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path


class Peer(ABC):
    """A system that stores messages; subclasses fill in the methods below."""

    name = "peer"
    #: What a successful append promises, in a few words, for the table.
    durability = ""
    #: How append and read are done, for the table and the docs.
    method = ""

    @abstractmethod
    def setup(self, workdir: Path, size: int) -> None:
        """Supplied by each peer."""

    def prepare(self, bodies: list[bytes]) -> None:  # noqa: B027 - optional hook
        """Work that is not timed, done before ``append``."""

    @abstractmethod
    def append(self, bodies: list[bytes], batch: int) -> None:
        """Supplied by each peer."""

    def finish_append(self) -> None:  # noqa: B027 - optional hook
        """Close the writing side (not timed), before the reads start."""

    @abstractmethod
    def batches(self, batch: int) -> Iterator[list[bytes]]:
        """Supplied by each peer."""

    def order(self, bodies: list[bytes], batch: int) -> list[bytes]:
        """The order ``batches(batch)`` gives ``bodies`` back in (arrival order here)."""
        return list(bodies)

    def read_all(self, batch: int) -> tuple[int, int]:
        """Read every message back; (messages, body bytes)."""
        count = size = 0
        for bodies in self.batches(batch):
            count += len(bodies)
            size += sum(map(len, bodies))
        return count, size

    @abstractmethod
    def teardown(self) -> None:
        """Supplied by each peer."""

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


def measure(
    peer: Peer, workdir: Path, bodies: list[bytes], batch: int = 500, read_batch: int = 500
) -> dict:
    """Append ``bodies`` to a fresh ``peer`` and read them back; rates and their checks."""
    size = len(bodies[0])
    expected = sum(map(len, bodies))
    peer.setup(Path(workdir), size)
    try:
        peer.prepare(bodies)
        started = time.perf_counter()
        peer.append(bodies, batch)
        append_s = time.perf_counter() - started
        peer.finish_append()
        started = time.perf_counter()
        count, read = peer.read_all(read_batch)
        read_s = time.perf_counter() - started
    finally:
        peer.teardown()
    if count != len(bodies) or read != expected:
        raise RuntimeError(
            f"{peer.name}: read back {count} messages / {read} bytes, "
            f"expected {len(bodies)} / {expected}"
        )
    return {
        "append_msgs_per_s": round(count / append_s),
        "append_mb_per_s": round(expected / append_s / 1e6, 1),
        "read_msgs_per_s": round(count / read_s),
        "read_mb_per_s": round(expected / read_s / 1e6, 1),
        "count": count,
        "append_s": round(append_s, 3),
        "read_s": round(read_s, 3),
    }
