"""The ``tidemark`` format's options: which exist, what their values mean, and the
offsets they name (Spark's Kafka source names, where the meaning is the same).

Every option a read or write is given must be one of its known names (Spark hands them
over lower-cased; names are matched ignoring case), else ``UnknownOptionError`` lists the
known ones: a misspelt ``startingOfsets`` must not silently read the whole log.

Offsets (``startingOffsets``, ``endingOffsets``) are one of:

* ``earliest`` / ``latest``;
* a commit-log position (digits): records starting at or after it (``startingOffsets``)
  or before it (``endingOffsets``);
* JSON per topic and queue, as Kafka's: ``{"orders": {"0": 23, "1": -2}}``, a queue
  offset per queue (``-2`` earliest, ``-1`` latest). ``startingOffsets`` is the first
  offset read; ``endingOffsets`` the first not read. Queues and topics of the read the
  JSON does not name start at ``earliest`` and end at ``latest``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass

from storeadapter.engine import StoreConfig

EARLIEST = "earliest"
LATEST = "latest"
#: Kafka's per-partition markers in offset JSON.
JSON_EARLIEST = -2
JSON_LATEST = -1

COMMON_READ_OPTIONS = (
    "path",
    "topics",
    "since",
    "until",
    "upto",
    "splitBytes",
    "minPartitions",
    "startingOffsets",
    "failOnDataLoss",
    "filter",
)
BATCH_READ_OPTIONS = (*COMMON_READ_OPTIONS, "endingOffsets")
STREAM_READ_OPTIONS = (*COMMON_READ_OPTIONS, "maxOffsetsPerTrigger", "maxBytesPerTrigger")
STORE_CONFIG_OPTIONS = tuple(f.name for f in dataclasses.fields(StoreConfig))
WRITE_OPTIONS = ("path", "topic", "batchSize", *STORE_CONFIG_OPTIONS)


_OTHER_USES = (
    ("streams", STREAM_READ_OPTIONS),
    ("batch reads", BATCH_READ_OPTIONS),
    ("writes", WRITE_OPTIONS),
)


class UnknownOptionError(ValueError):
    """An option the format does not know (the message lists the ones it does)."""


def _folded(name: str) -> str:
    return name.replace("_", "").lower()


def check_names(options: Mapping[str, object], known: tuple[str, ...], what: str) -> None:
    """Raise ``UnknownOptionError`` for any option not in ``known`` (ignoring case, and
    underscores for the engine's settings)."""
    folded = {_folded(name) for name in known}
    unknown = sorted(name for name in options if _folded(name) not in folded)
    if unknown:
        elsewhere = [
            f"{name} is an option of {kind}"
            for kind, names in _OTHER_USES
            for name in names
            if name not in known and _folded(name) in {_folded(u) for u in unknown}
        ]
        hint = f" ({'; '.join(elsewhere)})" if elsewhere else ""
        raise UnknownOptionError(
            f"the tidemark format has no option {', '.join(map(repr, unknown))} for "
            f"{what}{hint}; its options are: {', '.join(known)}"
        )


def positive_int(options: Mapping[str, object], name: str, default: int | None) -> int | None:
    value = options.get(name)
    if value is None:
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be positive, not {number}")
    return number


def boolean(options: Mapping[str, object], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return text == "true"


@dataclass(frozen=True)
class OffsetSpec:
    """A parsed ``startingOffsets`` or ``endingOffsets``: ``kind`` is ``earliest``,
    ``latest``, ``position`` (``position`` set) or ``queues`` (``queues``: topic →
    queue → offset, -2 earliest, -1 latest)."""

    kind: str
    position: int | None = None
    queues: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)


def parse_offsets(value: object, name: str) -> OffsetSpec:
    text = str(value).strip()
    lowered = text.lower()
    if lowered in (EARLIEST, LATEST):
        return OffsetSpec(lowered)
    if text.isdigit():
        return OffsetSpec("position", int(text))
    hint = (
        f'{name} is "earliest", "latest", a commit-log position, or JSON per topic and '
        'queue such as {"orders": {"0": 23, "1": -2}}'
    )
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError(f"{hint}, not {text!r}") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{hint}, not {text!r}")
    queues: dict[str, dict[int, int]] = {}
    for topic, per_queue in data.items():
        if not isinstance(per_queue, dict):
            raise ValueError(f"{hint}: topic {topic!r} maps to {per_queue!r}")
        offsets: dict[int, int] = {}
        for queue, offset in per_queue.items():
            if not str(queue).isdigit():
                raise ValueError(f"{hint}: {queue!r} of topic {topic!r} is not a queue id")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < -2:
                raise ValueError(
                    f"{hint}: queue {queue} of topic {topic!r} has offset {offset!r} (a queue "
                    "offset, -2 for earliest or -1 for latest)"
                )
            offsets[int(queue)] = offset
        queues[str(topic)] = offsets
    return OffsetSpec("queues", queues=queues)


__all__ = [
    "BATCH_READ_OPTIONS",
    "EARLIEST",
    "JSON_EARLIEST",
    "JSON_LATEST",
    "LATEST",
    "OffsetSpec",
    "STREAM_READ_OPTIONS",
    "UnknownOptionError",
    "WRITE_OPTIONS",
    "boolean",
    "check_names",
    "parse_offsets",
    "positive_int",
]
