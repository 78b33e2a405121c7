"""The commit-log record: encoding, decoding and checking (docs/FORMAT.md, "Record").

All integers are little-endian. A record is::

    header (56 bytes) | topic | tag | keys | properties | body | crc32c (4) | length (4)

The CRC32C covers every byte from the leading length to the end of the body, so a
flipped bit anywhere in the record is caught. The length is repeated at the end so
a frame can be checked (and a log scanned backwards) without reading the body.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence

from crc32c import crc32c

from .errors import CorruptRecordError, InvalidMessageError
from .results import StoredMessage

RECORD_MAGIC_BYTES = b"TDMR"
END_OF_SEGMENT_MAGIC_BYTES = b"TDME"
RECORD_MAGIC = struct.unpack("<I", RECORD_MAGIC_BYTES)[0]
END_OF_SEGMENT_MAGIC = struct.unpack("<I", END_OF_SEGMENT_MAGIC_BYTES)[0]

# length, magic, commit offset, queue offset, born ms, store ms, queue id, body length,
# flags, topic length, tag length, keys length, properties length
HEADER = struct.Struct("<IIQQqqIIHBBHH")
TRAILER = struct.Struct("<II")
MARKER = struct.Struct("<II")
HEADER_SIZE = HEADER.size
STORE_TIME = struct.Struct("<q")
STORE_TIME_AT = 32  # where the store time sits in the header
HEADER_PACK = HEADER.pack
HEADER_UNPACK = HEADER.unpack_from
TRAILER_PACK = TRAILER.pack
TRAILER_UNPACK = TRAILER.unpack_from
RECORD_OVERHEAD = HEADER.size + TRAILER.size
MARKER_SIZE = MARKER.size

MAX_TAG_BYTES = 255
MAX_KEYS_BYTES = 0xFFFF
MAX_PROPERTIES_BYTES = 0xFFFF
KEY_SEPARATOR = "\x1f"
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
_FORBIDDEN_IN_FIELDS = (KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)


def encode_tag(tag: object) -> bytes:
    """Validate and encode a tag (``None`` becomes empty)."""
    if tag is None:
        return b""
    if not isinstance(tag, str):
        raise InvalidMessageError(f"tag must be a string, not {type(tag).__name__}")
    data = tag.encode()
    if not data or len(data) > MAX_TAG_BYTES or _has_separator(tag):
        raise InvalidMessageError(
            f"tag must be 1 to {MAX_TAG_BYTES} bytes of text without control separators"
        )
    return data


def normalize_keys(key: object) -> list[str]:
    """Turn ``key`` (None, a string or a sequence of strings) into a list of keys."""
    if key is None:
        return []
    keys = [key] if isinstance(key, str) else key
    if not isinstance(keys, Sequence) or not all(isinstance(k, str) for k in keys):
        raise InvalidMessageError("key must be a string or a list of strings")
    for k in keys:
        if not k or _has_separator(k):
            raise InvalidMessageError(
                "keys must be non-empty and must not contain the characters \\x01, \\x02 or \\x1f"
            )
    return list(keys)


def encode_keys(keys: list[str]) -> bytes:
    data = KEY_SEPARATOR.join(keys).encode()
    if len(data) > MAX_KEYS_BYTES:
        raise InvalidMessageError(f"keys take {len(data)} bytes; at most {MAX_KEYS_BYTES}")
    return data


def encode_properties(properties: object) -> bytes:
    """Validate and encode a str → str mapping of message properties."""
    if not properties:
        return b""
    if not isinstance(properties, Mapping):
        raise InvalidMessageError("properties must be a mapping of strings to strings")
    parts = []
    for name, value in properties.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidMessageError("property names and values must be strings")
        if not name or _has_separator(name) or _has_separator(value):
            raise InvalidMessageError(
                f"property {name!r} is empty or contains \\x01, \\x02 or \\x1f"
            )
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}")
    data = PROPERTY_SEPARATOR.join(parts).encode()
    if len(data) > MAX_PROPERTIES_BYTES:
        raise InvalidMessageError(
            f"properties take {len(data)} bytes; at most {MAX_PROPERTIES_BYTES}"
        )
    return data


def _has_separator(text: str) -> bool:
    return any(sep in text for sep in _FORBIDDEN_IN_FIELDS)


def encode_head(
    length: int,
    commit_offset: int,
    queue_offset: int,
    born_ms: int,
    store_ms: int,
    queue_id: int,
    body_len: int,
    topic: bytes,
    tag: bytes,
    keys: bytes,
    properties: bytes,
) -> bytes:
    """The record's bytes before the body: header, topic, tag, keys, properties.

    A record is ``head + body + encode_trailer(head, body, length)``. The append path
    inlines these two calls; they are the reference for what it writes.
    """
    return (
        HEADER_PACK(
            length,
            RECORD_MAGIC,
            commit_offset,
            queue_offset,
            born_ms,
            store_ms,
            queue_id,
            body_len,
            0,
            len(topic),
            len(tag),
            len(keys),
            len(properties),
        )
        + topic
        + tag
        + keys
        + properties
    )


def encode_trailer(head: bytes, body: bytes, length: int) -> bytes:
    """CRC32C of head and body, then the length again."""
    return TRAILER_PACK(crc32c(body, crc32c(head)), length)


_HEAD_PACKERS: dict[int, Callable[..., bytes]] = {}


def head_packer(meta_len: int) -> Callable[..., bytes]:
    """``pack`` for a record's head (``encode_head``'s bytes) whose topic, tag, keys and
    properties take ``meta_len`` bytes: the 13 header fields, then those bytes as one."""
    pack = _HEAD_PACKERS.get(meta_len)
    if pack is None:
        if len(_HEAD_PACKERS) >= _MAX_SHAPES:
            _HEAD_PACKERS.clear()
        pack = _HEAD_PACKERS[meta_len] = struct.Struct(f"{HEADER.format}{meta_len}s").pack
    return pack


def check_record(view: memoryview, pos: int, limit: int, commit_offset: int) -> tuple:
    """Check the record at ``pos`` (frame, magic, CRC, own offset); return its header.

    The header is the tuple of ``HEADER``'s fields; its first item is the length.

    ``limit`` is where readable bytes end; ``commit_offset`` is the offset the record
    must say it lives at. Raises CorruptRecordError with the reason otherwise.
    """
    if pos + HEADER_SIZE > limit:
        raise CorruptRecordError(commit_offset, "header runs past the end of the data")
    header = HEADER.unpack_from(view, pos)
    length = header[0]
    if header[1] != RECORD_MAGIC:
        raise CorruptRecordError(commit_offset, f"bad magic 0x{header[1]:08x}")
    if length != RECORD_OVERHEAD + header[7] + sum(header[9:13]):
        raise CorruptRecordError(commit_offset, f"length field {length} disagrees with fields")
    end = pos + length
    if end > limit:
        raise CorruptRecordError(commit_offset, f"length {length} runs past the end of the data")
    crc, tail_length = TRAILER.unpack_from(view, end - TRAILER.size)
    if tail_length != length:
        raise CorruptRecordError(
            commit_offset, f"trailing length {tail_length} differs from leading {length}"
        )
    if crc32c(view[pos : end - TRAILER.size]) != crc:
        raise CorruptRecordError(commit_offset, "CRC32C mismatch")
    if header[2] != commit_offset:
        raise CorruptRecordError(
            commit_offset, f"record says it lives at commit-log offset {header[2]}"
        )
    return header


def frame_intact(view: memoryview, pos: int, limit: int) -> bool:
    """Whether a record frame starts at ``pos``: magic, consistent lengths at both ends.

    A damaged record still has its frame; bytes that merely contain the magic (inside
    another record's body) almost never do.
    """
    if pos + HEADER_SIZE > limit:
        return False
    header = HEADER_UNPACK(view, pos)
    length = header[0]
    if header[1] != RECORD_MAGIC or length != RECORD_OVERHEAD + header[7] + sum(header[9:13]):
        return False
    if pos + length > limit:
        return False
    return TRAILER_UNPACK(view, pos + length - TRAILER.size)[1] == length


# A record of a given length and topic length read in one unpack: the header's fields,
# the topic, the rest up to the trailer (tag, keys, properties, body), the CRC and the
# trailing length. The read path checks and decodes a record with one such call.
_SHAPES: dict[int, Callable[[memoryview, int], tuple]] = {}
_MAX_SHAPES = 4096
# Only records up to this length are read whole before their header is checked, so a
# damaged queue entry's size cannot make a read copy more than this.
MAX_SHAPED_LENGTH = 1 << 16
_TOPIC_NAMES: dict[bytes, str] = {}
_MAX_TOPIC_NAMES = 4096
_LEAD_UNPACK = struct.Struct("<II42xB").unpack_from  # length, magic, topic length


def record_shape(length: int, topic_len: int) -> Callable[[memoryview, int], tuple] | None:
    """``unpack_from`` for a whole record of ``length`` bytes with a ``topic_len`` topic.

    It gives the 13 header fields, the topic bytes, the bytes from the tag to the end of
    the body, the CRC and the trailing length. None when no such record can exist, or
    when it is longer than ``MAX_SHAPED_LENGTH``.
    """
    if not 0 <= topic_len <= 0xFF:
        return None
    key = length << 8 | topic_len
    unpack = _SHAPES.get(key)
    if unpack is None:
        rest = length - RECORD_OVERHEAD - topic_len
        if rest < 0 or length > MAX_SHAPED_LENGTH:
            return None
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        unpack = _SHAPES[key] = struct.Struct(f"{HEADER.format}{topic_len}s{rest}sII").unpack_from
    return unpack


def topic_name(data: bytes) -> str:
    """The topic name in a record (``data`` from an intact one), decoded once per name."""
    name = _TOPIC_NAMES.get(data)
    if name is None:
        name = str(data, "utf-8")
        if len(_TOPIC_NAMES) >= _MAX_TOPIC_NAMES:
            _TOPIC_NAMES.clear()
        _TOPIC_NAMES[data] = name
    return name


def message_with_extras(
    message_id: str,
    topic: str,
    queue_id: int,
    queue_offset: int,
    commit_offset: int,
    born_ms: int,
    store_ms: int,
    tag_len: int,
    keys_len: int,
    props_len: int,
    rest: bytes,
) -> StoredMessage:
    """A StoredMessage from ``rest``: an intact record's tag, keys, properties and body."""
    tag = str(rest[:tag_len], "utf-8") if tag_len else None
    p = tag_len + keys_len
    keys = str(rest[tag_len:p], "utf-8").split(KEY_SEPARATOR) if keys_len else []
    if props_len:
        properties = dict(
            item.split(NAME_VALUE_SEPARATOR, 1)
            for item in str(rest[p : p + props_len], "utf-8").split(PROPERTY_SEPARATOR)
        )
    else:
        properties = {}
    return tuple.__new__(
        StoredMessage,
        (
            message_id,
            topic,
            queue_id,
            queue_offset,
            commit_offset,
            born_ms,
            store_ms,
            tag,
            keys,
            properties,
            rest[p + props_len :],
        ),
    )


def decode_record(
    view: memoryview,
    pos: int,
    limit: int,
    commit_offset: int,
    id_prefix: str,
    expected_length: int = 0,
) -> StoredMessage:
    """Check (as ``check_record`` does) and decode the record at ``pos`` in one pass.

    With ``expected_length`` (a consume-queue entry's size), a record of another length
    is corrupt too.
    """
    message_id = f"{id_prefix}{commit_offset:016X}"
    message = decode_intact(view, pos, limit, commit_offset, message_id, expected_length)
    if message is None:
        return _decode_checked(view, pos, limit, commit_offset, message_id, expected_length)
    return message


def decode_intact(
    view: memoryview,
    pos: int,
    limit: int,
    commit_offset: int,
    message_id: str,
    expected_length: int = 0,
) -> StoredMessage | None:
    """The record at ``pos`` as ``decode_record`` gives it, or None for anything it does
    not accept at once: then ``decode_record`` says what is wrong, if anything is."""
    if pos < 0 or pos + HEADER_SIZE > limit:
        return None
    length, magic, topic_len = _LEAD_UNPACK(view, pos)
    if (
        magic != RECORD_MAGIC
        or pos + length > limit
        or (expected_length and length != expected_length)
    ):
        return None
    unpack = record_shape(length, topic_len)
    if unpack is None:
        return None
    (
        _length,
        _magic,
        offset,
        queue_offset,
        born_ms,
        store_ms,
        queue_id,
        body_len,
        _flags,
        _topic_len,
        tag_len,
        keys_len,
        props_len,
        topic,
        rest,
        crc,
        tail_length,
    ) = unpack(view, pos)
    if (
        offset != commit_offset
        or tail_length != length
        or body_len + tag_len + keys_len + props_len != len(rest)
        or crc32c(view[pos : pos + length - 8]) != crc
    ):
        return None
    if tag_len or keys_len or props_len:
        return message_with_extras(
            message_id,
            topic_name(topic),
            queue_id,
            queue_offset,
            commit_offset,
            born_ms,
            store_ms,
            tag_len,
            keys_len,
            props_len,
            rest,
        )
    return tuple.__new__(
        StoredMessage,
        (
            message_id,
            topic_name(topic),
            queue_id,
            queue_offset,
            commit_offset,
            born_ms,
            store_ms,
            None,
            [],
            {},
            rest,
        ),
    )


def _decode_checked(
    view: memoryview,
    pos: int,
    limit: int,
    commit_offset: int,
    message_id: str,
    expected_length: int,
) -> StoredMessage:
    """``decode_record`` for what ``decode_intact`` does not accept: damage, or records
    too long to read whole before their header is checked."""
    header = check_record(view, pos, limit, commit_offset)
    length = header[0]
    if expected_length and length != expected_length:
        raise CorruptRecordError(
            commit_offset, f"record is {length} bytes, its queue entry says {expected_length}"
        )
    p = pos + HEADER_SIZE
    topic_len = header[9]
    return message_with_extras(
        message_id,
        str(view[p : p + topic_len], "utf-8"),
        header[6],
        header[3],
        commit_offset,
        header[4],
        header[5],
        header[10],
        header[11],
        header[12],
        bytes(view[p + topic_len : pos + length - TRAILER.size]),
    )


def record_length(topic: bytes, tag: bytes, keys: bytes, properties: bytes, body: bytes) -> int:
    return RECORD_OVERHEAD + len(topic) + len(tag) + len(keys) + len(properties) + len(body)
