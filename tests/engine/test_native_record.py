"""The native record check and decoder agree with the Python reference (record.py) on
the format's test vectors, on random records and on damaged ones, and never panic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeadapter.engine import dataplane
from storeadapter.engine.errors import CorruptRecordError
from storeadapter.engine.record import check_record, decode_record, frame_intact
from tests.engine.nativecases import encode, record_fields

# Not run again in the shared-layout pass: the native record
# checks beside the Python ones, no topic.
pytestmark = pytest.mark.one_layout

PREFIX = "6F203303"

# docs/FORMAT.md, "Worked example": append("t", b"hi", key="k", tag="x") to queue 1.
WORKED_EXAMPLE = bytes.fromhex(
    "450000005444 4d520000000000000000 0000000000000000 00f81901a2010000"
    "00f81901a2010000 01000000 02000000 0000 01 01 0100 0000 74 78 6b 6869 5a8ebdd2 45000000"
)


class Buffer:
    """What dataplane.decode_at reads of a segment: its mapping and its first offset."""

    def __init__(self, data: bytes, base: int = 0) -> None:
        self.map = data
        self.base = base


def _python(data: bytes, pos: int, commit_offset: int):
    try:
        return decode_record(memoryview(data), pos, len(data), commit_offset, PREFIX)
    except CorruptRecordError as error:
        return error.reason


def _native(data: bytes, pos: int, commit_offset: int):
    message_id = f"{PREFIX}{commit_offset:016X}"
    return dataplane.decode_at(Buffer(data), pos, commit_offset, message_id)


def test_the_worked_example_decodes_alike_in_both_codecs():
    native = _native(WORKED_EXAMPLE, 0, 0)
    assert native == _python(WORKED_EXAMPLE, 0, 0)
    assert (native.topic, native.queue, native.tag, native.keys, native.body) == (
        "t",
        1,
        "x",
        ["k"],
        b"hi",
    )
    assert native.message_id == "6F2033030000000000000000"


def test_the_worked_example_checks_to_the_same_header_in_both_codecs():
    view = memoryview(WORKED_EXAMPLE)
    assert dataplane.check_record(WORKED_EXAMPLE, 0, 0) == check_record(view, 0, 69, 0)


@settings(max_examples=150, deadline=None)
@given(fields=record_fields(), pad=st.integers(0, 40))
def test_a_random_record_decodes_to_the_same_message(fields, pad):
    data = bytes(pad) + encode(pad + 1000, **fields) + bytes(8)
    assert _native(data, pad, pad + 1000) == _python(data, pad, pad + 1000)


@settings(max_examples=300, deadline=None)
@given(
    fields=record_fields(),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 400)),
)
def test_a_damaged_record_is_refused_for_the_same_reason(fields, flips, cut):
    data = bytearray(encode(0, **fields))
    for at, mask in flips:
        data[at % len(data)] ^= mask
    data = bytes(data if cut is None else data[:cut])
    view = memoryview(data)
    try:
        expected = check_record(view, 0, len(data), 0)
    except CorruptRecordError as error:
        with pytest.raises(CorruptRecordError) as raised:
            dataplane.check_record(data, 0, 0)
        assert raised.value.reason == error.reason
        assert _native(data, 0, 0) is None
    else:
        assert dataplane.check_record(data, 0, 0) == expected
    assert dataplane._native.check_at(data, 0, 0) is not None
    assert frame_intact(view, 0, len(data)) == _frame(data)


def _frame(data: bytes) -> bool:
    """Whether the native check got past the frame (rules 1 to 5) of the record at 0."""
    found = dataplane._native.check_at(data, 0, 0)
    return type(found) is tuple or found == "CRC32C mismatch" or found.startswith("record says")


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=200),
    pos=st.integers(0, 250),
    commit_offset=st.integers(0, 2**64 - 1),
)
def test_arbitrary_bytes_never_panic_the_native_check(data, pos, commit_offset):
    found = dataplane._native.check_at(data, pos, commit_offset)
    assert type(found) in (tuple, str)
    assert _native(data, pos, commit_offset) is None or type(found) is tuple


def test_a_record_of_another_length_than_its_entry_is_not_accepted():
    assert dataplane.decode_at(Buffer(WORKED_EXAMPLE), 0, 0, PREFIX + "0" * 16, 70) is None
