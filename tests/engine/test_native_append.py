"""The native batch encoder writes the bytes the Python reference writes, and the
entries of each queue as queuebase.pack_entry packs them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeadapter.engine import dataplane
from storeadapter.engine.queuebase import pack_entry
from storeadapter.engine.results import STATUS_OK, AppendResult
from tests.engine.nativecases import encode, record_fields

# Not run again in the shared-layout pass: the native encoder beside the Python codec, no topic.
pytestmark = pytest.mark.one_layout


@settings(max_examples=100, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=200), min_size=1, max_size=20),
    turn=st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True),
    tail=st.integers(0, 2**40),
    now=st.integers(0, 2**45),
)
def test_a_plain_batch_encodes_as_the_python_codec_does(bodies, turn, tail, now):
    bases = [100 * q for q in turn]
    data, entries, results = dataplane.encode_plain(
        bodies, b"topic", tail, now, turn, bases, "0000ABCD", "topic"
    )
    expected = b""
    wanted_entries = {q: b"" for q in turn}
    wanted_results = []
    for i, body in enumerate(bodies):
        queue, offset = turn[i % len(turn)], bases[i % len(turn)] + i // len(turn)
        record = encode(tail + len(expected), offset, now, now, queue, b"topic", body=body)
        wanted_entries[queue] += pack_entry(tail + len(expected), len(record), 0)
        wanted_results.append(
            AppendResult(
                f"0000ABCD{tail + len(expected):016X}",
                "topic",
                queue,
                offset,
                tail + len(expected),
                now,
                STATUS_OK,
            )
        )
        expected += record
    assert data == expected
    assert dict(zip(turn, entries, strict=True)) == wanted_entries
    assert results == wanted_results
    assert all(type(result) is AppendResult for result in results)


@settings(max_examples=100, deadline=None)
@given(records=st.lists(record_fields(), min_size=1, max_size=6), tail=st.integers(0, 2**40))
def test_placed_records_encode_as_the_python_codec_does(records, tail):
    rows, expected, wanted_entries = [], b"", b""
    for fields in records:
        commit_offset = tail + len(expected)
        fields = {**fields, "topic": b"topic"}
        record = encode(commit_offset, **fields)
        rows.append(
            (
                commit_offset,
                fields["queue_offset"],
                fields["born_ms"],
                fields["store_ms"],
                fields["queue_id"],
                fields["tag"],
                fields["keys"],
                fields["properties"],
                fields["body"],
                7,
            )
        )
        wanted_entries += pack_entry(commit_offset, len(record), 7)
        expected += record
    assert dataplane.encode_placed(rows, b"topic") == (expected, wanted_entries)
