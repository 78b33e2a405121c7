"""Records for the native data plane's tests, made by the Python reference codec
(record.encode_head / encode_trailer), and hypothesis strategies for them."""

from __future__ import annotations

from hypothesis import strategies as st

from storeadapter.engine.record import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    encode_head,
    encode_trailer,
    record_length,
)

_TEXT = st.text(
    st.characters(blacklist_characters="\x01\x02\x1f", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


def encode(
    commit_offset: int,
    queue_offset: int = 0,
    born_ms: int = 1,
    store_ms: int = 1,
    queue_id: int = 0,
    topic: bytes = b"t",
    tag: bytes = b"",
    keys: bytes = b"",
    properties: bytes = b"",
    body: bytes = b"",
) -> bytes:
    """One record's bytes, as the Python reference writes it."""
    length = record_length(topic, tag, keys, properties, body)
    head = encode_head(
        length,
        commit_offset,
        queue_offset,
        born_ms,
        store_ms,
        queue_id,
        len(body),
        topic,
        tag,
        keys,
        properties,
    )
    return head + body + encode_trailer(head, body, length)


@st.composite
def record_fields(draw) -> dict:
    """The fields of a random record, its commit offset left out."""
    keys = draw(st.lists(_TEXT, max_size=3))
    properties = draw(st.dictionaries(_TEXT, _TEXT.filter(bool), max_size=3))
    return {
        "queue_offset": draw(st.integers(0, 2**64 - 1)),
        "born_ms": draw(st.integers(-(2**63), 2**63 - 1)),
        "store_ms": draw(st.integers(-(2**63), 2**63 - 1)),
        "queue_id": draw(st.integers(0, 2**32 - 1)),
        "topic": draw(st.sampled_from([b"t", b"orders", b"%RETRY%g", "t\u00e9".encode()])),
        "tag": draw(st.one_of(st.just(b""), _TEXT.map(str.encode))),
        "keys": KEY_SEPARATOR.join(keys).encode(),
        "properties": PROPERTY_SEPARATOR.join(
            f"{name}{NAME_VALUE_SEPARATOR}{value}" for name, value in properties.items()
        ).encode(),
        "body": draw(st.binary(max_size=300)),
    }
