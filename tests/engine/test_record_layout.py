"""The record's and the shared state's layouts are written once (record.py,
sharedstate.py): the named positions agree with the structs they are made from, and
both agree with docs/FORMAT.md, so a change in one place without the other fails. The
crate (native/src/record.rs) has the record's layout too: its constants, exported by
``dataplane.record_layout()``, agree with record.py's."""

from __future__ import annotations

import re
import struct
from pathlib import Path

from storeadapter.engine import dataplane, record, sharedstate
from storeadapter.engine.record import (
    HEADER,
    HEADER_LAYOUT,
    HEADER_SIZE,
    TRAILER_SIZE,
    TRAILING_LENGTH_SIZE,
)

FORMAT_MD = Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md"
_CODES = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i64": "q", "bytes": "4s"}


def _table(section: str) -> list[tuple[int, int, str, str]]:
    """(offset, size, type, field) of the rows with a numeric offset in the first table
    after the heading ``section`` of FORMAT.md."""
    text = FORMAT_MD.read_text()
    start = text.index(f"\n## {section}") + 1
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].isdigit() and cells[1].isdigit():
            rows.append((int(cells[0]), int(cells[1]), cells[2], cells[3]))
        elif rows and not line.startswith("|"):
            break
    return rows


def _positions(fmt: str) -> list[int]:
    """Where each field of a struct format starts (from the struct module itself)."""
    codes = []
    for count, code in re.findall(r"(\d*)([a-zA-Z])", fmt.lstrip("<")):
        codes += [count + code] if code == "s" else [code] * int(count or 1)
    return [struct.calcsize("<" + "".join(codes[:i])) for i in range(len(codes))]


def test_the_header_struct_is_made_from_the_layout_table() -> None:
    assert HEADER.format == "<" + "".join(code for _name, code in HEADER_LAYOUT)
    assert HEADER_SIZE == HEADER.size == 56
    names = [name for name, _code in HEADER_LAYOUT]
    for position, (name, at) in zip(
        _positions(HEADER.format), record.FIELD_AT.items(), strict=True
    ):
        assert at == position, name
    assert list(record.FIELD_AT) == names


def test_the_named_items_and_positions_follow_the_struct() -> None:
    names = [name for name, _code in HEADER_LAYOUT]
    items = {
        "length": record.LENGTH,
        "magic": record.MAGIC,
        "commit_offset": record.COMMIT_OFFSET,
        "queue_offset": record.QUEUE_OFFSET,
        "born_ms": record.BORN_MS,
        "store_ms": record.STORE_MS,
        "queue_id": record.QUEUE_ID,
        "body_len": record.BODY_LEN,
        "flags": record.FLAGS,
        "topic_len": record.TOPIC_LEN,
        "tag_len": record.TAG_LEN,
        "keys_len": record.KEYS_LEN,
        "props_len": record.PROPS_LEN,
    }
    assert [items[name] for name in names] == list(range(len(names)))
    positions = dict(zip(names, _positions(HEADER.format), strict=True))
    assert positions["magic"] == record.MAGIC_AT
    assert positions["commit_offset"] == record.COMMIT_OFFSET_AT
    assert positions["queue_offset"] == record.QUEUE_OFFSET_AT
    assert positions["store_ms"] == record.STORE_TIME_AT
    assert positions["topic_len"] == record.TOPIC_LEN_AT
    assert names[record.META_LENS] == ["topic_len", "tag_len", "keys_len", "props_len"]


def test_the_layout_is_the_documented_one() -> None:
    documented = [row for row in _table("Record") if row[0] < HEADER_SIZE]
    assert [(field, at, size) for at, size, _type, field in documented] == [
        (name, record.FIELD_AT[name], struct.calcsize("<" + code)) for name, code in HEADER_LAYOUT
    ]
    assert [_CODES[kind] for _at, _size, kind, _field in documented] == [
        code for _name, code in HEADER_LAYOUT
    ]
    # The trailer: "length − 8" the CRC, "length − 4" the length again.
    text = FORMAT_MD.read_text()
    assert f"| length − {TRAILER_SIZE} | 4 | u32  | crc" in text
    assert f"| length − {TRAILING_LENGTH_SIZE} | 4 | u32  | length" in text


def test_the_crates_layout_constants_are_record_pys() -> None:
    native = dataplane.record_layout()

    assert native["header_fields"] == [
        (name, record.FIELD_AT[name], record.FIELD[name].size) for name, _code in HEADER_LAYOUT
    ]
    assert native["record_magic"] == record.RECORD_MAGIC
    assert native["end_of_segment_magic"] == record.END_OF_SEGMENT_MAGIC
    assert native["header_size"] == HEADER_SIZE
    assert native["trailer_size"] == native["crc_from_end"] == TRAILER_SIZE
    assert native["length_from_end"] == TRAILING_LENGTH_SIZE
    assert native["record_overhead"] == record.RECORD_OVERHEAD
    assert native["marker_size"] == record.MARKER_SIZE


def test_the_accessors_read_the_fields_they_name() -> None:
    fields = (200, record.RECORD_MAGIC, 1 << 40, 7, -5, 1795314808832, 3, 9, 0, 1, 2, 3, 4)
    data = (
        bytes(16)
        + HEADER.pack(*fields)
        + bytes(200 - HEADER_SIZE - 4)
        + (200).to_bytes(4, "little")
    )
    assert record.record_magic(data, 16) == record.RECORD_MAGIC
    assert record.record_commit_offset(data, 16) == 1 << 40
    assert record.record_store_time(data, 16) == 1795314808832
    assert record.trailing_length(data, 216) == 200
    header = HEADER.unpack_from(data, 16)
    assert header[record.STORE_MS] == 1795314808832
    assert record.length_from_fields(header) == record.RECORD_OVERHEAD + 9 + 1 + 2 + 3 + 4
    picked = struct.unpack_from(
        record.fields_format(("commit_offset", "store_ms", "queue_id"), 200), data, 16
    )
    assert picked == (1 << 40, 1795314808832, 3)


def test_the_shared_state_header_is_the_documented_one() -> None:
    documented = {field: (at, size) for at, size, _type, field in _table("Shared state (`state`)")}
    fmt = sharedstate.STATE_HEADER.format
    positions = _positions(fmt)
    # magic, version, sequence, then the shared fields in SharedSnapshot's order
    names = ["magic", "version", "sequence", *sharedstate.SharedSnapshot._fields[:5]]
    names += ["writing", "ring_seq"]
    assert [documented[name][0] for name in names] == positions
    assert sharedstate.STATE_HEADER.size == documented["extent"][0] == sharedstate._EXTENT_AT
    assert documented["sequence"][0] == sharedstate._SEQUENCE_AT
    assert documented["tail"][0] == sharedstate._TAIL_AT
    assert documented["writing"][0] == sharedstate._WRITING_AT
    assert documented["ring_seq"][0] == sharedstate._RING_SEQ_AT
    fields = sharedstate.STATE_HEADER.unpack(
        sharedstate.STATE_HEADER.pack(b"TDMS", 1, 6, 69, 0, 2, 1, 1, 0, 1)
    )
    assert sharedstate.header_written(fields) and not sharedstate.header_updating(fields)
    assert sharedstate.header_snapshot(fields) == sharedstate.SharedSnapshot(69, 0, 2, 1, 1, 1)
    assert sharedstate.header_snapshot(fields, notes_trusted=False).ring_seq == -1
