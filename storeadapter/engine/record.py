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

# The header, field by field (docs/FORMAT.md, "Record"): the one place its layout is
# written. HEADER, the field numbers below (an unpacked header's items) and the byte
# positions (``*_AT``, from a record's start) are all made from this table.
HEADER_LAYOUT = (
    ("length", "I"),
    ("magic", "I"),
    ("commit_offset", "Q"),
    ("queue_offset", "Q"),
    ("born_ms", "q"),
    ("store_ms", "q"),
    ("queue_id", "I"),
    ("body_len", "I"),
    ("flags", "H"),
    ("topic_len", "B"),
    ("tag_len", "B"),
    ("keys_len", "H"),
    ("props_len", "H"),
)
HEADER = struct.Struct("<" + "".join(code for _name, code in HEADER_LAYOUT))
# Where each field sits in a record: its byte position, and its own struct.
FIELD_AT = {
    name: struct.calcsize("<" + "".join(code for _n, code in HEADER_LAYOUT[:i]))
    for i, (name, _code) in enumerate(HEADER_LAYOUT)
}
FIELD = {name: struct.Struct("<" + code) for name, code in HEADER_LAYOUT}

# An unpacked header's items by name: ``header[TOPIC_LEN]``.
(
    LENGTH,
    MAGIC,
    COMMIT_OFFSET,
    QUEUE_OFFSET,
    BORN_MS,
    STORE_MS,
    QUEUE_ID,
    BODY_LEN,
    FLAGS,
    TOPIC_LEN,
    TAG_LEN,
    KEYS_LEN,
    PROPS_LEN,
) = range(len(HEADER_LAYOUT))
# The lengths of the parts between the header and the body, in the order they follow it.
META_LENS = slice(TOPIC_LEN, PROPS_LEN + 1)

MAGIC_AT = FIELD_AT["magic"]
COMMIT_OFFSET_AT = FIELD_AT["commit_offset"]
QUEUE_OFFSET_AT = FIELD_AT["queue_offset"]
STORE_TIME_AT = FIELD_AT["store_ms"]
TOPIC_LEN_AT = FIELD_AT["topic_len"]
MAGIC_FIELD = FIELD["magic"]
COMMIT_OFFSET_FIELD = FIELD["commit_offset"]
STORE_TIME = FIELD["store_ms"]
COMMIT_OFFSET_END = COMMIT_OFFSET_AT + COMMIT_OFFSET_FIELD.size

TRAILER = struct.Struct("<II")  # crc32c, length again
MARKER = struct.Struct("<II")  # length, magic (the end-of-segment marker)
HEADER_SIZE = HEADER.size
TRAILER_SIZE = TRAILER.size
HEADER_PACK = HEADER.pack
HEADER_UNPACK = HEADER.unpack_from
TRAILER_PACK = TRAILER.pack
TRAILER_UNPACK = TRAILER.unpack_from
RECORD_OVERHEAD = HEADER.size + TRAILER.size
MARKER_SIZE = MARKER.size
_TRAILING_LENGTH = struct.Struct("<I")  # the trailer's second half
TRAILING_LENGTH_SIZE = _TRAILING_LENGTH.size


def field_bytes(name: str) -> range:
    """The byte positions of header field ``name`` in a record."""
    return range(FIELD_AT[name], FIELD_AT[name] + FIELD[name].size)


def fields_format(names: Sequence[str], length: int) -> str:
    """A struct format that takes the header fields ``names`` (in layout order) out of a
    record of ``length`` bytes, passing over every other byte."""
    parts, at = ["<"], 0
    for name, code in HEADER_LAYOUT:
        if name in names:
            if FIELD_AT[name] > at:
                parts.append(f"{FIELD_AT[name] - at}x")
            parts.append(code)
            at = FIELD_AT[name] + FIELD[name].size
    parts.append(f"{length - at}x")
    return "".join(parts)


def record_field(unpack: Callable[..., tuple], buffer, pos: int, base: int = 0) -> tuple:
    """``unpack(buffer, pos)`` over a segment's bytes, bounds-checked: the one way record
    bytes are unpacked outside a record's full check. ``base`` is the commit-log offset
    of ``buffer``'s first byte.

    A file cut short under its records (a damaged disk, a truncation) leaves records
    that run past the end of the mapping: that is CorruptRecordError, never an untyped
    ``struct.error``.
    """
    try:
        if pos < 0:  # unpack_from would count it from the end
            raise struct.error(pos)
        return unpack(buffer, pos)
    except struct.error:
        raise CorruptRecordError(
            base + pos, f"the file ends at byte {len(buffer)} of its segment, inside the record"
        ) from None


_MAGIC_UNPACK = struct.Struct(f"<{MAGIC_AT}xI").unpack_from
_COMMIT_OFFSET_UNPACK = struct.Struct(f"<{COMMIT_OFFSET_AT}xQ").unpack_from
_STORE_TIME_UNPACK = struct.Struct(f"<{STORE_TIME_AT}xq").unpack_from
_MARKER_UNPACK = MARKER.unpack_from


def record_magic(buffer, pos: int, base: int = 0) -> int:
    """The magic of the record (or end marker) starting at ``pos``."""
    return record_field(_MAGIC_UNPACK, buffer, pos, base)[0]


def record_commit_offset(buffer, pos: int, base: int = 0) -> int:
    """The commit offset the record starting at ``pos`` says it lives at."""
    return record_field(_COMMIT_OFFSET_UNPACK, buffer, pos, base)[0]


def record_store_time(buffer, pos: int, base: int = 0) -> int:
    """The store time (ms) in the header of the record starting at ``pos``."""
    return record_field(_STORE_TIME_UNPACK, buffer, pos, base)[0]


def record_lead(buffer, pos: int, base: int = 0) -> tuple[int, int]:
    """The length and magic of the record (or end marker) starting at ``pos``."""
    return record_field(_MARKER_UNPACK, buffer, pos, base)


def record_header(buffer, pos: int, base: int = 0) -> tuple:
    """The header fields (``HEADER``'s tuple) of the record starting at ``pos``."""
    return record_field(HEADER_UNPACK, buffer, pos, base)


def trailing_length(buffer, end: int, base: int = 0) -> int:
    """The length a record ending at ``end`` repeats in its last four bytes."""
    if end < _TRAILING_LENGTH.size:
        raise CorruptRecordError(base + end, "a record cannot end before its trailer")
    return record_field(_TRAILING_LENGTH.unpack_from, buffer, end - _TRAILING_LENGTH.size, base)[0]


def length_from_fields(header: tuple) -> int:
    """The length an unpacked header's variable lengths add up to (with header and
    trailer): an intact record's ``header[LENGTH]`` equals it."""
    return RECORD_OVERHEAD + header[BODY_LEN] + sum(header[META_LENS])


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
    limit = min(limit, len(view))
    if pos < 0 or pos + HEADER_SIZE > limit:
        raise CorruptRecordError(commit_offset, "header runs past the end of the data")
    header = HEADER.unpack_from(view, pos)
    length = header[LENGTH]
    if header[MAGIC] != RECORD_MAGIC:
        raise CorruptRecordError(commit_offset, f"bad magic 0x{header[MAGIC]:08x}")
    if length != length_from_fields(header):
        raise CorruptRecordError(commit_offset, f"length field {length} disagrees with fields")
    end = pos + length
    if end > limit:
        raise CorruptRecordError(commit_offset, f"length {length} runs past the end of the data")
    crc, tail_length = TRAILER.unpack_from(view, end - TRAILER_SIZE)
    if tail_length != length:
        raise CorruptRecordError(
            commit_offset, f"trailing length {tail_length} differs from leading {length}"
        )
    if crc32c(view[pos : end - TRAILER_SIZE]) != crc:
        raise CorruptRecordError(commit_offset, "CRC32C mismatch")
    if header[COMMIT_OFFSET] != commit_offset:
        raise CorruptRecordError(
            commit_offset, f"record says it lives at commit-log offset {header[COMMIT_OFFSET]}"
        )
    return header


def frame_intact(view: memoryview, pos: int, limit: int) -> bool:
    """Whether a record frame starts at ``pos``: magic, consistent lengths at both ends.

    A damaged record still has its frame; bytes that merely contain the magic (inside
    another record's body) almost never do.
    """
    limit = min(limit, len(view))
    if pos < 0 or pos + HEADER_SIZE > limit:
        return False
    header = HEADER_UNPACK(view, pos)
    length = header[LENGTH]
    if header[MAGIC] != RECORD_MAGIC or length != length_from_fields(header):
        return False
    if pos + length > limit:
        return False
    return trailing_length(view, pos + length) == length


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
# length, magic, topic length
_LEAD_UNPACK = struct.Struct(f"<II{TOPIC_LEN_AT - MAGIC_AT - MAGIC_FIELD.size}xB").unpack_from


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
    limit = min(limit, len(view))
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
        or crc32c(view[pos : pos + length - TRAILER_SIZE]) != crc
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
    length = header[LENGTH]
    if expected_length and length != expected_length:
        raise CorruptRecordError(
            commit_offset, f"record is {length} bytes, its queue entry says {expected_length}"
        )
    p = pos + HEADER_SIZE
    topic_len = header[TOPIC_LEN]
    return message_with_extras(
        message_id,
        str(view[p : p + topic_len], "utf-8"),
        header[QUEUE_ID],
        header[QUEUE_OFFSET],
        commit_offset,
        header[BORN_MS],
        header[STORE_MS],
        header[TAG_LEN],
        header[KEYS_LEN],
        header[PROPS_LEN],
        bytes(view[p + topic_len : pos + length - TRAILER_SIZE]),
    )


def record_length(topic: bytes, tag: bytes, keys: bytes, properties: bytes, body: bytes) -> int:
    return RECORD_OVERHEAD + len(topic) + len(tag) + len(keys) + len(properties) + len(body)
