"""The offsets snapshot's bytes (``offsets/snapshot.json``): written with the positions
as columns, one per group and topic; read in that form or in the rows of older engines.

A column is three little-endian arrays, base64 in the JSON: the queue ids (u32), the
committed offsets (i64) and each position's last commit time (i64 ms, -1 where none is
known). A million positions are then three strings, decoded and turned into ints by C
loops, where rows were a million JSON lists each read by a Python call.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from array import array
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import NamedTuple

FORMAT = 2
NO_TIME = -1
_COLUMN_FIELDS = ("group", "topic", "queues", "offsets", "committed_at")
_HISTORY_FIELDS = 8


class Column(NamedTuple):
    """One group's positions on one topic: ``queues[i]`` stands at ``offsets[i]``,
    last committed at ``committed_at[i]`` (NO_TIME: not known)."""

    group: str
    topic: str
    queues: array
    offsets: array
    committed_at: array


class Snapshot(NamedTuple):
    generation: int
    columns: list[Column]
    history: list[list]
    as_columns: bool  # False: read from an older engine's rows


def encode_snapshot(
    generation: int,
    positions: Mapping[str, Mapping[str, Mapping[int, int]]],
    commit_times: Mapping[str, Mapping[str, Mapping[int, int]]],
    history: Iterable[Iterable],
) -> bytes:
    """The snapshot of ``positions`` (group → topic → queue → offset), their
    ``commit_times`` (group → topic → queue → ms) and ``history`` (change tuples)."""
    columns = []
    for group, topics in positions.items():
        times = commit_times.get(group, {})
        for topic, queues in topics.items():
            known = times.get(topic, {})
            columns.append(
                {
                    "group": group,
                    "topic": topic,
                    "queues": _text(array("I", queues.keys())),
                    "offsets": _text(array("q", queues.values())),
                    "committed_at": _text(
                        array("q", map(known.get, queues.keys(), repeat(NO_TIME)))
                    ),
                }
            )
    data = {
        "generation": generation,
        "format": FORMAT,
        "columns": columns,
        "history": [list(change) for change in history],
    }
    return json.dumps(data, separators=(",", ":")).encode()


def decode_snapshot(data: bytes) -> Snapshot:
    """The snapshot in ``data``; ValueError, KeyError or TypeError if it is not one."""
    loaded = json.loads(data)
    if not isinstance(loaded, dict):
        raise ValueError("not a JSON object")
    generation = int(loaded["generation"])
    history = loaded["history"]
    for item in history:
        if len(item) != _HISTORY_FIELDS:
            raise ValueError(f"a history item of {len(item)} fields")
    if "columns" in loaded:
        columns = [_column(item) for item in loaded["columns"]]
        return Snapshot(generation, columns, history, True)
    columns = _columns_of_rows(loaded["offsets"], loaded.get("last_commit", ()))
    return Snapshot(generation, columns, history, False)


def _column(item: dict) -> Column:
    missing = [name for name in _COLUMN_FIELDS if name not in item]
    if missing:
        raise KeyError(f"a column without {', '.join(missing)}")
    group, topic = item["group"], item["topic"]
    if not isinstance(group, str) or not isinstance(topic, str):
        raise TypeError("a column's group and topic must be text")
    queues = _array("I", item["queues"])
    offsets = _array("q", item["offsets"])
    committed_at = _array("q", item["committed_at"])
    if not len(queues) == len(offsets) == len(committed_at):
        raise ValueError(
            f"column {group}/{topic}: {len(queues)} queues, {len(offsets)} offsets and "
            f"{len(committed_at)} commit times"
        )
    return Column(group, topic, queues, offsets, committed_at)


def _columns_of_rows(rows: Iterable, times: Iterable) -> list[Column]:
    """Columns of an older engine's rows: ``[group, topic, queue, offset]`` and
    ``[group, topic, queue, ms]`` (a time without a position is dropped, as replay
    drops it)."""
    at: dict[tuple[str, str], dict[int, list[int]]] = {}
    for group, topic, queue, offset in rows:
        at.setdefault((str(group), str(topic)), {})[int(queue)] = [int(offset), NO_TIME]
    for group, topic, queue, ms in times:
        position = at.get((str(group), str(topic)), {}).get(int(queue))
        if position is not None:
            position[1] = int(ms)
    return [
        Column(
            group,
            topic,
            array("I", queues),
            array("q", (p[0] for p in queues.values())),
            array("q", (p[1] for p in queues.values())),
        )
        for (group, topic), queues in at.items()
    ]


def _text(values: array) -> str:
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _array(typecode: str, text: object) -> array:
    if not isinstance(text, str):
        raise TypeError("a column's arrays must be base64 text")
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as error:
        raise ValueError(f"a column is not base64 ({error})") from None
    values = array(typecode)
    if len(raw) % values.itemsize:
        raise ValueError(f"a column of {len(raw)} bytes is not whole {values.itemsize}-byte items")
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    return values
