"""The queues a reset of a big topic sets, or an applied reset moved, as compact columns.

A reset of a topic with a million queues may set every one of them. Its plan cannot
list each queue as an object (hundreds of MB) nor carry them as JSON rows (tens of MB
to store). ``Moves`` holds them as four integer columns (queue, committed offset or -1
for never, current position, target), and encodes them for JSON as zlib-compressed
little-endian 64-bit columns, the queue ids as differences from the previous one
(consecutive ids compress to almost nothing). An applied reset keeps what it replaced
the same way (committed: the offset before, target: the offset after), which is what
its undo reads back.
"""

from __future__ import annotations

import base64
import sys
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate, pairwise

COLUMNS = ("queue", "committed", "current", "target")
#: Committed offset of a queue the group never committed on.
NEVER = -1
#: A column is at most this long once decompressed (16,777,216 queues).
_MAX_COLUMN_BYTES = 8 << 24
_LEVEL = 6  # zlib level: the same bytes in, the same text out (the plan's token hashes it)


def _column() -> array:
    return array("q")


@dataclass(eq=False)
class Moves:
    """Every queue a reset sets: parallel columns, in queue order."""

    queue: array = field(default_factory=_column)
    committed: array = field(default_factory=_column)
    current: array = field(default_factory=_column)
    target: array = field(default_factory=_column)

    def add(self, queue: int, committed: int | None, current: int, target: int) -> None:
        self.queue.append(queue)
        self.committed.append(NEVER if committed is None else committed)
        self.current.append(current)
        self.target.append(target)

    def __len__(self) -> int:
        return len(self.queue)

    def changes(self) -> Iterator[tuple[int, int | None, int]]:
        """(queue, committed offset or None, target) of every queue set."""
        for queue, committed, target in zip(self.queue, self.committed, self.target, strict=True):
            yield queue, None if committed == NEVER else committed, target

    def moved(self) -> int:
        """How many queues get another offset than the one they consume from now."""
        return sum(1 for c, t in zip(self.current, self.target, strict=True) if c != t)

    def consumed_again(self) -> int:
        """Messages consumed a second time (moves backwards), over every queue."""
        return sum(c - t for c, t in zip(self.current, self.target, strict=True) if c > t)

    def skipped(self) -> int:
        """Messages never consumed (moves forwards), over every queue."""
        return sum(t - c for c, t in zip(self.current, self.target, strict=True) if t > c)

    def encode(self) -> dict[str, str]:
        """The columns as text for a plan's JSON (``decode`` reads them back)."""
        differences = array("q", self.queue[:1])
        differences.extend(b - a for a, b in pairwise(self.queue))
        columns = {"queue": differences}
        columns.update(committed=self.committed, current=self.current, target=self.target)
        return {name: _pack(column) for name, column in columns.items()}

    @classmethod
    def decode(cls, data: dict) -> Moves:
        """The moves from ``encode``'s text; ValueError if it is not that."""
        if not isinstance(data, dict) or sorted(data) != sorted(COLUMNS):
            raise ValueError("moves need the columns " + ", ".join(COLUMNS))
        columns = {name: _unpack(data[name]) for name in COLUMNS}
        if len({len(column) for column in columns.values()}) != 1:
            raise ValueError("the move columns differ in length")
        columns["queue"] = array("q", accumulate(columns["queue"]))
        return cls(**columns)


def _pack(column: array) -> str:
    if sys.byteorder == "big":
        column = array("q", column)
        column.byteswap()
    return base64.b64encode(zlib.compress(column.tobytes(), _LEVEL)).decode("ascii")


def _unpack(text: object) -> array:
    if not isinstance(text, str):
        raise ValueError("a move column is text")
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(text, validate=True), _MAX_COLUMN_BYTES)
    except (ValueError, zlib.error) as error:
        raise ValueError(f"a move column does not decode ({error})") from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise ValueError("a move column is cut short, or longer than any topic's queues")
    if len(raw) % 8:
        raise ValueError("a move column is not whole 64-bit numbers")
    column = array("q")
    column.frombytes(raw)
    if sys.byteorder == "big":
        column.byteswap()
    return column
