"""The native key and tag hashes are bit-identical to the ones stored on disk so far."""

from __future__ import annotations

import hashlib

from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from storeadapter.engine import dataplane


def test_the_formats_worked_examples_hash_alike():
    assert dataplane.key_hash("t", "k") == 0x5076397E
    assert dataplane.key_hash("t", "\x01dedup\x01d1") == 0x5F4FA4C0
    assert dataplane.tag_hash(b"x") == 0x4F586EF96743DF4A
    assert dataplane.tag_hash(b"") == 0


@given(topic=st.text(min_size=1), key=st.text(min_size=1))
def test_a_key_hashes_as_crc32c_of_topic_nul_key(topic, key):
    topic = topic.encode("utf-8", "replace").decode()
    key = key.encode("utf-8", "replace").decode()
    expected = crc32c(f"{topic}\x00{key}".encode("utf-8", "surrogatepass")) or 1
    assert dataplane.key_hash(topic, key) == expected


@given(tag=st.binary(min_size=1, max_size=255))
def test_a_tag_hashes_as_blake2b_64(tag):
    digest = hashlib.blake2b(tag, digest_size=8).digest()
    assert dataplane.tag_hash(tag) == (int.from_bytes(digest, "little") or 1)
