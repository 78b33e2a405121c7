"""Events as records: what an event of a stream topic carries, and checking what a
caller gives for one (docs/FORMAT.md, "Events in the commit log").

An event is an ordinary record of a stream topic, without keys. Its tag is the event
type (if any), and its properties say the rest, in this order: ``STREAM_ID``,
``STREAM_VERSION`` (decimal), ``COMMAND_ID`` (when given) and, for an append of several
events, ``EVENT_GROUP`` = ``<first version>-<last version>``: recovery uses it to drop a
group a crash left incomplete, so a group is stored whole or not at all. Streams are
found through the event index, not the key index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate, chain, repeat, starmap

from crc32c import crc32c

from .errors import InvalidMessageError, MessageTooLargeError
from .record import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    RECORD_MAGIC,
    RECORD_OVERHEAD,
    TRAILER_PACK,
    encode_tag,
    head_packer,
)
from .results import StoredEvent, StoredMessage

STREAM_PROPERTY = "STREAM_ID"
VERSION_PROPERTY = "STREAM_VERSION"
COMMAND_PROPERTY = "COMMAND_ID"
GROUP_PROPERTY = "EVENT_GROUP"
MAX_STREAM_ID_LENGTH = 256
MAX_COMMAND_ID_LENGTH = 256
#: At most this many events in one append (one command).
MAX_EVENTS_PER_APPEND = 10_000
_SEPARATORS = (KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)


def check_stream_id(stream_id: object) -> str:
    """Return ``stream_id`` if usable, else raise InvalidMessageError."""
    return _check_text(stream_id, "a stream id", MAX_STREAM_ID_LENGTH)


def check_command_id(command_id: object) -> str | None:
    if command_id is None:
        return None
    return _check_text(command_id, "a command id", MAX_COMMAND_ID_LENGTH)


def _check_text(value: object, what: str, limit: int) -> str:
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= limit
        or any(sep in value for sep in _SEPARATORS)
    ):
        raise InvalidMessageError(
            f"{what} is 1 to {limit} characters of text without the control "
            "characters \\x01, \\x02 or \\x1f"
        )
    return value


def check_version(value: object, what: str, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFFFFFF:
        raise InvalidMessageError(f"{what} is a whole number from 0 to 4294967295, not {value!r}")
    return value


def check_events(
    events: object, event_type: object, max_bytes: int
) -> tuple[list[bytes], list[bytes]]:
    """The bodies and encoded event types of an append's events.

    Each item is a body (bytes or str) or a mapping with ``body`` and, optionally,
    ``event_type`` (else ``event_type`` applies).
    """
    if isinstance(events, (bytes, str, bytearray, memoryview, Mapping)) or not isinstance(
        events, Sequence
    ):
        raise InvalidMessageError("events are a list of bodies (bytes or str) or of dicts")
    if not 0 < len(events) <= MAX_EVENTS_PER_APPEND:
        raise InvalidMessageError(
            f"an append takes 1 to {MAX_EVENTS_PER_APPEND} events, not {len(events)}"
        )
    default_type = encode_tag(event_type)
    if type(events) is list and set(map(type, events)) == {bytes}:
        if max(map(len, events)) > max_bytes:
            raise MessageTooLargeError(
                f"a body is {max(map(len, events))} bytes; the limit is {max_bytes}"
            )
        return events, [default_type] * len(events)
    bodies = []
    types = []
    for item in events:
        kind = default_type
        if isinstance(item, Mapping):
            unknown = set(item) - {"body", "event_type"}
            if unknown or "body" not in item:
                raise InvalidMessageError(
                    f"an event dict has 'body' and may have 'event_type'; got {sorted(item)}"
                )
            if item.get("event_type") is not None:
                kind = encode_tag(item["event_type"])
            item = item["body"]
        bodies.append(_body(item, max_bytes))
        types.append(kind)
    return bodies, types


def _body(body: object, max_bytes: int) -> bytes:
    if isinstance(body, str):
        body = body.encode()
    elif isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    elif not isinstance(body, bytes):
        raise InvalidMessageError(f"an event body is bytes or str, not {type(body).__name__}")
    if len(body) > max_bytes:
        raise MessageTooLargeError(f"the body is {len(body)} bytes; the limit is {max_bytes}")
    return body


def event_properties(
    stream_id: str, version: int, command_id: str | None, group: tuple[int, int] | None
) -> bytes:
    """The encoded properties of one event."""
    before, after = _around_version(stream_id, command_id, group)
    return before + str(version).encode() + after


def _around_version(
    stream_id: str, command_id: str | None, group: tuple[int, int] | None
) -> tuple[bytes, bytes]:
    """An event's encoded properties are these two around its version's digits."""
    before = (
        f"{STREAM_PROPERTY}{NAME_VALUE_SEPARATOR}{stream_id}{PROPERTY_SEPARATOR}"
        f"{VERSION_PROPERTY}{NAME_VALUE_SEPARATOR}"
    )
    after = ""
    if command_id is not None:
        after += f"{PROPERTY_SEPARATOR}{COMMAND_PROPERTY}{NAME_VALUE_SEPARATOR}{command_id}"
    if group is not None:
        after += f"{PROPERTY_SEPARATOR}{GROUP_PROPERTY}{NAME_VALUE_SEPARATOR}{group[0]}-{group[1]}"
    return before.encode(), after.encode()


def encode_events(
    topic: bytes,
    stream_id: str,
    first_version: int,
    command_id: str | None,
    types: list[bytes],
    bodies: list[bytes],
    start: int,
    queue_id: int,
    queue_offset: int,
    store_ms: int,
) -> tuple[bytes, list[int], list[int]]:
    """The records of an append's events, one after another from commit offset
    ``start`` at queue offsets from ``queue_offset``: their bytes, offsets and lengths.
    The same bytes as ``record.encode_head`` + body + ``record.encode_trailer``, made a
    column at a time (no Python loop per event)."""
    count = len(bodies)
    group = (first_version, first_version + count - 1) if count > 1 else None
    before, after = _around_version(stream_id, command_id, group)
    props = [before + str(v).encode() + after for v in range(first_version, first_version + count)]
    if types.count(types[0]) == count:
        prefix = topic + types[0]
        metas = list(map(prefix.__add__, props))
        tag_lens = repeat(len(types[0]))
    else:
        metas = [topic + kind + p for kind, p in zip(types, props, strict=True)]
        tag_lens = map(len, types)
    body_lens = list(map(len, bodies))
    meta_lens = list(map(len, metas))
    lengths = [RECORD_OVERHEAD + m + b for m, b in zip(meta_lens, body_lens, strict=True)]
    starts = list(accumulate(lengths[:-1], initial=start))
    columns = list(
        zip(
            lengths, repeat(RECORD_MAGIC), starts, range(queue_offset, queue_offset + count),
            repeat(store_ms), repeat(store_ms), repeat(queue_id), body_lens, repeat(0),
            repeat(len(topic)), tag_lens, repeat(0), map(len, props), metas, strict=False,
        )
    )  # fmt: skip
    heads = []
    first = 0
    while first < count:  # runs of one meta length (versions of as many digits)
        size = meta_lens[first]
        end = first + 1
        while end < count and meta_lens[end] == size:
            end += 1
        heads.extend(starmap(head_packer(size), columns[first:end]))
        first = end
    trailers = map(TRAILER_PACK, map(crc32c, bodies, map(crc32c, heads)), lengths)
    return b"".join(chain.from_iterable(zip(heads, bodies, trailers, strict=True))), starts, lengths


def event_of(message: StoredMessage) -> StoredEvent | None:
    """The event a stream topic's record holds, or None if it is not one."""
    version = _version(message)
    if version is None:
        return None
    return StoredEvent(
        message.properties[STREAM_PROPERTY],
        version,
        message.properties.get(COMMAND_PROPERTY),
        message.tag,
        message.store_time_ms,
        message.message_id,
        message.body,
        message.topic,
        message.queue,
        message.queue_offset,
        message.commit_offset,
    )


def _version(message: StoredMessage) -> int | None:
    text = message.properties.get(VERSION_PROPERTY)
    if text is None or not text.isdigit() or not message.properties.get(STREAM_PROPERTY):
        return None
    version = int(text)
    return version if 0 < version <= 0xFFFFFFFF else None


def event_group(message: StoredMessage) -> tuple[int, int] | None:
    """(first version, last version) of the append an event came in, if it had several."""
    text = message.properties.get(GROUP_PROPERTY)
    if text is None:
        return None
    first, _, last = text.partition("-")
    if not first.isdigit() or not last.isdigit() or int(first) > int(last):
        return None
    return int(first), int(last)


__all__ = [
    "COMMAND_PROPERTY",
    "GROUP_PROPERTY",
    "STREAM_PROPERTY",
    "VERSION_PROPERTY",
    "check_command_id",
    "check_events",
    "check_stream_id",
    "check_version",
    "encode_events",
    "event_group",
    "event_of",
    "event_properties",
]
